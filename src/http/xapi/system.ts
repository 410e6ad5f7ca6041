/** Non-xAPI endpoints: heartbeats (no auth), whoami (auth), and the xAPI About resource (no auth). */
import type { Store } from '../../store/types.ts';
import type { Forwarder } from '../../forwarding/forwarder.ts';
import type { AuthUser } from '../../auth/types.ts';
import { aboutVersions, type XapiVersion } from '../../xapi/versions.ts';
import { etagOf } from '../../xapi/documents.ts';
import { parseParams } from '../../xapi/params.ts';
import { json, type XapiRequest, type XapiResponse } from '../request.ts';
import { LECTERN_VERSION } from '../../version.ts';

export const lbHeartbeat = (): XapiResponse => json(200, { status: 'ok' });

/**
 * 200 when the database answers a real query, 500 naming the failed check otherwise; with read
 * replicas, each one's state and lag (ms) by its place in LECTERN_POSTGRES_READ_URLS. With
 * forwarding targets, whether each holds dead letters (informational: a failing target does not
 * fail it), by configuration entry. The heartbeat needs no credentials, so neither target urls
 * nor figures are in it: the queues hold every store's statements, and their counts would tell
 * anyone every store's volume (`/metrics`, the operator's, and `lectern forwarding status` show them).
 */
export async function heartbeat(store: Store, forwarder?: Pick<Forwarder, 'active' | 'stats'>): Promise<XapiResponse> {
  try {
    await store.ping();
    // Read replicas by place and state: a replica that is not read from does not fail it (the
    // primary answers its reads). No host names: /metrics, the operator's, has them.
    const replicas = store.replicas?.().map((r) => ({ replica: r.replica, state: r.state, lag_ms: r.lagMs }));
    const body: Record<string, unknown> = { database: 'ok', ...(replicas?.length && { replicas }) };
    if (forwarder?.active) body.forwarding = (await forwarder.stats()).map(({ entry, dead }) => ({ entry, dead_letters: dead > 0 }));
    return json(200, body);
  } catch (err) {
    return json(500, { database: 'error', detail: `the ${store.backend} database does not answer: ${(err as Error).message}` });
  }
}

export const whoami = (user: AuthUser): XapiResponse =>
  json(200, { username: user.username, scopes: ['authenticated', ...user.scopes], agent: user.agent });

/** The About resource (§2.8): it takes no parameters, so any is a 400 (§3.2.s3.b7). */
export function about(req: XapiRequest, served: readonly XapiVersion[]): XapiResponse {
  parseParams('about', 'GET', req.query);
  const res = json(200, { version: aboutVersions(served), extensions: { 'https://lectern.dev/extensions/version': LECTERN_VERSION } });
  // Every GET carries an ETag (§3.1.s4.b1).
  return { ...res, headers: { ...res.headers, etag: etagOf(Buffer.from(res.body as string, 'utf8')) } };
}
