/**
 * The HTTP server: Fastify for transport only. Each route turns the HTTP request into an
 * XapiRequest (alternate syntax applied), authenticates, checks the xAPI version header and
 * hands it to a resource handler; the reply is written back here, without a body for HEAD.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Authenticator } from '../auth/types.ts';
import type { Config } from '../config.ts';
import { LrsError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../monitoring/metrics.ts';
import type { Monitoring } from '../monitoring/sentry.ts';
import type { Store } from '../store/types.ts';
import { RESOURCES } from '../xapi/params.ts';
import { XAPI_VERSION } from '../xapi/types.ts';
import { LECTERN_VERSION } from '../version.ts';
import { errorResponse } from './errors.ts';
import { buildOpenApi, DOCS_PAGE, docsAsset, type RegisteredRoute } from './openapi.ts';
import { json, toXapiRequest, type XapiRequest, type XapiResponse } from './request.ts';
import { handleActivities, handleAgents } from './activities.ts';
import { handleDocuments } from './documents.ts';
import { consistentThroughHeader, handleStatements } from './statements.ts';
import { about, heartbeat, lbHeartbeat, whoami } from './system.ts';

export interface ServerDeps {
  config: Config;
  store: Store;
  auth: Authenticator;
  logger: Logger;
  /** Counts requests, statements, documents, auth failures; serves GET /metrics (LECTERN_METRICS_ACCESS). */
  metrics?: Metrics;
  /** Receives unhandled errors (500s). */
  monitoring?: Monitoring;
}

/** A client's X-Request-Id is kept when it is a plain token, so logs join across services. */
const REQUEST_ID_RE = /^[\w.:@-]{1,128}$/;

type Handler = (req: XapiRequest) => Promise<XapiResponse>;

const VERSION_RE = /^1\.0(\.\d+)?$/;
const CORS_ALLOW_HEADERS = 'Authorization, Content-Type, X-Experience-API-Version, If-Match, If-None-Match, Accept-Language, X-Request-Id';
const CORS_EXPOSE_HEADERS = 'ETag, Last-Modified, Content-Type, X-Experience-API-Version, X-Experience-API-Consistent-Through, X-Request-Id';
const METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE'] as const;
const STATEMENTS_PATH = '/xAPI/statements';

/** Checks X-Experience-API-Version (xAPI-Communication §3.3): 1.0 and 1.0.x only. */
function checkVersion(req: XapiRequest): void {
  const v = req.headers['x-experience-api-version'];
  if (v === undefined) throw new LrsError('bad_request', 'the X-Experience-API-Version header is required (this LRS speaks 1.0.3)');
  if (!VERSION_RE.test(v.trim())) throw new LrsError('bad_request', `X-Experience-API-Version ${JSON.stringify(v)} is not supported: send 1.0.x (1.0.3)`);
}

