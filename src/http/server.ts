/**
 * The HTTP server: Fastify for transport only, and three front doors on it, the xAPI resources
 * with the public routes beside them (./xapi/), the admin API (./admin/) and the console
 * (./console/), over the shared helpers (./access.ts, ./answer.ts, ./bodies.ts, ./request.ts).
 * What every request gets is here: its id, the logs and metrics of it, the answers to errors and
 * to paths that are no route.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Authenticator, AuthUser } from '../auth/types.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Forwarder } from '../forwarding/forwarder.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../monitoring/metrics.ts';
import type { Monitoring } from '../monitoring/sentry.ts';
import type { RejectionKeeper } from '../ops/rejections.ts';
import type { Store } from '../store/types.ts';
import { responseVersion } from '../xapi/versions.ts';
import { registerAdminRoutes } from './admin/index.ts';
import { json, send } from './answer.ts';
import { type BodyLimits, closeAfterAnswer, expectContinueAfterChecks, RequestBodies } from './bodies.ts';
import { registerConsole } from './console/index.ts';
import { registerXapi } from './xapi/index.ts';
import type { RegisteredRoute } from './xapi/openapi.ts';
import { registerApiDocs } from './xapi/system.ts';

export interface ServerDeps {
  config: Config;
  store: Store;
  auth: Authenticator;
  logger: Logger;
  /** Its per-target figures go into /heartbeat. */
  forwarder?: Pick<Forwarder, 'active' | 'stats'>;
  /** Counts requests, statements, documents, auth failures; serves GET /metrics (LECTERN_METRICS_ACCESS). */
  metrics?: Metrics;
  /** Receives unhandled errors (500s). */
  monitoring?: Monitoring;
  /** Keeps refused writes (LECTERN_REJECTIONS_*); none kept without it. */
  rejections?: Pick<RejectionKeeper, 'keep'>;
  /** The admin API's time: audit entries, uptime, credential creation and rotation grace (default: the system clock). */
  clock?: Clock;
}

/** A client's X-Request-Id is kept when it is a plain token, so logs join across services. */
const REQUEST_ID_RE = /^[\w.:@-]{1,128}$/;

/** Largest admin API request body: a few fields. */
const ADMIN_BODY_SIZE = 64 * 1024;

export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const { config, store, auth, logger, metrics } = deps;
  const clock = deps.clock ?? systemClock;
  const startedMs = clock.now();
  const app = fastify(config, logger);
  const routes = describedRoutes(app);
  /** The method each xAPI request really had (the alternate syntax sends it as a POST form field). */
  const methods = new WeakMap<FastifyRequest, string>();
  everyRequest(app, deps, methods);
  const bodies = new RequestBodies(config);
  metrics?.watchBodies(() => ({ body: bodies.budget.held('body'), parsed: bodies.budget.held('parsed'), total: bodies.budget.total }));
  const policy = { restrictByScopes: config.restrictByScopes, restrictByAuthority: config.restrictByAuthority };

  registerXapi(app, { config, store, auth, policy, bodies, rejections: deps.rejections, methods, forwarder: deps.forwarder, metrics });
  registerConsole(app, { config, auth, policy, store, clock, bodies });
  const adminLimits: BodyLimits = { ...bodies.limits, limit: ADMIN_BODY_SIZE, tooLarge: `an admin API request body may have at most ${ADMIN_BODY_SIZE} bytes` };
  registerAdminRoutes(app, {
    config,
    store,
    auth,
    startedMs,
    clock,
    ingest: metrics?.ingest,
    readBody: (request: FastifyRequest, reply: FastifyReply, user: AuthUser) => bodies.readWhole(request.raw, reply.raw, user, adminLimits),
  });
  registerApiDocs(app, routes, logger);
  return app;
}

function fastify(config: Config, logger: Logger): FastifyInstance {
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // Every log line of a request carries its id (pino child logger: `reqId`).
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : randomUUID();
    },
    logController: new LogController({ disableRequestLogging: true }),
    // Node's own default, which Fastify would turn off: a client trickling a body cannot hold a
    // connection (and its buffered bytes) for ever.
    requestTimeout: 300_000,
    // request.ip: the client's address, or behind trusted proxies the one they forward.
    trustProxy: config.trustProxy as boolean, // or the proxies' addresses: Fastify's overloads take one type at a time
    exposeHeadRoutes: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true },
  });
  expectContinueAfterChecks(app.server);
  // Fastify never reads a body: the routes read theirs (./bodies.ts) once the request is allowed,
  // as raw bytes that our own code parses (JSON, multipart/mixed, forms, documents: it knows the
  // xAPI rules for each). Any other route (404s and CORS preflights included) leaves it unread.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
  return app;
}

/** Every route as it is registered, for the OpenAPI description (which must describe each one). */
function describedRoutes(app: FastifyInstance): RegisteredRoute[] {
  const routes: RegisteredRoute[] = [];
  app.addHook('onRoute', (route) => {
    // The console's pages are for browsers, not an API (docs/console.md).
    if (route.url.startsWith('/console')) return;
    const methods = [route.method].flat().filter((m) => m !== 'OPTIONS');
    if (methods.length) routes.push({ url: route.url, methods });
  });
  return routes;
}

/** What every request gets: its id and version headers, its log line and metrics, and the answers to errors and unknown paths. */
function everyRequest(app: FastifyInstance, deps: ServerDeps, methods: WeakMap<FastifyRequest, string>): void {
  const { config, metrics, monitoring } = deps;
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    reply.header('x-experience-api-version', responseVersion(undefined, config.xapiVersions));
  });
  app.addHook('onSend', async (request, reply, payload) => {
    // Answered before the body's end (refused, or a route that needs none): Node would read and
    // discard the rest to keep the connection, however large it is. Closing it costs the client a
    // new connection instead.
    if (!request.raw.complete) {
      reply.header('connection', 'close');
      closeAfterAnswer(request.raw);
    }
    return payload;
  });
  app.addHook('onResponse', async (request, reply) => {
    // The path only: query strings carry agents and the alternate syntax's form carries credentials.
    // `ip`: the client's address (behind trusted proxies, the one they forward), as the throttle sees it.
    request.log.info({ method: request.method, path: request.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10, ip: request.ip }, 'request');
    metrics?.observeRequest(request.routeOptions.url ?? 'unmatched', request.method, reply.statusCode, reply.elapsedTime / 1000, methods.get(request) ?? request.method);
  });
  app.setErrorHandler(async (err: Error & { statusCode?: number; code?: string }, request, reply) => {
    // A Content-Type that does not parse is a malformed request (Communication §3.2.s3.b6), not a 415.
    const badType = err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE';
    const status = badType ? 400 : err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) {
      request.log.error({ err, path: request.url.split('?')[0] }, 'unhandled error');
      // The SDK's Fastify integration usually reports it first; the duplicate is then dropped.
      monitoring?.captureException(err, { route: request.routeOptions.url ?? 'unmatched' });
    }
    const detail = badType ? 'the Content-Type header is not a valid media type' : status === 500 ? 'internal server error' : err.message;
    return send(reply, json(status, { detail }));
  });
  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?')[0];
    // Paths are case-sensitive: `/xapi/statements` is a common slip for `/xAPI/statements`.
    const miscased = /^\/xapi(\/|$)/i.test(path) && !path.startsWith('/xAPI');
    const hint = miscased ? `: the xAPI resources are under /xAPI/ (paths are case-sensitive), e.g. /xAPI${path.slice(5)}` : '';
    return send(reply, json(404, { detail: `no resource at ${request.method} ${path}${hint}` }));
  });
}
