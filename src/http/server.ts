/**
 * The HTTP server: Fastify for transport only. Each xAPI route checks the method, authenticates and
 * authorises from the request's head, only then reads the body (./bodies.ts), builds the
 * XapiRequest (alternate syntax applied), checks the xAPI version header and hands it to a
 * resource handler; the reply is written back here, without a body for HEAD.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { type Access, authorise, type RouteScopes } from '../auth/scopes.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { AuthFailure, Authenticator, AuthUser } from '../auth/types.ts';
import { bodiesInFlight, bodiesInFlightPerUser, type Config } from '../config.ts';
import type { Forwarder } from '../forwarding/forwarder.ts';
import { LrsError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../monitoring/metrics.ts';
import type { Monitoring } from '../monitoring/sentry.ts';
import { isKeptRejection, reasonsOfAnswer, type RejectionKeeper } from '../ops/rejections.ts';
import type { Store } from '../store/types.ts';
import { is2, namedVersion, negotiate, responseVersion, type XapiVersion } from '../xapi/versions.ts';
import { RESOURCES } from '../xapi/params.ts';
import { LECTERN_VERSION } from '../version.ts';
import { BodyBudget, BUSY_RETRY_AFTER, closeAfterAnswer, expectContinueAfterChecks, hasBody, PARSED_BYTES_PER_VALUE, readBody, type BodyHold, type BodyLimits } from './bodies.ts';
import { errorResponse, HttpRefusal } from './errors.ts';
import { buildOpenApi, DOCS_PAGE, docsAsset, type RegisteredRoute } from './xapi/openapi.ts';
import { json, type RequestHead, requestHead, withBody, type XapiRequest, type XapiResponse } from './request.ts';
import { handleActivities, handleAgents } from './xapi/activities.ts';
import { registerConsole } from './console/index.ts';
import { handleDocuments } from './xapi/documents.ts';
import { consistentThroughHeader, handleStatements } from './xapi/statements.ts';
import { about, heartbeat, lbHeartbeat, whoami } from './xapi/system.ts';
import { registerAdminRoutes } from './admin.ts';

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

type Handler = (req: XapiRequest) => Promise<XapiResponse>;

const CORS_ALLOW_HEADERS = 'Authorization, Content-Type, X-Experience-API-Version, If-Match, If-None-Match, Accept-Language, X-Request-Id';
const CORS_EXPOSE_HEADERS = 'ETag, Last-Modified, Content-Type, X-Experience-API-Version, X-Experience-API-Consistent-Through, X-Request-Id';
const METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE'] as const;
const STATEMENTS_PATH = '/xAPI/statements';
/** Whose share of the bodies in flight a request counts against: a user of a store. */
const userKey = (user: AuthUser): string => `${user.target}\n${user.username}`;
/** Largest alternate-syntax form read before its credentials (a form field) are checked. */
const ANONYMOUS_FORM_SIZE = 1024 * 1024;

/**
 * The version a request is served under (X-Experience-API-Version, Communication §3.3); 2.0 drops
 * the alternate request syntax (9274.1.1 ChangeLog), so such a request is a 400 there.
 */
function checkVersion(req: XapiRequest, served: readonly XapiVersion[]): XapiVersion {
  const v = negotiate(req.headers['x-experience-api-version'], served);
  if (req.alternate && is2(v)) {
    throw new LrsError('bad_request', 'xAPI 2.0 has no alternate request syntax (the method parameter): send the request with its own method, headers and body');
  }
  return v;
}

/** Largest admin API request body: a few fields. */
const ADMIN_BODY_SIZE = 64 * 1024;

