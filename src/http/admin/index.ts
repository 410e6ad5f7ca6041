/**
 * The admin API under /admin/api/ (docs/admin-api.md): JSON routes, each a translation of its
 * request into the input of one admin action of src/ops/admin/ (which reaches, grants, acts and
 * audits) and of its result or refusal into the answer. Every request is authenticated as the xAPI routes are (the same Authenticator), then
 * needs an admin role (src/auth/scopes.ts, adminRole: 403 without one); only then is its body
 * read. Failed authentications here are counted per client address and per user name
 * (LECTERN_ADMIN_MAX_FAILURES within LECTERN_ADMIN_FAILURE_WINDOW): beyond, 429 with Retry-After
 * and no check at all.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SignInFailures } from '../../auth/throttle.ts';
import type { Authenticator, AuthUser } from '../../auth/types.ts';
import type { Clock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import { LrsError, ValidationFailed } from '../../errors.ts';
import { activeTargets } from '../../forwarding/config.ts';
import type { IngestRate } from '../../monitoring/ingest.ts';
import { createCredential, listCredentials, revokeCredential, rotateCredential } from '../../ops/admin/credentials.ts';
import { erase } from '../../ops/admin/erasure.ts';
import { forwardingStatus, listDeadLetters, retryDeadLetters } from '../../ops/admin/forwarding.ts';
import { AUDIT_PAGE_MAX, listAudit, listStores, serverStatus } from '../../ops/admin/reads.ts';
import { clearRejections, listRejections, REJECTION_PAGE_MAX, type ReplayInput, replayRejections, showRejection } from '../../ops/admin/rejections.ts';
import { type AdminActor, type AdminContext, httpActor } from '../../ops/admin/roles.ts';
import { OpsError } from '../../ops/errors.ts';
import { DEAD_LETTER_PAGE_MAX } from '../../ops/forwarding.ts';
import { storeOverview } from '../../ops/overview.ts';
import type { KeptRejection, Store } from '../../store/types.ts';
import type { Agent } from '../../xapi/types.ts';
import { validateAgentParam } from '../../xapi/validate.ts';
import { type Answer as XapiResponse, json } from '../answer.ts';
import { errorAnswer as errorResponse, HttpRefusal } from '../errors.ts';
import { parseQuery } from '../request.ts';

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

/** What a route handler gets: the actions' context, who acts, the query's parameters (already checked against the route's list), and the body, read on demand. */
interface AdminCall {
  ctx: AdminContext;
  deps: AdminDeps;
  by: AdminActor;
  /** The path's parameters (`:key`, `:id`). */
  params: Record<string, string>;
  query: Record<string, string>;
  body(): Promise<Record<string, unknown>>;
}

/** An admin route: `params` the query parameters it takes, `fields` its body's. */
interface AdminRoute {
  method: 'GET' | 'POST';
  path: string;
  params?: readonly string[];
  fields?: readonly string[];
  handler(call: AdminCall): Promise<XapiResponse>;
}

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

/** A refusal of an admin action that names its input field: answered as the body's field it came from. */
function answerOf(err: LrsError | HttpRefusal): XapiResponse {
  if (err instanceof OpsError && err.field !== undefined && err.kind === 'bad_request') {
    return errorResponse(issue('body', err.field, err.message.replace(`${err.field}: `, ''), 'value_error'));
  }
  return errorResponse(err);
}

/** The Agent of a body's `agent` field, validated as the `agent` parameter is; `missing` says what it is for. */
function bodyAgent(b: Record<string, unknown>, missing: string): Agent {
  if (b.agent === undefined) throw issue('body', 'agent', `is required: ${missing}`, 'value_error.missing');
  const issues: ConstructorParameters<typeof ValidationFailed>[0] = [];
  const agent = validateAgentParam(b.agent, ['body', 'agent'], issues);
  if (issues.length || !agent) throw new ValidationFailed(issues);
  return agent as Agent;
}

