/**
 * How an admin route's request is served: admitted as the xAPI routes are (the one `admit`, the
 * same Authenticator) behind the admin API's throttle of failed sign-ins, granted only with an
 * admin role (src/auth/scopes.ts, adminRole: 403 without one), its query checked against the
 * route's parameters; only then is its body read, on the handler's demand. The handler's answer,
 * or the 4xx of a client's mistake or a refused action, is written with the one `send`.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SignInFailures } from '../../auth/throttle.ts';
import type { Authenticator, AuthUser } from '../../auth/types.ts';
import type { Clock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import { LrsError } from '../../errors.ts';
import type { IngestRate } from '../../monitoring/ingest.ts';
import { type AdminActor, type AdminContext, httpActor } from '../../ops/admin/roles.ts';
import { OpsError } from '../../ops/errors.ts';
import type { Store } from '../../store/types.ts';
import { admit, type Grant, type Throttle } from '../access.ts';
import { type Answer, json, send } from '../answer.ts';
import { errorAnswer, HttpRefusal } from '../errors.ts';
import { issue, parseBody, routeQuery } from './fields.ts';

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
export interface AdminCall {
  ctx: AdminContext;
  deps: AdminDeps;
  by: AdminActor;
  /** The path's parameters (`:key`, `:id`). */
  params: Record<string, string>;
  query: Record<string, string>;
  body(): Promise<Record<string, unknown>>;
}

/** An admin route: `params` the query parameters it takes, `fields` its body's. */
export interface AdminRoute {
  method: 'GET' | 'POST';
  path: string;
  params?: readonly string[];
  fields?: readonly string[];
  handler(call: AdminCall): Promise<Answer>;
}

/** What every admin route is served with: the door's dependencies, the actions' context and its throttle. */
export interface AdminDoor {
  deps: AdminDeps;
  ctx: AdminContext;
  throttle: Throttle;
}

/** The user name of Basic credentials, without checking them (what the per-user failure count is keyed by). */
function basicUser(authorization: string | undefined): string | undefined {
  const m = authorization && /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(0, colon);
}

/** The admin API's throttle: failed sign-ins counted per client address and per Basic user name (SignInFailures' rule). */
export function signInThrottle(failures: SignInFailures): Throttle {
  return {
    blocked(authorization, client) {
      const wait = failures.blocked(client, basicUser(authorization));
      if (!wait) return undefined;
      return json(429, { detail: `too many failed admin sign-ins from this address or for this user: try again in ${wait} s` }, { 'retry-after': String(wait) });
    },
    failed: (authorization, client) => failures.failed(client, basicUser(authorization)),
  };
}

/** The admin API's grant: the user's admin role, as the actor of the request's actions (403 without one). */
const grantAdmin =
  (authorization: string | undefined, client: string): Grant<AdminActor> =>
  (user) => {
    const by = httpActor(user, client, /^\s*bearer\s/i.test(authorization ?? '') ? 'token' : 'basic');
    if (by) return { access: by };
    return {
      refusal: json(403, {
        detail: `the admin API needs the admin or admin/store scope, which the user ${user.username} does not hold (xAPI scopes, all included, do not reach it)`,
      }),
    };
  };

/** A refusal of an admin action that names its input field: answered as the body's field it came from. */
function answerOf(err: LrsError | HttpRefusal): Answer {
  if (err instanceof OpsError && err.field !== undefined && err.kind === 'bad_request') {
    return errorAnswer(issue('body', err.field, err.message.replace(`${err.field}: `, ''), 'value_error'));
  }
  return errorAnswer(err);
}

async function answerRoute(door: AdminDoor, route: AdminRoute, request: FastifyRequest, reply: FastifyReply): Promise<Answer> {
  const authorization = request.headers.authorization;
  const admitted = await admit(door.deps.auth, authorization, request.ip, { throttle: door.throttle, grant: grantAdmin(authorization, request.ip) });
  if ('refusal' in admitted) return admitted.refusal;
  const query = routeQuery(request.url, route.params ?? []);
  const body = async () => parseBody(await door.deps.readBody(request, reply, admitted.user), request.headers['content-type'], route.fields ?? []);
  return route.handler({ ctx: door.ctx, deps: door.deps, by: admitted.access, params: request.params as Record<string, string>, query, body });
}

/** Serves a request of `route`; anything but a client's mistake or a refused action goes on to the server's handler (a 500, logged). */
export async function serveAdminRoute(door: AdminDoor, route: AdminRoute, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  let answer: Answer;
  try {
    answer = await answerRoute(door, route, request, reply);
  } catch (err) {
    if (!(err instanceof LrsError || err instanceof HttpRefusal)) throw err;
    answer = answerOf(err);
  }
  return send(reply, answer);
}
