/**
 * The console front door at /console: server-rendered pages (./pages.ts, ./views.ts) with one
 * small script and one stylesheet (./assets/), served under a content hash and cached for good.
 * Sessions are sealed cookies (./session.ts, ./kit.ts); the pages read through the same use cases
 * as the xAPI and admin routes (src/ops/), as the session's user (its scopes and store).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { adminRole } from '../../auth/scopes.ts';
import { LrsError } from '../../errors.ts';
import { send } from '../answer.ts';
import { registerConsoleAdmin } from './admin.ts';
import { registerDocumentPages } from './documents.ts';
import { registerConsoleFailures } from './failures.ts';
import { errorAnswer, HttpRefusal } from '../errors.ts';
import { ASSET_TYPES, type ConsoleDeps, ConsoleDoor, readForm } from './kit.ts';
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
  if ((await door.sessionOf(request)).session) return reply.redirect(door.safeNext(next), 303);
  const notice = ended === 'credential' ? 'Your session has ended: the credential you signed in with was revoked, rotated, expired or changed. Sign in again.' : undefined;
  return door.sendPage(reply, 200, signInPage(door.ctx(), { oidc: door.oidcEnabled, basic: door.basicEnabled, next, notice }));
}

async function signInFormRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (!door.sameOrigin(request)) return door.sendJson(reply, 403, { detail: 'a sign-in must come from the console’s own page' });
  const form = await readForm(request);
  const username = form.username ?? '';
  const page = (status: number, error: string) =>
    door.sendPage(reply, status, signInPage(door.ctx(), { error, username, oidc: door.oidcEnabled, basic: door.basicEnabled, next: form.next }));
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

async function signOutRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const { session: s } = await door.sessionOf(request);
  const form = await readForm(request);
  if (s && !door.fromConsole(request, s, form)) return door.sendJson(reply, 403, { detail: 'refused: this change does not carry the session’s CSRF token' });
  door.clearSession(request, reply);
  return reply.redirect('/console/sign-in', 303);
}