/** The admin routes, each a translation of its request into one admin action's input, and of its result into the answer. */
const ROUTES: AdminRoute[] = [
  {
    method: 'GET',
    path: '/status',
    handler: async ({ ctx, deps, by }) => json(200, serverStatus(ctx, by, { startedMs: deps.startedMs, ingest: deps.ingest?.lastMinutes() ?? [] })),
  },
  {
    method: 'GET',
    path: '/stores',
    params: ['target'],
    async handler({ ctx, by, query }) {
      const stores = await listStores(ctx, by, { target: query.target });
      return json(200, { stores: stores.map(({ lastStoredMs, ...s }) => ({ ...s, lastStored: lastStoredMs === null ? null : new Date(lastStoredMs).toISOString() })) });
    },
  },
  {
    method: 'GET',
    path: '/overview',
    params: ['target'],
    handler: async ({ ctx, by, query }) => json(200, await storeOverview(ctx.store, by.role, query.target, { clock: ctx.clock, activeTargets: activeTargets(ctx.config.xapiForwardings) })),
  },
  { method: 'GET', path: '/forwarding', handler: async ({ ctx, by }) => json(200, { targets: await forwardingStatus(ctx, by) }) },
  {
    method: 'GET',
    path: '/forwarding/dead-letters',
    params: ['url', 'after', 'limit'],
    async handler({ ctx, by, query }) {
      const limit = intParam(query, 'limit', 1, DEAD_LETTER_PAGE_MAX) ?? 100;
      const deadLetters = await listDeadLetters(ctx, by, { url: query.url, after: intParam(query, 'after', 0, Number.MAX_SAFE_INTEGER), limit });
      return json(200, { deadLetters, more: nextPage('/forwarding/dead-letters', query, 'after', deadLetters, limit) });
    },
  },
  {
    method: 'POST',
    path: '/forwarding/retry',
    fields: ['url'],
    handler: async ({ ctx, by, body }) => json(200, { requeued: await retryDeadLetters(ctx, by, { url: optionalString(await body(), 'url') }) }),
  },
  {
    method: 'POST',
    path: '/erase',
    fields: ['target', 'agent', 'dryRun', 'pseudonymize'],
    async handler({ ctx, by, body }) {
      const b = await body();
      const target = optionalString(b, 'target');
      const person = bodyAgent(b, 'the Agent (or identified Group) to erase, e.g. {"mbox": "mailto:ben@example.com"}');
      // A dry run unless asked otherwise: a forgotten field never erases anything.
      const dryRun = optionalBoolean(b, 'dryRun') ?? true;
      const pseudonymize = optionalBoolean(b, 'pseudonymize') ?? false;
      return json(200, (await erase(ctx, by, { target, person, dryRun, pseudonymize })).report);
    },
  },
  // ----- credentials (src/ops/admin/credentials.ts) -------------------------------------------
  {
    method: 'GET',
    path: '/credentials',
    params: ['target'],
    handler: async ({ ctx, by, query }) => json(200, { credentials: (await listCredentials(ctx, by, { target: query.target })).credentials }),
  },
  {
    method: 'POST',
    path: '/credentials',
    fields: ['key', 'scopes', 'agent', 'target', 'expires', 'label', 'validation'],
    async handler({ ctx, by, body }) {
      const b = await body();
      const target = optionalString(b, 'target');
      const scopes = stringList(b, 'scopes');
      if (b.agent === undefined) throw issue('body', 'agent', 'is required: the credential\'s Agent, the authority of what it stores', 'value_error.missing');
      if (typeof b.agent !== 'object' || b.agent === null || Array.isArray(b.agent)) throw issue('body', 'agent', 'must be an Agent object, e.g. {"mbox": "mailto:reports@example.com"}', 'type_error.dict');
      const input = { scopes, agent: b.agent as Agent, target, key: optionalString(b, 'key'), label: optionalString(b, 'label'), expires: optionalString(b, 'expires'), validation: optionalString(b, 'validation') };
      return json(201, await createCredential(ctx, by, input));
    },
  },
  { method: 'POST', path: '/credentials/:key/revoke', handler: async ({ ctx, by, params }) => json(200, await revokeCredential(ctx, by, { key: params.key })) },
  {
    method: 'POST',
    path: '/credentials/:key/rotate',
    fields: ['grace'],
    async handler({ ctx, by, params, body }) {
      const grace = (await body()).grace;
      if (grace !== undefined && (typeof grace !== 'number' || !Number.isInteger(grace))) throw issue('body', 'grace', 'must be a whole number of seconds', 'type_error.integer');
      return json(200, await rotateCredential(ctx, by, { key: params.key, graceSeconds: grace as number | undefined }));
    },
  },
  // ----- kept rejections (src/ops/admin/rejections.ts) -----------------------------------------
  {
    method: 'GET',
    path: '/rejections',
    params: ['target', 'since', 'reason', 'limit'],
    async handler({ ctx, by, query }) {
      const since = timeParam(query, 'since');
      const limit = intParam(query, 'limit', 1, REJECTION_PAGE_MAX) ?? 100;
      const rows = await listRejections(ctx, by, { target: query.target, since: since === undefined ? undefined : new Date(since), reason: query.reason, limit });
      return json(200, { rejections: rows.map((r) => shownRejection(r, false)) });
    },
  },
  { method: 'GET', path: '/rejections/:id', handler: async ({ ctx, by, params }) => json(200, shownRejection(await showRejection(ctx, by, { id: params.id }), true)) },
  {
    method: 'POST',
    path: '/rejections/replay',
    fields: ['ids', 'all', 'target', 'validation', 'overrideWriter'],
    async handler({ ctx, by, body }) {
      const b = await body();
      const ids = b.ids === undefined ? undefined : stringList(b, 'ids');
      const validation = optionalString(b, 'validation');
      if (validation !== undefined && validation !== 'strict' && validation !== 'lax') throw issue('body', 'validation', 'must be strict or lax');
      const input: ReplayInput = { ids, all: optionalBoolean(b, 'all') ?? false, target: optionalString(b, 'target'), validation, overrideWriter: optionalBoolean(b, 'overrideWriter') ?? false };
      return json(200, await replayRejections(ctx, by, input));
    },
  },
  {
    method: 'POST',
    path: '/rejections/clear',
    fields: ['target', 'all'],
    async handler({ ctx, by, body }) {
      const b = await body();
      const target = optionalString(b, 'target');
      const all = optionalBoolean(b, 'all') ?? false;
      if (all && target !== undefined) throw issue('body', 'all', 'give a target or "all": true, not both');
      // The operator says which: one store, or every one (a forgotten field never clears them all).
      if (by.role.kind === 'operator' && !all && target === undefined) throw issue('body', 'target', 'is required: the store to clear ("" for the default store), or "all": true for every store', 'value_error.missing');
      return json(200, { cleared: await clearRejections(ctx, by, all ? { all } : { target }) });
    },
  },
  {
    method: 'GET',
    path: '/audit',
    params: ['target', 'action', 'actor', 'since', 'until', 'limit', 'before'],
    async handler({ ctx, by, query }) {
      const limit = intParam(query, 'limit', 1, AUDIT_PAGE_MAX) ?? 100;
      const before = intParam(query, 'before', 1, Number.MAX_SAFE_INTEGER);
      const filter = { target: query.target, action: query.action, actor: query.actor, sinceMs: timeParam(query, 'since'), untilMs: timeParam(query, 'until'), before, limit };
      const entries = await listAudit(ctx, by, filter);
      return json(200, { entries, more: nextPage('/audit', query, 'before', entries, limit) });
    },
  },
];