export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const { config, store, auth, logger, metrics, monitoring } = deps;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // Every log line of a request carries its id (pino child logger: `reqId`).
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : randomUUID();
    },
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.maxRequestSize,
    exposeHeadRoutes: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true },
  });

  // Every route, for the OpenAPI description (which must describe each one).
  const routes: RegisteredRoute[] = [];
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat().filter((m) => m !== 'OPTIONS');
    if (methods.length) routes.push({ url: route.url, methods });
  });

  // Bodies reach the handlers as raw bytes: JSON, multipart/mixed, forms and documents are all
  // parsed by our own code, which knows the xAPI rules for each.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

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
    reply.header('x-experience-api-version', XAPI_VERSION);
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
    return payload;
  });

  app.addHook('onResponse', async (request, reply) => {
    // The path only: query strings carry agents and the alternate syntax's form carries credentials.
    request.log.info(
      { method: request.method, path: request.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 },
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
      err.code === 'FST_ERR_CTP_BODY_TOO_LARGE'
        ? `the request body is larger than the ${config.maxRequestSize} bytes this LRS accepts (LECTERN_MAX_REQUEST_SIZE)`
        : err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
          ? 'the Content-Type header is not a valid media type'
          : status === 500
            ? 'internal server error'
            : err.message;
    return reply.status(status).type('application/json; charset=utf-8').send({ detail });
  });

  app.setNotFoundHandler(async (request, reply) =>
    reply.status(404).type('application/json; charset=utf-8').send({ detail: `no resource at ${request.method} ${request.url.split('?')[0]}` }),
  );

  const send = (reply: FastifyReply, method: string, res: XapiResponse): FastifyReply => {
    reply.status(res.status);
    if (res.headers) reply.headers(res.headers);
    // HEAD gets the GET's body too: Node drops it from the wire and Content-Length stays right.
    // An alternate-syntax HEAD (§1.3) travels as a POST, whose body Node would send: drop it here.
    const bodyless = res.body === undefined || (method === 'HEAD' && reply.request.method !== 'HEAD');
    return bodyless ? reply.send() : reply.send(res.body);
  };

  /**
   * An xAPI resource route: alternate syntax, the method, auth, version header, then the handler.
   * A method the resource does not define is a 405 before authentication, as HTTP servers answer
   * it (Communication §3.2.s3.b1; the ADL suite sends such requests without credentials).
   */
  const xapi = (path: string, handler: Handler, opts: { allowed?: readonly string[]; versioned?: boolean; authenticated?: boolean } = {}) => {
    const versioned = opts.versioned ?? true;
    const authenticated = opts.authenticated ?? true;
    const allowed = opts.allowed ?? METHODS;
    app.route({
      method: [...METHODS],
      url: path,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        let res: XapiResponse;
        let method = request.method;
        try {
          const q = request.url.indexOf('?');
          const xreq = toXapiRequest(request.method, q < 0 ? '' : request.url.slice(q + 1), request.headers, request.body as Buffer | undefined);
          method = xreq.method;
          xapiMethods.set(request, method);
          if (!allowed.includes(method)) {
            const detail = `method ${method} is not allowed on ${path} (${allowed.join(', ')})`;
            return send(reply, method, json(405, { detail }, { allow: allowed.join(', ') }));
          }
          if (authenticated) {
            const result = await auth.authenticate(xreq.headers.authorization);
            if (!result.ok) return send(reply, method, { status: result.status, headers: { 'content-type': 'application/json; charset=utf-8', ...result.headers }, body: JSON.stringify(result.body) });
            xreq.user = result.user;
          }
          if (versioned) checkVersion(xreq);
          res = await handler(xreq);
        } catch (err) {
          if (!(err instanceof LrsError)) throw err;
          res = errorResponse(err);
        }
        return send(reply, method, res);
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

  const statementDeps = { store, maxSearchHits: config.maxSearchHits, basePath: STATEMENTS_PATH };
  xapi(STATEMENTS_PATH, (req) => handleStatements(statementDeps, req), { allowed: RESOURCES.statements.methods });
  const documentDeps = { store, maxDocumentSize: config.maxDocumentSize };
  xapi('/xAPI/activities/state', (req) => handleDocuments(documentDeps, 'state', req));
  xapi('/xAPI/activities/profile', (req) => handleDocuments(documentDeps, 'activity_profile', req));
  xapi('/xAPI/agents/profile', (req) => handleDocuments(documentDeps, 'agent_profile', req));
  xapi('/xAPI/activities', (req) => handleActivities({ store }, req), { allowed: RESOURCES.activities.methods });
  xapi('/xAPI/agents', (req) => handleAgents({ store }, req), { allowed: RESOURCES.agents.methods });
  xapi('/xAPI/about', async (req) => about(req), { allowed: RESOURCES.about.methods, versioned: false, authenticated: false });

  for (const path of ['/lbheartbeat', '/__lbheartbeat__']) app.get(path, async (_req, reply) => send(reply, 'GET', lbHeartbeat()));
  for (const path of ['/heartbeat', '/__heartbeat__']) app.get(path, async (_req, reply) => send(reply, 'GET', await heartbeat(store)));
  app.get('/whoami', async (request, reply) => {
    const result = await auth.authenticate(request.headers.authorization);
    if (!result.ok) return send(reply, 'GET', { status: result.status, headers: { 'content-type': 'application/json; charset=utf-8', ...result.headers }, body: JSON.stringify(result.body) });
    return send(reply, 'GET', whoami(result.user));
  });

  if (metrics && config.metricsAccess !== 'off') {
    app.get('/metrics', async (request, reply) => {
      if (config.metricsAccess === 'scope') {
        const result = await auth.authenticate(request.headers.authorization);
        if (!result.ok) return send(reply, 'GET', { status: result.status, headers: { 'content-type': 'application/json; charset=utf-8', ...result.headers }, body: JSON.stringify(result.body) });
        if (!result.user.scopes.includes('all')) return send(reply, 'GET', json(403, { detail: 'reading /metrics needs the all scope (or LECTERN_METRICS_ACCESS=open)' }));
      }
      return reply.type(metrics.contentType).send(await metrics.render());
    });
  }

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