export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const { config, store, auth, logger, metrics, monitoring, rejections } = deps;
  const clock = deps.clock ?? systemClock;
  const startedMs = clock.now();
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

  // Every route, for the OpenAPI description (which must describe each one).
  const routes: RegisteredRoute[] = [];
  app.addHook('onRoute', (route) => {
    // The console's pages are for browsers, not an API (docs/console.md).
    if (route.url.startsWith('/console')) return;
    const methods = [route.method].flat().filter((m) => m !== 'OPTIONS');
    if (methods.length) routes.push({ url: route.url, methods });
  });

  // Fastify never reads a body: the xAPI routes read theirs (./bodies.ts) once the request is
  // allowed, as raw bytes that our own code parses (JSON, multipart/mixed, forms, documents: it
  // knows the xAPI rules for each). Any other route (404s and CORS preflights included) leaves it unread.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

  const allowAll = config.corsAllowedOrigins.includes('*');
  const corsOrigin = (origin: string | undefined): string | undefined => {
    if (!origin) return undefined;
    if (allowAll) return '*';
    return config.corsAllowedOrigins.includes(origin) ? origin : undefined;
  };

  /** The method an xAPI request really had (the alternate syntax sends it as a POST form field). */
  const xapiMethods = new WeakMap<FastifyRequest, string>();

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    reply.header('x-experience-api-version', responseVersion(undefined, config.xapiVersions));
    if (request.url.startsWith('/xAPI')) {
      const origin = corsOrigin(request.headers.origin);
      if (origin) {
        reply.header('access-control-allow-origin', origin);
        reply.header('access-control-expose-headers', CORS_EXPOSE_HEADERS);
      }
      // The answer depends on Origin whether or not this one is allowed: caches must know.
      if (!allowAll) reply.header('vary', 'Origin');
    }
  });

  // Statements responses the handler never produced (401, version header, 413, alternate-syntax
  // errors) carry X-Experience-API-Consistent-Through too (Communication §2.1.3.s2.b5).
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.routeOptions.url === STATEMENTS_PATH && !reply.hasHeader('x-experience-api-consistent-through')) {
      reply.headers(await consistentThroughHeader(store, ''));
    }
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
    request.log.info(
      { method: request.method, path: request.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10, ip: request.ip },
      'request',
    );
    metrics?.observeRequest(request.routeOptions.url ?? 'unmatched', request.method, reply.statusCode, reply.elapsedTime / 1000, xapiMethods.get(request) ?? request.method);
  });

  app.setErrorHandler(async (err: Error & { statusCode?: number; code?: string }, request, reply) => {
    // A Content-Type that does not parse is a malformed request (Communication §3.2.s3.b6), not a 415.
    const status =
      err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' ? 400 : err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) {
      request.log.error({ err, path: request.url.split('?')[0] }, 'unhandled error');
      // The SDK's Fastify integration usually reports it first; the duplicate is then dropped.
      monitoring?.captureException(err, { route: request.routeOptions.url ?? 'unmatched' });
    }
    const detail =
      err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' ? 'the Content-Type header is not a valid media type' : status === 500 ? 'internal server error' : err.message;
    return reply.status(status).type('application/json; charset=utf-8').send({ detail });
  });

  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?')[0];
    // Paths are case-sensitive: `/xapi/statements` is a common slip for `/xAPI/statements`.
    const miscased = /^\/xapi(\/|$)/i.test(path) && !path.startsWith('/xAPI');
    const hint = miscased ? `: the xAPI resources are under /xAPI/ (paths are case-sensitive), e.g. /xAPI${path.slice(5)}` : '';
    return reply.status(404).type('application/json; charset=utf-8').send({ detail: `no resource at ${request.method} ${path}${hint}` });
  });

  const send = (reply: FastifyReply, method: string, res: XapiResponse): FastifyReply => {
    reply.status(res.status);
    if (res.headers) reply.headers(res.headers);
    // HEAD gets the GET's body too: Node drops it from the wire and Content-Length stays right.
    // An alternate-syntax HEAD (§1.3) travels as a POST, whose body Node would send: drop it here.
    const bodyless = res.body === undefined || (method === 'HEAD' && reply.request.method !== 'HEAD');
    return bodyless ? reply.send() : reply.send(res.body);
  };

  /**
   * An xAPI resource route. From the request's head: alternate syntax, the method (a method the
   * resource does not define is a 405 before authentication, as HTTP servers answer it,
   * Communication §3.2.s3.b1; the ADL suite sends such requests without credentials), then
   * authentication and the scope check. Only then the body, the version header and the handler.
   */
  const refused = (reply: FastifyReply, method: string, result: AuthFailure) =>
    send(reply, method, { status: result.status, headers: { 'content-type': 'application/json; charset=utf-8', ...result.headers }, body: JSON.stringify(result.body) });
  const policy = { restrictByScopes: config.restrictByScopes, restrictByAuthority: config.restrictByAuthority };
  // Bodies read before authentication (an alternate-syntax form carrying its credentials) may hold
  // a quarter of the budget between them, each at most 1 MiB: they cannot crowd out the others.
  // One user's requests may hold a share of it (half by default): one user cannot keep the others out.
  const budget = new BodyBudget(bodiesInFlight(config), Math.floor(bodiesInFlight(config) / 4), bodiesInFlightPerUser(config));
  const bodyLimits: BodyLimits = {
    limit: config.maxRequestSize,
    tooLarge: `the request body is larger than the ${config.maxRequestSize} bytes this LRS accepts (LECTERN_MAX_REQUEST_SIZE)`,
    busy: {
      total: 'the server holds as many request bodies as it may at once (LECTERN_MAX_BODIES_IN_FLIGHT); try again shortly',
      user: 'this user\'s requests hold as much as one user\'s may at once (LECTERN_MAX_BODIES_IN_FLIGHT_PER_USER); try again shortly',
    },
    idleMs: config.requestBodyTimeout * 1000,
    minRate: config.requestBodyMinRate,
  };
  metrics?.watchBodies(() => ({ body: budget.held('body'), parsed: budget.held('parsed'), total: budget.total }));
  const parsedBusy = {
    total: 'the server holds as much request data as it may at once (LECTERN_MAX_BODIES_IN_FLIGHT: bodies, and the parsed size of the JSON they carry); try again shortly',
    user: 'this user\'s requests hold as much as one user\'s may at once (LECTERN_MAX_BODIES_IN_FLIGHT_PER_USER: bodies, and the parsed size of the JSON they carry); try again shortly',
  };
  const formLimit = Math.min(ANONYMOUS_FORM_SIZE, config.maxRequestSize, budget.anonymousTotal);
  const formLimits: BodyLimits = {
    ...bodyLimits,
    limit: formLimit,
    tooLarge: `an alternate-syntax form with its credentials among its fields is read before they are checked, so it may have at most ${formLimit} bytes: send larger ones with an Authorization header`,
  };

  /**
   * `scopes` is the route's authorisation, checked here and nowhere else: the scope a read and a
   * write need (403 naming it, before the handler runs, so nothing is stored). Routes without it
   * need no credentials.
   */
  const xapi = (path: string, handler: Handler, opts: { allowed?: readonly string[]; versioned?: boolean; scopes?: RouteScopes } = {}) => {
    const versioned = opts.versioned ?? true;
    const allowed = opts.allowed ?? METHODS;
    const scopes = opts.scopes;
    app.route({
      method: [...METHODS],
      url: path,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        let res: XapiResponse;
        let method = request.method;
        // The body's bytes, then the estimated parsed size of its JSON, count against the budget
        // until the request is answered.
        let bodyHold: BodyHold | undefined;
        let parsedHold: BodyHold | undefined;
        // What a refused write is kept with (src/ops/rejections.ts): the request as parsed, its user.
        const seen: { head?: RequestHead; req?: XapiRequest; user?: AuthUser; access?: Access } = {};
        try {
          const q = request.url.indexOf('?');
          const head = requestHead(request.method, q < 0 ? '' : request.url.slice(q + 1), request.headers);
          seen.head = head;
          method = head.method;
          xapiMethods.set(request, method);
          // Every answer to a request naming a served version (405 and 401 included) says that version.
          const named = namedVersion(head.headers['x-experience-api-version'], config.xapiVersions);
          if (named) reply.header('x-experience-api-version', named);
          if (!allowed.includes(method)) {
            const detail = `method ${method} is not allowed on ${path} (${allowed.join(', ')})`;
            return send(reply, method, json(405, { detail }, { allow: allowed.join(', ') }));
          }
          /** Authenticates and authorises: the refusal to send, or what the user may do. */
          const admit = async (authorization: string | undefined) => {
            const result = await auth.authenticate(authorization, request.ip);
            if (!result.ok) return { refusal: result };
            const decision = authorise(result.user, method, scopes!, policy);
            if (!decision.ok) {
              const detail = `${method} ${path} needs the scope ${decision.needed}, which the user ${result.user.username} does not hold`;
              return { forbidden: json(403, { detail, scope: decision.needed }) };
            }
            return { user: result.user, access: decision.access };
          };
          // The alternate syntax may carry the credentials in its form: then the body is read first.
          const early = scopes && (!head.alternate || head.headers.authorization !== undefined) ? await admit(head.headers.authorization) : undefined;
          if (early?.refusal) return refused(reply, method, early.refusal);
          if (early?.forbidden) return send(reply, method, early.forbidden);
          seen.user = early?.user;
          seen.access = early?.access;
          let body: Buffer | undefined;
          if (hasBody(request.raw)) {
            bodyHold = budget.hold(!early, early?.user && userKey(early.user));
            body = await readBody(request.raw, reply.raw, bodyHold, early ? bodyLimits : formLimits);
          }
          const xreq = withBody(head, body);
          if (head.alternate) {
            const formVersion = namedVersion(xreq.headers['x-experience-api-version'], config.xapiVersions);
            if (formVersion) reply.header('x-experience-api-version', formVersion);
          }
          const admitted = early ?? (scopes ? await admit(xreq.headers.authorization) : undefined);
          if (admitted?.refusal) return refused(reply, method, admitted.refusal);
          if (admitted?.forbidden) return send(reply, method, admitted.forbidden);
          xreq.user = admitted?.user;
          xreq.access = admitted?.access;
          seen.req = xreq;
          seen.user = xreq.user;
          seen.access = xreq.access;
          const user = admitted?.user;
          xreq.holdParsed = (values) => {
            const hold = (parsedHold ??= budget.hold(false, user && userKey(user)));
            // Alone, a request always fits: its estimate is at most what it leaves of the budget, and
            // of its user's share, with its body.
            const own = (bodyHold?.held ?? 0) + hold.held;
            const estimate = values * PARSED_BYTES_PER_VALUE;
            const why = hold.take(Math.min(estimate, budget.total - own), 'parsed', Math.min(estimate, budget.userTotal - own));
            if (why) throw new HttpRefusal(503, parsedBusy[why], { 'retry-after': BUSY_RETRY_AFTER });
          };
          if (versioned) xreq.version = checkVersion(xreq, config.xapiVersions);
          res = await handler(xreq);
        } catch (err) {
          if (!(err instanceof LrsError || err instanceof HttpRefusal)) throw err;
          res = errorResponse(err);
        } finally {
          bodyHold?.release();
          parsedHold?.release();
        }
        const sent = send(reply, method, res);
        if (seen.user && isKeptRejection(path, method, res.status)) refusedWrite(request, path, method, res, seen as typeof seen & { user: AuthUser });
        return sent;
      },
    });
    app.options(path, async (request, reply) => {
      const origin = corsOrigin(request.headers.origin);
      if (origin) {
        reply.header('access-control-allow-methods', METHODS.join(', '));
        reply.header('access-control-allow-headers', CORS_ALLOW_HEADERS);
        reply.header('access-control-max-age', '86400');
      }
      return reply.status(204).send();
    });
  };

  /**
   * A write refused with 400, 409 or 413: one log line (never the body), and the rejection handed
   * to the keeper (src/ops/rejections.ts), which writes it after the answer.
   */
  const refusedWrite = (request: FastifyRequest, path: string, method: string, res: XapiResponse, seen: { head?: RequestHead; req?: XapiRequest; user: AuthUser; access?: Access }) => {
    const reasons = reasonsOfAnswer(path, res.status, res.body);
    request.log.info({ status: res.status, reasons: [...new Set(reasons.map((r) => r.type))], user: seen.user.username, method, path }, 'write refused');
    const from = seen.req ?? seen.head;
    const length = Number(request.headers['content-length']);
    rejections?.keep({
      user: seen.user,
      access: seen.access,
      method,
      path,
      query: from?.query ?? {},
      headers: from?.headers ?? {},
      status: res.status,
      reasons,
      body: seen.req?.body,
      declaredBytes: Number.isSafeInteger(length) ? length : undefined,
    });
  };

  const statementDeps = {
    store,
    maxSearchHits: config.maxSearchHits,
    maxPageBytes: config.maxPageBytes,
    basePath: STATEMENTS_PATH,
    strictVersion: config.xapiStrictVersion,
    validation: config.xapiValidation,
    maxStatements: config.maxStatementsPerRequest,
    maxJsonValues: config.maxJsonValues,
  };
  // Scopes per resource (xAPI-Communication §4.2). `statements/read/mine` lets a user read
  // statements at all; the handler then restricts reads to its own unless it holds `statements/read`.
  const STATEMENTS: RouteScopes = { read: 'statements/read/mine', write: 'statements/write' };
  const STATE: RouteScopes = { read: 'state/read', write: 'state/write' };
  const PROFILE: RouteScopes = { read: 'profile/read', write: 'profile/write' };
  // The canonical Activity is assembled from every statement of the store: a full statements read
  // (and the Agents view, the other read-only view, alike).
  const VIEWS: RouteScopes = { read: 'statements/read', write: 'statements/read' };
  xapi(STATEMENTS_PATH, (req) => handleStatements(statementDeps, req), { allowed: RESOURCES.statements.methods, scopes: STATEMENTS });
  const documentDeps = { store, maxDocumentSize: config.maxDocumentSize, maxJsonValues: config.maxJsonValues };
  xapi('/xAPI/activities/state', (req) => handleDocuments(documentDeps, 'state', req), { scopes: STATE });
  xapi('/xAPI/activities/profile', (req) => handleDocuments(documentDeps, 'activity_profile', req), { scopes: PROFILE });
  xapi('/xAPI/agents/profile', (req) => handleDocuments(documentDeps, 'agent_profile', req), { scopes: PROFILE });
  const viewDeps = { store, maxPageBytes: config.maxPageBytes };
  xapi('/xAPI/activities', (req) => handleActivities(viewDeps, req), { allowed: RESOURCES.activities.methods, scopes: VIEWS });
  xapi('/xAPI/agents', (req) => handleAgents(viewDeps, req), { allowed: RESOURCES.agents.methods, scopes: VIEWS });
  xapi('/xAPI/about', async (req) => about(req, config.xapiVersions), { allowed: RESOURCES.about.methods, versioned: false });

  registerConsole(app, {
    config,
    auth,
    policy,
    store,
    clock,
    resources: {
      statements: { handler: (req) => handleStatements(statementDeps, req), scopes: STATEMENTS },
      agents: { handler: (req) => handleAgents(viewDeps, req), scopes: VIEWS },
      state: { handler: (req) => handleDocuments(documentDeps, 'state', req), scopes: STATE },
      agentProfile: { handler: (req) => handleDocuments(documentDeps, 'agent_profile', req), scopes: PROFILE },
    },
  });

  for (const path of ['/lbheartbeat', '/__lbheartbeat__']) app.get(path, async (_req, reply) => send(reply, 'GET', lbHeartbeat()));
  for (const path of ['/heartbeat', '/__heartbeat__']) app.get(path, async (_req, reply) => send(reply, 'GET', await heartbeat(store, deps.forwarder)));
  app.get('/whoami', async (request, reply) => {
    const result = await auth.authenticate(request.headers.authorization, request.ip);
    if (!result.ok) return refused(reply, 'GET', result);
    return send(reply, 'GET', whoami(result.user));
  });

  if (metrics && config.metricsAccess !== 'off') {
    app.get('/metrics', async (request, reply) => {
      if (config.metricsAccess === 'scope') {
        const result = await auth.authenticate(request.headers.authorization, request.ip);
        if (!result.ok) return refused(reply, 'GET', result);
        // Its figures are every store's: only the operator's user, `all` in the default store.
        if (!result.user.scopes.includes('all') || result.user.target !== '') {
          return send(reply, 'GET', json(403, { detail: 'reading /metrics needs the all scope in the default store, the operator\'s (or LECTERN_METRICS_ACCESS=open)' }));
        }
      }
      return reply.type(metrics.contentType).send(await metrics.render());
    });
  }

  const adminBodyLimits: BodyLimits = { ...bodyLimits, limit: ADMIN_BODY_SIZE, tooLarge: `an admin API request body may have at most ${ADMIN_BODY_SIZE} bytes` };
  registerAdminRoutes(app, {
    config,
    store,
    auth,
    startedMs,
    clock,
    ingest: metrics?.ingest,
    async readBody(request, reply, user) {
      if (!hasBody(request.raw)) return undefined;
      const hold = budget.hold(false, userKey(user));
      try {
        return await readBody(request.raw, reply.raw, hold, adminBodyLimits);
      } finally {
        hold.release();
      }
    },
  });

  // The API description and its interactive page: public, they hold no data.
  let openapi = '';
  app.get('/openapi.json', async (_request, reply) => reply.type('application/json; charset=utf-8').send(openapi));
  app.get('/docs', async (_request, reply) => reply.type('text/html; charset=utf-8').send(DOCS_PAGE));
  app.get('/docs/assets/*', async (request, reply) => {
    const asset = docsAsset((request.params as { '*': string })['*']);
    if (!asset) return reply.status(404).type('application/json; charset=utf-8').send({ detail: 'no such documentation file' });
    return reply.type(asset.contentType).header('cache-control', 'public, max-age=86400').send(asset.body);
  });
  const description = buildOpenApi(routes, LECTERN_VERSION);
  if (description['x-undescribed']) logger.warn({ routes: description['x-undescribed'] }, 'routes without an OpenAPI description in src/http/openapi.ts');
  openapi = JSON.stringify(description);

  return app;
}