export function registerAdminRoutes(app: FastifyInstance, deps: AdminDeps): void {
  const { config, store, auth, clock } = deps;
  const ctx: AdminContext = { store, config, clock };
  const failures = new SignInFailures(config.adminMaxFailures, config.adminFailureWindow * 1000);

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

  const route = ({ method, path, handler, ...opts }: AdminRoute) => {
    app.route({
      method,
      url: `${ADMIN_PREFIX}${path}`,
      handler: async (request, reply) => {
        let res: XapiResponse;
        try {
          const admitted = await admit(request);
          if ('refusal' in admitted) return send(reply, admitted.refusal);
          const { user } = admitted;
          const by = httpActor(user, request.ip, /^\s*bearer\s/i.test(request.headers.authorization ?? '') ? 'token' : 'basic');
          if (!by) {
            return send(reply, json(403, { detail: `the admin API needs the admin or admin/store scope, which the user ${user.username} does not hold (xAPI scopes, all included, do not reach it)` }));
          }
          const q = request.url.indexOf('?');
          const query = parseQuery(q < 0 ? '' : request.url.slice(q + 1));
          const params = opts.params ?? [];
          const unknown = Object.keys(query).filter((k) => !params.includes(k));
          if (unknown.length) {
            throw new ValidationFailed(unknown.map((k) => ({ loc: ['query', k], msg: `unknown parameter (this route takes ${params.join(', ') || 'none'})`, type: 'value_error.unknown_parameter' })));
          }
          const body = async () => parseBody(await deps.readBody(request, reply, user), request.headers['content-type'], opts.fields ?? []);
          res = await handler({ ctx, deps, by, params: request.params as Record<string, string>, query, body });
        } catch (err) {
          if (!(err instanceof LrsError || err instanceof HttpRefusal)) throw err;
          res = answerOf(err);
        }
        return send(reply, res);
      },
    });
  };

  for (const r of ROUTES) route(r);
}
