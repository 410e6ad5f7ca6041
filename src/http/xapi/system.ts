/**
 * The public routes beside the xAPI resources: heartbeats (no credentials), whoami, the metrics,
 * the API's description and its page (no credentials: they hold no data), and the About resource.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticator, AuthUser } from '../../auth/types.ts';
import type { Config } from '../../config.ts';
import type { Forwarder } from '../../forwarding/forwarder.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../monitoring/metrics.ts';
import type { Store } from '../../store/types.ts';
import { LECTERN_VERSION } from '../../version.ts';
import { etagOf } from '../../xapi/documents.ts';
import { parseParams } from '../../xapi/params.ts';
import { aboutVersions, type XapiVersion } from '../../xapi/versions.ts';
import { admit } from '../access.ts';
import { type Answer, json, JSON_UTF8, send } from '../answer.ts';
import { buildOpenApi, DOCS_PAGE, docsAsset, type RegisteredRoute } from './openapi.ts';
import type { XapiRequest } from './request.ts';

export interface SystemDeps {
  config: Config;
  store: Store;
  auth: Pick<Authenticator, 'authenticate'>;
  forwarder?: Pick<Forwarder, 'active' | 'stats'>;
  metrics?: Metrics;
}

export function registerSystem(app: FastifyInstance, deps: SystemDeps): void {
  const { config, store, metrics } = deps;
  for (const path of ['/lbheartbeat', '/__lbheartbeat__']) app.get(path, async (_request, reply) => send(reply, lbHeartbeat()));
  for (const path of ['/heartbeat', '/__heartbeat__']) app.get(path, async (_request, reply) => send(reply, await heartbeat(store, deps.forwarder)));
  app.get('/whoami', async (request, reply) => {
    const admitted = await admit(deps.auth, request.headers.authorization, request.ip);
    return send(reply, 'refusal' in admitted ? admitted.refusal : whoami(admitted.user));
  });
  if (metrics && config.metricsAccess !== 'off') app.get('/metrics', async (request, reply) => serveMetrics(deps, metrics, request, reply));
}

/** GET /metrics: every store's figures, so only for the operator's user (`all` in the default store) unless LECTERN_METRICS_ACCESS=open. */
async function serveMetrics(deps: SystemDeps, metrics: Metrics, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (deps.config.metricsAccess === 'scope') {
    const admitted = await admit(deps.auth, request.headers.authorization, request.ip);
    if ('refusal' in admitted) return send(reply, admitted.refusal);
    if (!admitted.user.scopes.includes('all') || admitted.user.target !== '') {
      return send(reply, json(403, { detail: "reading /metrics needs the all scope in the default store, the operator's (or LECTERN_METRICS_ACCESS=open)" }));
    }
  }
  return reply.type(metrics.contentType).send(await metrics.render());
}

/**
 * The API's description (/openapi.json) of `routes`, every route registered but the console's,
 * and its interactive page. Registered last, after every route it describes.
 */
export function registerApiDocs(app: FastifyInstance, routes: readonly RegisteredRoute[], logger: Logger): void {
  let openapi = '';
  app.get('/openapi.json', async (_request, reply) => reply.type(JSON_UTF8).send(openapi));
  app.get('/docs', async (_request, reply) => reply.type('text/html; charset=utf-8').send(DOCS_PAGE));
  app.get('/docs/assets/*', async (request, reply) => {
    const asset = docsAsset((request.params as { '*': string })['*']);
    if (!asset) return send(reply, json(404, { detail: 'no such documentation file' }));
    return reply.type(asset.contentType).header('cache-control', 'public, max-age=86400').send(asset.body);
  });
  const description = buildOpenApi(routes, LECTERN_VERSION);
  if (description['x-undescribed']) logger.warn({ routes: description['x-undescribed'] }, 'routes without an OpenAPI description in src/http/xapi/openapi.ts');
  openapi = JSON.stringify(description);
}

export const lbHeartbeat = (): Answer => json(200, { status: 'ok' });

/**
 * 200 when the database answers a real query, 500 naming the failed check otherwise; with read
 * replicas, each one's state and lag (ms) by its place in LECTERN_POSTGRES_READ_URLS. With
 * forwarding targets, whether each holds dead letters (informational: a failing target does not
 * fail it), by configuration entry. The heartbeat needs no credentials, so neither target urls
 * nor figures are in it: the queues hold every store's statements, and their counts would tell
 * anyone every store's volume (`/metrics`, the operator's, and `lectern forwarding status` show them).
 */
export async function heartbeat(store: Store, forwarder?: Pick<Forwarder, 'active' | 'stats'>): Promise<Answer> {
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

export const whoami = (user: AuthUser): Answer => json(200, { username: user.username, scopes: ['authenticated', ...user.scopes], agent: user.agent });

/** The About resource (§2.8): it takes no parameters, so any is a 400 (§3.2.s3.b7). */
export function about(req: XapiRequest, served: readonly XapiVersion[]): Answer {
  parseParams('about', 'GET', req.query);
  const res = json(200, { version: aboutVersions(served), extensions: { 'https://lectern.dev/extensions/version': LECTERN_VERSION } });
  // Every GET carries an ETag (§3.1.s4.b1).
  return { ...res, headers: { ...res.headers, etag: etagOf(Buffer.from(res.body as string, 'utf8')) } };
}
