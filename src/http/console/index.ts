/**
 * The console front door at /console: server-rendered pages (./pages.ts, ./views.ts) with one
 * small script and one stylesheet (./assets/), served under a content hash and cached for good.
 * Sessions are sealed cookies (./session.ts, ./kit.ts), the signed-out ones recorded in the store;
 * the pages read through the same use cases as the xAPI and admin routes (src/ops/), as the
 * session's user (its scopes and store).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { adminRole } from '../../auth/scopes.ts';
import { LrsError } from '../../errors.ts';
import { send } from '../answer.ts';
import { registerConsoleAdmin } from './admin.ts';
import { registerDocumentPages } from './documents.ts';
import { registerConsoleFailures } from './failures.ts';
import { errorAnswer, HttpRefusal } from '../errors.ts';
import { ASSET_TYPES, type ConsoleDeps, ConsoleDoor } from './kit.ts';
import { registerConsoleOidc } from './oidc.ts';
import { registerConsoleOverview } from './overview.ts';
import { signInPage } from './pages.ts';
import { registerStatementPages } from './statements.ts';

export function registerConsole(parent: FastifyInstance, deps: ConsoleDeps): void {
  // A scope of its own: its error handler and hooks apply to the console's routes only.
  void parent.register(async (app) => consoleRoutes(app, new ConsoleDoor(deps)));
}

function consoleRoutes(app: FastifyInstance, door: ConsoleDoor): void {
  app.addHook('onRequest', async (_request, reply) => {
    reply.removeHeader('x-experience-api-version');
  });
  // A client's mistake (a repeated parameter, bad percent-escapes, a form too large) is its 4xx;
  // anything else goes on to the server's handler (a 500, logged).
  app.setErrorHandler(async (err, _request, reply) => {
    if (!(err instanceof LrsError || err instanceof HttpRefusal)) throw err;
    return send(reply, errorAnswer(err));
  });

  app.get('/console', async (request, reply) => {
    const { session } = await door.sessionOf(request);
    // Administrators land on the Overview; a plain xAPI user on its statements.
    return reply.redirect(!session ? '/console/sign-in' : adminRole(session.user) ? '/console/overview' : '/console/statements', 303);
  });
  app.get('/console/assets/:hash/:name', async (request, reply) => assetRoute(door, request, reply));
  app.get('/console/sign-in', async (request, reply) => signInRoute(door, request, reply));
  app.post('/console/sign-in', async (request, reply) => signInFormRoute(door, request, reply));
  app.post('/console/sign-out', async (request, reply) => signOutRoute(door, request, reply));
  /** What the session holds (its expiry, scopes and store), for the console's script. */
  app.get('/console/session', async (request, reply) => {
    const s = await door.jsonSession(request, reply);
    if (!s) return reply;
    return door.sendJson(reply, 200, { username: s.user.username, scopes: s.user.scopes, store: door.workingStore(s), expires: new Date(s.expires).toISOString() });
  });

  registerStatementPages(app, door);
  registerDocumentPages(app, door);
  registerConsoleAdmin(app, door);
  registerConsoleFailures(app, door);
  registerConsoleOverview(app, door);
  if (door.oidcEnabled) registerConsoleOidc(app, door);
}

async function assetRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const { hash, name } = request.params as { hash: string; name: string };
  const body = door.assets.files.get(name);
  if (hash !== door.assets.hash || !body) return door.sendJson(reply, 404, { detail: 'no such console asset (the console was updated: reload the page)' });
  return reply.headers({ 'content-type': ASSET_TYPES[name], 'cache-control': 'public, max-age=31536000, immutable', 'x-content-type-options': 'nosniff' }).send(body);
}

async function signInRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const { next, ended } = door.queryOf(request);
  const problem = door.nextProblem(next);
  if (problem) return door.sendPage(reply, 400, signInPage(door.ctx(), { error: problem, oidc: door.oidcEnabled, basic: door.basicEnabled }));
  if ((await door.sessionOf(request)).session) return reply.redirect(door.safeNext(next), 303);
  const notice = ended === 'credential' ? 'Your session has ended: the credential you signed in with was revoked, rotated, expired or changed. Sign in again.' : undefined;
  return door.sendPage(reply, 200, signInPage(door.ctx(), { oidc: door.oidcEnabled, basic: door.basicEnabled, next, notice }));
}

async function signInFormRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (!door.sameOrigin(request)) return door.sendJson(reply, 403, { detail: 'a sign-in must come from the console’s own page' });
  const form = await door.readForm(request, reply);
  const username = form.username ?? '';
  const problem = door.nextProblem(form.next);
  const page = (status: number, error: string) =>
    door.sendPage(reply, status, signInPage(door.ctx(), { error, username, oidc: door.oidcEnabled, basic: door.basicEnabled, next: problem ? undefined : form.next }));
  // Before the password is checked: no session is opened for a sign-in that cannot be answered.
  if (problem) return page(400, problem);
  if (!door.basicEnabled) return page(400, 'This LRS accepts no passwords (LECTERN_RUNSERVER_AUTH_BACKENDS has no basic): sign in with OpenID Connect.');
  if (!username || !form.password || username.includes(':')) return page(400, 'Give a username and a password.');
  // The same check as an API request's, failed sign-ins counted per address by the throttle.
  const result = await door.auth.authenticate(`Basic ${Buffer.from(`${username}:${form.password}`, 'utf8').toString('base64')}`, request.ip);
  if (!result.ok) {
    if (result.headers['retry-after']) reply.header('retry-after', result.headers['retry-after']);
    if (result.status === 401) return page(401, 'Wrong username or password.');
    return page(result.status, `Too many sign-in attempts; try again in ${result.headers['retry-after'] ?? 'a few'} seconds.`);
  }
  door.openSessionFor(reply, request, result);
  return reply.redirect(door.safeNext(form.next), 303);
}

const SIGN_OUT_UNAVAILABLE = 'the sign-out cannot be recorded right now (the database does not answer), so the session is still open: try again shortly';

/**
 * Ends the session on every process (a copy of its cookie is refused from now on), then clears
 * the cookie. Refused from another site's page, with or without a session: a cross-site form
 * carries no cookie, and must not clear it either.
 */
async function signOutRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (!door.sameOrigin(request)) return door.sendJson(reply, 403, { detail: 'a sign-out must come from the console’s own pages' });
  const { session: s, ended } = await door.sessionOf(request);
  // A sign-out that cannot be recorded (503) keeps the cookie, to be tried again: clearing it
  // would leave any copy of it working.
  if (ended === 'unavailable') return door.sendJson(reply.header('retry-after', '5'), 503, { detail: SIGN_OUT_UNAVAILABLE });
  const form = await door.readForm(request, reply, s?.user);
  if (s && !door.fromConsole(request, s, form)) return door.sendJson(reply, 403, { detail: 'refused: this change does not carry the session’s CSRF token' });
  // Before the cookie is cleared: a write the database refuses (503) leaves it set.
  if (s) await door.endSession(s);
  door.clearSession(request, reply);
  return reply.redirect('/console/sign-in', 303);
}
