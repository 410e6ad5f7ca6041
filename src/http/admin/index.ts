/**
 * The admin API under /admin/api/ (docs/admin-api.md): JSON routes, each a translation of its
 * request into the input of one admin action of src/ops/admin/ (which reaches, grants, acts and
 * audits) and of its result or refusal into the answer. Every request is authenticated as the
 * xAPI routes are, then needs an admin role; only then is its body read (./serve.ts). Failed
 * authentications here are counted per client address and per user name
 * (LECTERN_ADMIN_MAX_FAILURES within LECTERN_ADMIN_FAILURE_WINDOW): beyond, 429 with Retry-After
 * and no check at all.
 */
import type { FastifyInstance } from 'fastify';
import { SignInFailures } from '../../auth/throttle.ts';
import { activeTargets } from '../../forwarding/config.ts';
import { createCredential, listCredentials, revokeCredential, rotateCredential } from '../../ops/admin/credentials.ts';
import { erase } from '../../ops/admin/erasure.ts';
import { forwardingStatus, listDeadLetters, retryDeadLetters } from '../../ops/admin/forwarding.ts';
import { AUDIT_PAGE_MAX, listAudit, listStores, serverStatus } from '../../ops/admin/reads.ts';
import { clearRejections, listRejections, REJECTION_PAGE_MAX, type ReplayInput, replayRejections, showRejection } from '../../ops/admin/rejections.ts';
import { DEAD_LETTER_PAGE_MAX } from '../../ops/forwarding.ts';
import { storeOverview } from '../../ops/overview.ts';
import type { KeptRejection } from '../../store/types.ts';
import type { Agent } from '../../xapi/types.ts';
import { json } from '../answer.ts';
import { bodyAgent, intParam, issue, optionalBoolean, optionalString, stringList, timeParam } from './fields.ts';
import { ADMIN_PREFIX, type AdminDeps, type AdminRoute, serveAdminRoute, signInThrottle } from './serve.ts';

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
    handler: async ({ ctx, by, query }) =>
      json(200, await storeOverview(ctx.store, by.role, query.target, { clock: ctx.clock, activeTargets: activeTargets(ctx.config.xapiForwardings) })),
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
      if (b.agent === undefined) throw issue('body', 'agent', "is required: the credential's Agent, the authority of what it stores", 'value_error.missing');
      if (typeof b.agent !== 'object' || b.agent === null || Array.isArray(b.agent))
        throw issue('body', 'agent', 'must be an Agent object, e.g. {"mbox": "mailto:reports@example.com"}', 'type_error.dict');
      const input = {
        scopes,
        agent: b.agent as Agent,
        target,
        key: optionalString(b, 'key'),
        label: optionalString(b, 'label'),
        expires: optionalString(b, 'expires'),
        validation: optionalString(b, 'validation'),
      };
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
      const input: ReplayInput = {
        ids,
        all: optionalBoolean(b, 'all') ?? false,
        target: optionalString(b, 'target'),
        validation,
        overrideWriter: optionalBoolean(b, 'overrideWriter') ?? false,
      };
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
      if (by.role.kind === 'operator' && !all && target === undefined)
        throw issue('body', 'target', 'is required: the store to clear ("" for the default store), or "all": true for every store', 'value_error.missing');
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
  const { config, store, clock } = deps;
  const door = { deps, ctx: { store, config, clock }, throttle: signInThrottle(new SignInFailures(config.adminMaxFailures, config.adminFailureWindow * 1000)) };
  for (const route of ROUTES) {
    app.route({ method: route.method, url: `${ADMIN_PREFIX}${route.path}`, handler: (request, reply) => serveAdminRoute(door, route, request, reply) });
  }
}
