/**
 * The xAPI front door: the resources under /xAPI/ (a table of path, methods, scopes and handler,
 * each served by ./resources.ts), their CORS, and the public routes beside them (./system.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.ts';
import type { Forwarder } from '../../forwarding/forwarder.ts';
import type { Metrics } from '../../monitoring/metrics.ts';
import type { Store } from '../../store/types.ts';
import { RESOURCES } from '../../xapi/params.ts';
import { RESOURCE_SCOPES } from '../access.ts';
import { handleActivities, handleAgents } from './activities.ts';
import { handleDocuments } from './documents.ts';
import { type Resource, type ResourceDeps, serveResource } from './resources.ts';
import { CONSISTENT_THROUGH, consistentThroughHeader, handleStatements, STATEMENTS_PATH } from './statements.ts';
import { about, registerSystem } from './system.ts';

export interface XapiDeps extends ResourceDeps {
  store: Store;
  /** Its per-target figures go into /heartbeat. */
  forwarder?: Pick<Forwarder, 'active' | 'stats'>;
  /** Serves GET /metrics (LECTERN_METRICS_ACCESS). */
  metrics?: Metrics;
}

/** Every method a resource route takes: the others are 405s of the resource, not 404s. */
const METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE'] as const;
const CORS_ALLOW_HEADERS = 'Authorization, Content-Type, X-Experience-API-Version, If-Match, If-None-Match, Accept-Language, X-Request-Id';
const CORS_EXPOSE_HEADERS = 'ETag, Last-Modified, Content-Type, X-Experience-API-Version, X-Experience-API-Consistent-Through, X-Request-Id';

/** The xAPI resources (Communication §2), with the scopes each needs. */
function resources(deps: XapiDeps): Resource[] {
  const { config, store } = deps;
  const statementDeps = {
    store,
    maxSearchHits: config.maxSearchHits,
    maxPageBytes: config.maxPageBytes,
    strictVersion: config.xapiStrictVersion,
    validation: config.xapiValidation,
    maxStatements: config.maxStatementsPerRequest,
    maxJsonValues: config.maxJsonValues,
  };
  const documentDeps = { store, maxDocumentSize: config.maxDocumentSize, maxJsonValues: config.maxJsonValues };
  const viewDeps = { store, maxPageBytes: config.maxPageBytes };
  const S = RESOURCE_SCOPES;
  return [
    { path: STATEMENTS_PATH, methods: RESOURCES.statements.methods, scopes: S.statements, versioned: true, handler: (req) => handleStatements(statementDeps, req) },
    { path: '/xAPI/activities/state', methods: METHODS, scopes: S.state, versioned: true, handler: (req) => handleDocuments(documentDeps, 'state', req) },
    { path: '/xAPI/activities/profile', methods: METHODS, scopes: S.profile, versioned: true, handler: (req) => handleDocuments(documentDeps, 'activity_profile', req) },
    { path: '/xAPI/agents/profile', methods: METHODS, scopes: S.profile, versioned: true, handler: (req) => handleDocuments(documentDeps, 'agent_profile', req) },
    { path: '/xAPI/activities', methods: RESOURCES.activities.methods, scopes: S.views, versioned: true, handler: (req) => handleActivities(viewDeps, req) },
    { path: '/xAPI/agents', methods: RESOURCES.agents.methods, scopes: S.views, versioned: true, handler: (req) => handleAgents(viewDeps, req) },
    { path: '/xAPI/about', methods: RESOURCES.about.methods, versioned: false, handler: async (req) => about(req, config.xapiVersions) },
  ];
}

export function registerXapi(app: FastifyInstance, deps: XapiDeps): void {
  const cors = corsOrigins(deps.config);
  app.addHook('onRequest', async (request, reply) => {
    if (request.url.startsWith('/xAPI')) corsHeaders(cors, request, reply);
  });
  // Statements answers the handler never produced (401, version header, 413, alternate-syntax
  // errors) carry X-Experience-API-Consistent-Through too (Communication §2.1.3.s2.b5).
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.routeOptions.url === STATEMENTS_PATH && !reply.hasHeader(CONSISTENT_THROUGH)) {
      reply.headers(await consistentThroughHeader(deps.store, ''));
    }
    return payload;
  });
  for (const resource of resources(deps)) {
    app.route({ method: [...METHODS], url: resource.path, handler: (request, reply) => serveResource(deps, resource, request, reply) });
    app.options(resource.path, async (request, reply) => preflight(cors, request, reply));
  }
  registerSystem(app, deps);
}

/** LECTERN_CORS_ALLOWED_ORIGINS: the Access-Control-Allow-Origin of a request's Origin, if any. */
interface Cors {
  allowAll: boolean;
  origin(origin: string | undefined): string | undefined;
}

function corsOrigins(config: Config): Cors {
  const allowAll = config.corsAllowedOrigins.includes('*');
  const origin = (given: string | undefined): string | undefined => {
    if (!given) return undefined;
    if (allowAll) return '*';
    return config.corsAllowedOrigins.includes(given) ? given : undefined;
  };
  return { allowAll, origin };
}

function corsHeaders(cors: Cors, request: FastifyRequest, reply: FastifyReply): void {
  const origin = cors.origin(request.headers.origin);
  if (origin) {
    reply.header('access-control-allow-origin', origin);
    reply.header('access-control-expose-headers', CORS_EXPOSE_HEADERS);
  }
  // The answer depends on Origin whether or not this one is allowed: caches must know.
  if (!cors.allowAll) reply.header('vary', 'Origin');
}

/** A CORS preflight (OPTIONS): the methods and headers a page of an allowed origin may send. */
function preflight(cors: Cors, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (cors.origin(request.headers.origin)) {
    reply.header('access-control-allow-methods', METHODS.join(', '));
    reply.header('access-control-allow-headers', CORS_ALLOW_HEADERS);
    reply.header('access-control-max-age', '86400');
  }
  return reply.status(204).send();
}
