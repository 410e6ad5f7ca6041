/**
 * The admin API under /admin/api/ (docs/admin-api.md): JSON routes, each thin over a use case of
 * src/ops/. Every request is authenticated as the xAPI routes are (the same Authenticator), then
 * needs an admin role (src/auth/scopes.ts, adminRole: 403 without one); only then is its body
 * read. Failed authentications here are counted per client address and per user name
 * (LECTERN_ADMIN_MAX_FAILURES within LECTERN_ADMIN_FAILURE_WINDOW): beyond, 429 with Retry-After
 * and no check at all.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { readCredentialsFile } from '../auth/credentials.ts';
import { adminRole } from '../auth/scopes.ts';
import { SignInFailures } from '../auth/throttle.ts';
import type { Authenticator, AuthUser } from '../auth/types.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { LrsError, ValidationFailed } from '../errors.ts';
import type { IngestRate } from '../monitoring/ingest.ts';
import {
  type AdminActor,
  adminErase,
  AUDIT_PAGE_MAX,
  checkGrantable,
  credentialInReach,
  listAudit,
  listStores,
  reachableStore,
  recordAudit,
  replayAudited,
  REJECTION_PAGE_MAX,
  rejectionInReach,
  requireOperator,
  serverStatus,
} from '../ops/admin.ts';
import { createCredential, listCredentials, revokeCredential, rotateCredential } from '../ops/credentials.ts';
import { DEAD_LETTER_PAGE_MAX, forwardingStatus, listDeadLetters, retryDeadLetters } from '../ops/forwarding.ts';
import { storeOverview } from '../ops/overview.ts';
import { clearRejections, listRejections } from '../ops/rejections.ts';
import type { KeptRejection, Store } from '../store/types.ts';
import { LECTERN_VERSION } from '../version.ts';
import type { Agent } from '../xapi/types.ts';
import { validateAgentParam } from '../xapi/validate.ts';
import { errorResponse, HttpRefusal } from './errors.ts';
import { json, parseQuery, type XapiResponse } from './request.ts';

export const ADMIN_PREFIX = '/admin/api';

export interface AdminDeps {
  config: Config;
  store: Store;
  auth: Authenticator;
  /** When the server started (epoch ms): the status's uptime. */
  startedMs: number;
  /** What audit times, credential creation, expiry and rotation grace are measured by. */
  clock: Clock;
  /** This process's statements stored per minute (absent: the status reports none). */
  ingest?: IngestRate;
  /** Reads an admitted request's body within the server's memory budget (undefined: none sent). */
  readBody(request: FastifyRequest, reply: FastifyReply, user: AuthUser): Promise<Buffer | undefined>;
}

/** What a route handler gets: who acts, the query's parameters (already checked against the route's list), and the body, read on demand. */
interface AdminCall {
  by: AdminActor;
  /** The path's parameters (`:key`, `:id`). */
  params: Record<string, string>;
  query: Record<string, string>;
  body(): Promise<Record<string, unknown>>;
}

type AdminHandler = (call: AdminCall) => Promise<XapiResponse>;

const issue = (where: 'query' | 'body', name: string, msg: string, type = 'value_error'): ValidationFailed =>
  new ValidationFailed([{ loc: [where, name], msg, type }]);

/** The body as a JSON object with only `allowed` fields (an unknown one is likely a typo: 400 naming it). */
function parseBody(raw: Buffer | undefined, contentType: string | undefined, allowed: readonly string[]): Record<string, unknown> {
  if (raw === undefined || raw.length === 0) return {};
  if (!/^application\/json\s*(;|$)/i.test(contentType ?? '')) throw new LrsError('bad_request', 'an admin request body must be JSON, sent with Content-Type: application/json');
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new LrsError('bad_request', `the body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new LrsError('bad_request', 'the body must be a JSON object');
  const body = value as Record<string, unknown>;
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length) {
    throw new ValidationFailed(unknown.map((k) => ({ loc: ['body', k], msg: `unknown field (this route takes ${allowed.join(', ') || 'none'})`, type: 'value_error.unknown_field' })));
  }
  return body;
}

const optionalString = (body: Record<string, unknown>, name: string): string | undefined => {
  const v = body[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw issue('body', name, 'must be a string', 'type_error.str');
  return v;
};

const optionalBoolean = (body: Record<string, unknown>, name: string): boolean | undefined => {
  const v = body[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw issue('body', name, 'must be true or false', 'type_error.bool');
  return v;
};

const stringList = (body: Record<string, unknown>, name: string): string[] => {
  const v = body[name];
  if (v === undefined) throw issue('body', name, 'is required: a list of names', 'value_error.missing');
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw issue('body', name, 'must be a list of strings', 'type_error.list');
  return v as string[];
};

const timeParam = (query: Record<string, string>, name: string): number | undefined => {
  const v = query[name];
  if (v === undefined) return undefined;
  const ms = /^\d{4}-\d\d-\d\dT/.test(v) ? Date.parse(v) : Number.NaN;
  if (Number.isNaN(ms)) throw issue('query', name, 'must be an ISO 8601 timestamp, e.g. 2026-01-31T12:00:00Z');
  return ms;
};

const intParam = (query: Record<string, string>, name: string, min: number, max: number): number | undefined => {
  const v = query[name];
  if (v === undefined) return undefined;
  if (!/^\d{1,15}$/.test(v) || Number(v) < min || Number(v) > max) throw issue('query', name, `must be an integer from ${min} to ${max}`, 'type_error.integer');
  return Number(v);
};

/** The user name of Basic credentials, without checking them (what the per-user failure count is keyed by). */
function basicUser(authorization: string | undefined): string | undefined {
  const m = authorization && /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(0, colon);
}

/** A kept rejection as shown: the body as JSON when it parses (else its text), left out of lists. */
function shownRejection(r: KeptRejection, withBody: boolean): Record<string, unknown> {
  const { id, tenant, body, atMs, writer: _, ...rest } = r;
  const out: Record<string, unknown> = { id, target: tenant, time: new Date(atMs).toISOString(), ...rest, bodyCut: body !== undefined && body.length < r.bodyBytes };
  if (!withBody || body === undefined) return out;
  const text = body.toString('utf8');
  try {
    out.body = JSON.parse(text);
  } catch {
    out.body = text;
  }
  return out;
}

/** The next page's URL: the same query with `cursor` set to the last item's id; empty when this page is not full. */
function nextPage(path: string, query: Record<string, string>, cursor: string, items: readonly { id: string }[], limit: number): string {
  if (items.length < limit) return '';
  const next = new URLSearchParams(Object.entries(query).filter(([k]) => k !== cursor));
  next.set(cursor, items[items.length - 1].id);
  return `${ADMIN_PREFIX}${path}?${next.toString()}`;
}

export function registerAdminRoutes(app: FastifyInstance, deps: AdminDeps): void {
  const { config, store, auth, clock } = deps;
  const failures = new SignInFailures(config.adminMaxFailures, config.adminFailureWindow * 1000);
  const activeTargets = () => config.xapiForwardings.filter((t) => t.isActive).map((t) => t.url);

  const send = (reply: FastifyReply, res: XapiResponse): FastifyReply => {
    reply.status(res.status);
    if (res.headers) reply.headers(res.headers);
    return res.body === undefined ? reply.send() : reply.send(res.body);
  };

  /** Authenticates, throttling failures; the user, or the answer that refuses it. */
  const admit = async (request: FastifyRequest): Promise<{ user: AuthUser } | { refusal: XapiResponse }> => {
    const authorization = request.headers.authorization;
    const name = basicUser(authorization);
    const wait = failures.blocked(request.ip, name);
    if (wait) {
      return { refusal: json(429, { detail: `too many failed admin sign-ins from this address or for this user: try again in ${wait} s` }, { 'retry-after': String(wait) }) };
    }
    const result = await auth.authenticate(authorization, request.ip);
    if (result.ok) return { user: result.user };
    // Credentials sent and refused: a failure. None sent (a client's first try) is not one.
    if (result.status === 401 && authorization !== undefined) {
      failures.failed(request.ip, name);
    }
    return { refusal: json(result.status, result.body, result.headers) };
  };

  /** An admin route: `params` the query parameters it takes, `fields` its body's. */
  const route = (method: 'GET' | 'POST', path: string, handler: AdminHandler, opts: { params?: readonly string[]; fields?: readonly string[] } = {}) => {
    app.route({
      method,
      url: `${ADMIN_PREFIX}${path}`,
      handler: async (request, reply) => {
        let res: XapiResponse;
        try {
          const admitted = await admit(request);
          if ('refusal' in admitted) return send(reply, admitted.refusal);
          const { user } = admitted;
          const role = adminRole(user);
          if (!role) {
            return send(reply, json(403, { detail: `the admin API needs the admin or admin/store scope, which the user ${user.username} does not hold (xAPI scopes, all included, do not reach it)` }));
          }
          const q = request.url.indexOf('?');
          const query = parseQuery(q < 0 ? '' : request.url.slice(q + 1));
          const params = opts.params ?? [];
          const unknown = Object.keys(query).filter((k) => !params.includes(k));
          if (unknown.length) {
            throw new ValidationFailed(unknown.map((k) => ({ loc: ['query', k], msg: `unknown parameter (this route takes ${params.join(', ') || 'none'})`, type: 'value_error.unknown_parameter' })));
          }
          const by: AdminActor = { name: user.username, role, client: request.ip, via: 'http' };
          const body = async () => parseBody(await deps.readBody(request, reply, user), request.headers['content-type'], opts.fields ?? []);
          res = await handler({ by, params: request.params as Record<string, string>, query, body });
        } catch (err) {
          if (!(err instanceof LrsError || err instanceof HttpRefusal)) throw err;
          res = errorResponse(err);
        }
        return send(reply, res);
      },
    });
  };

  route('GET', '/status', async ({ by }) => {
    requireOperator(by.role, 'the server status');
    const status = serverStatus({ version: LECTERN_VERSION, backend: store.backend, xapiVersions: config.xapiVersions, startedMs: deps.startedMs, ingest: deps.ingest?.lastMinutes() ?? [] }, clock);
    return json(200, status);
  });

  route(
    'GET',
    '/stores',
    async ({ by, query }) => {
      const stores = await listStores(store, by.role, query.target);
      return json(200, { stores: stores.map(({ lastStoredMs, ...s }) => ({ ...s, lastStored: lastStoredMs === null ? null : new Date(lastStoredMs).toISOString() })) });
    },
    { params: ['target'] },
  );

  route('GET', '/overview', async ({ by, query }) => json(200, await storeOverview(store, by.role, query.target, { clock, activeTargets: activeTargets() })), { params: ['target'] });

  route('GET', '/forwarding', async ({ by }) => {
    requireOperator(by.role, 'forwarding');
    return json(200, { targets: await forwardingStatus(store, activeTargets()) });
  });

  route(
    'GET',
    '/forwarding/dead-letters',
    async ({ by, query }) => {
      requireOperator(by.role, 'forwarding');
      const limit = intParam(query, 'limit', 1, DEAD_LETTER_PAGE_MAX) ?? 100;
      const deadLetters = await listDeadLetters(store, { target: query.url, after: intParam(query, 'after', 0, Number.MAX_SAFE_INTEGER), limit });
      return json(200, { deadLetters, more: nextPage('/forwarding/dead-letters', query, 'after', deadLetters, limit) });
    },
    { params: ['url', 'after', 'limit'] },
  );

  route(
    'POST',
    '/forwarding/retry',
    async ({ by, body }) => {
      requireOperator(by.role, 'forwarding');
      const b = await body();
      const url = optionalString(b, 'url');
      const requeued = await retryDeadLetters(store, activeTargets(), url);
      await recordAudit(store, by, 'forwarding.retry', null, { ...(url !== undefined && { url }), requeued }, clock);
      return json(200, { requeued });
    },
    { fields: ['url'] },
  );

  route(
    'POST',
    '/erase',
    async ({ by, body }) => {
      const b = await body();
      const tenant = reachableStore(by.role, optionalString(b, 'target'));
      if (b.agent === undefined) throw issue('body', 'agent', 'is required: the Agent (or identified Group) to erase, e.g. {"mbox": "mailto:ben@example.com"}', 'value_error.missing');
      const issues: ConstructorParameters<typeof ValidationFailed>[0] = [];
      const person = validateAgentParam(b.agent, ['body', 'agent'], issues);
      if (issues.length || !person) throw new ValidationFailed(issues);
      // A dry run unless asked otherwise: a forgotten field never erases anything.
      const dryRun = optionalBoolean(b, 'dryRun') ?? true;
      const pseudonymize = optionalBoolean(b, 'pseudonymize') ?? false;
      if (pseudonymize && config.pseudonymizeKey === '') {
        throw issue('body', 'pseudonymize', 'this server has no LECTERN_PSEUDONYMIZE_KEY: it cannot pseudonymize', 'value_error.unavailable');
      }
      const { report } = await adminErase(store, by, { tenant, person, dryRun, pseudonymizeKey: pseudonymize ? config.pseudonymizeKey : undefined, auditFile: config.auditFile }, clock);
      return json(200, report);
    },
    { fields: ['target', 'agent', 'dryRun', 'pseudonymize'] },
  );

  // ----- credentials (src/ops/credentials.ts) -------------------------------------------------

  route(
    'GET',
    '/credentials',
    async ({ by, query }) => {
      const target = by.role.kind === 'operator' ? query.target : reachableStore(by.role, query.target);
      return json(200, { credentials: await listCredentials(store, { target }, { clock }) });
    },
    { params: ['target'] },
  );

  route(
    'POST',
    '/credentials',
    async ({ by, body }) => {
      const b = await body();
      const target = reachableStore(by.role, optionalString(b, 'target'));
      const scopes = stringList(b, 'scopes');
      checkGrantable(by.role, scopes);
      if (b.agent === undefined) throw issue('body', 'agent', 'is required: the credential\'s Agent, the authority of what it stores', 'value_error.missing');
      if (typeof b.agent !== 'object' || b.agent === null || Array.isArray(b.agent)) throw issue('body', 'agent', 'must be an Agent object, e.g. {"mbox": "mailto:reports@example.com"}', 'type_error.dict');
      const issued = await createCredential(
        store,
        {
          scopes,
          agent: b.agent as Agent,
          target,
          key: optionalString(b, 'key'),
          label: optionalString(b, 'label'),
          expires: optionalString(b, 'expires'),
          validation: optionalString(b, 'validation'),
        },
        { fileUsers: readCredentialsFile(config.authFile).map((e) => e.username), clock },
      );
      const { secret: _, ...shown } = issued;
      await recordAudit(store, by, 'credentials.create', target, { key: shown.key, scopes: shown.scopes, label: shown.label, ...(shown.expires && { expires: shown.expires }), ...(shown.validation && { validation: shown.validation }) }, clock);
      return json(201, issued);
    },
    { fields: ['key', 'scopes', 'agent', 'target', 'expires', 'label', 'validation'] },
  );

  route('POST', '/credentials/:key/revoke', async ({ by, params }) => {
    await credentialInReach(store, by.role, params.key);
    const info = await revokeCredential(store, params.key, { clock });
    await recordAudit(store, by, 'credentials.revoke', info.target, { key: info.key }, clock);
    return json(200, info);
  });

  route(
    'POST',
    '/credentials/:key/rotate',
    async ({ by, params, body }) => {
      await credentialInReach(store, by.role, params.key);
      const b = await body();
      const grace = b.grace;
      if (grace !== undefined && (typeof grace !== 'number' || !Number.isInteger(grace))) throw issue('body', 'grace', 'must be a whole number of seconds', 'type_error.integer');
      const issued = await rotateCredential(store, params.key, { graceSeconds: grace as number | undefined }, { clock });
      await recordAudit(store, by, 'credentials.rotate', issued.target, { key: issued.key, grace: grace ?? 0 }, clock);
      return json(200, issued);
    },
    { fields: ['grace'] },
  );

  // ----- kept rejections (src/ops/rejections.ts) ---------------------------------------------

  route(
    'GET',
    '/rejections',
    async ({ by, query }) => {
      const tenant = by.role.kind === 'operator' ? query.target : reachableStore(by.role, query.target);
      const since = timeParam(query, 'since');
      const limit = intParam(query, 'limit', 1, REJECTION_PAGE_MAX) ?? 100;
      const rows = await listRejections(store, { tenant, since: since === undefined ? undefined : new Date(since), reason: query.reason, limit, keepDays: config.rejectionsKeepDays, clock });
      return json(200, { rejections: rows.map((r) => shownRejection(r, false)) });
    },
    { params: ['target', 'since', 'reason', 'limit'] },
  );

  route('GET', '/rejections/:id', async ({ by, params }) => json(200, shownRejection(await rejectionInReach(store, by.role, params.id), true)));

  route(
    'POST',
    '/rejections/replay',
    async ({ by, body }) => {
      const b = await body();
      const ids = b.ids === undefined ? undefined : stringList(b, 'ids');
      const all = optionalBoolean(b, 'all') ?? false;
      if (all === (ids !== undefined && ids.length > 0)) throw issue('body', 'ids', 'give the ids of the rejections to replay, or "all": true (not both)', 'value_error.missing');
      const validation = optionalString(b, 'validation');
      if (validation !== undefined && validation !== 'strict' && validation !== 'lax') throw issue('body', 'validation', 'must be strict or lax');
      const asked = optionalString(b, 'target');
      const tenant = by.role.kind === 'operator' ? asked : reachableStore(by.role, asked);
      // Every id in reach before anything is replayed.
      for (const id of ids ?? []) await rejectionInReach(store, by.role, id);
      return json(200, await replayAudited(store, by, { ids, all, tenant, validation }, config, clock));
    },
    { fields: ['ids', 'all', 'target', 'validation'] },
  );

  route(
    'POST',
    '/rejections/clear',
    async ({ by, body }) => {
      const b = await body();
      const asked = optionalString(b, 'target');
      const all = optionalBoolean(b, 'all') ?? false;
      if (all && asked !== undefined) throw issue('body', 'all', 'give a target or "all": true, not both');
      if (by.role.kind === 'operator' && !all && asked === undefined) throw issue('body', 'target', 'is required: the store to clear ("" for the default store), or "all": true for every store', 'value_error.missing');
      if (all) requireOperator(by.role, 'clearing every store\'s rejections');
      const tenant = all ? undefined : reachableStore(by.role, asked);
      const cleared = await clearRejections(store, tenant);
      await recordAudit(store, by, 'rejections.clear', tenant ?? null, { ...(all && { all: true }), cleared }, clock);
      return json(200, { cleared });
    },
    { fields: ['target', 'all'] },
  );

  route(
    'GET',
    '/audit',
    async ({ by, query }) => {
      const limit = intParam(query, 'limit', 1, AUDIT_PAGE_MAX) ?? 100;
      const before = intParam(query, 'before', 1, Number.MAX_SAFE_INTEGER);
      const filter = { target: query.target, action: query.action, actor: query.actor, sinceMs: timeParam(query, 'since'), untilMs: timeParam(query, 'until'), before, limit };
      const entries = await listAudit(store, by.role, filter);
      return json(200, { entries, more: nextPage('/audit', query, 'before', entries, limit) });
    },
    { params: ['target', 'action', 'actor', 'since', 'until', 'limit', 'before'] },
  );
}
