/**
 * What every console page shares (the ConsoleKit the admin pages take too): the session from its
 * sealed cookie, rechecked on each request; the store it works in; who its reads run as; pages,
 * JSON answers and small forms. The console's data calls run as the session's user (its scopes and
 * store), never with credentials held in the browser.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type AccessPolicy, adminRole, authorise, type RouteScopes } from '../../auth/scopes.ts';
import type { Authenticator, AuthSuccess, AuthUser } from '../../auth/types.ts';
import { type Clock, systemClock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import { LrsError } from '../../errors.ts';
import { type Reader, readView } from '../../ops/reads.ts';
import type { StatementReads, Store } from '../../store/types.ts';
import type { XapiVersion } from '../../xapi/versions.ts';
import { JSON_UTF8, send } from '../answer.ts';
import type { BodyLimits, RequestBodies } from '../bodies.ts';
import type { ConsoleKit } from './admin.ts';
import { parseQuery, queryOf } from '../request.ts';
import { errorPage, type AssetUrls, type PageContext } from './pages.ts';
import { cookie, csrfMatches, newSession, openSession, parseCookies, Sealer, SESSION_COOKIE, type Session } from './session.ts';

export interface ConsoleDeps {
  config: Config;
  auth: Authenticator;
  policy: AccessPolicy;
  /** What the pages read and the admin pages call the src/ops/ use cases on. */
  store: Store;
  /** What audit times, credential creation and expiry are measured by. */
  clock?: Clock;
  /** The server's request bodies: the console's forms are read under the same bounds as every body. */
  bodies: RequestBodies;
}

/**
 * The console's assets, ./assets/ in src/. The build compiles only TypeScript, so from
 * dist/http/console/ this is the same folder of src/ (which the package ships): one path for both.
 */
const ASSET_DIR = new URL('../../../src/http/console/assets/', import.meta.url);
export const ASSET_TYPES: Record<string, string> = { 'console.css': 'text/css; charset=utf-8', 'console.js': 'text/javascript; charset=utf-8' };

/** The assets, read once, and their URLs under the hash of their content. */
function loadAssets(): { urls: AssetUrls; files: Map<string, Buffer>; hash: string } {
  const files = new Map(Object.keys(ASSET_TYPES).map((name) => [name, readFileSync(new URL(name, ASSET_DIR))]));
  const h = createHash('sha256');
  for (const [name, body] of files) h.update(name).update(body);
  const hash = h.digest('hex').slice(0, 16);
  return { urls: { css: `/console/assets/${hash}/console.css`, js: `/console/assets/${hash}/console.js` }, files, hash };
}

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');
const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': CSP,
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
};
const JSON_HEADERS = { 'content-type': JSON_UTF8, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };

const UNAVAILABLE = 'the console cannot check your sign-in right now (the database does not answer); try again shortly';

/** Largest console form read (sign-in, sign-out, every change). */
const FORM_MAX = 8 * 1024;

export class ConsoleDoor implements ConsoleKit {
  readonly deps: { store: Store; config: Config; clock: Clock };
  readonly auth: Authenticator;
  readonly policy: AccessPolicy;
  readonly sealer: Sealer;
  readonly assets = loadAssets();
  /** The version the console reads statements under: the newest served. */
  readonly version: XapiVersion;
  readonly oidcEnabled: boolean;
  readonly basicEnabled: boolean;
  private readonly bodies: RequestBodies;
  /** The server's body bounds (LECTERN_REQUEST_BODY_TIMEOUT, …_MIN_RATE, the budget), with a form's size. */
  private readonly formLimits: BodyLimits;

  constructor(deps: ConsoleDeps) {
    const { config } = deps;
    this.deps = { store: deps.store, config, clock: deps.clock ?? systemClock };
    this.bodies = deps.bodies;
    this.formLimits = { ...deps.bodies.limits, limit: FORM_MAX, tooLarge: `a console form has at most ${FORM_MAX} bytes` };
    this.auth = deps.auth;
    this.policy = deps.policy;
    this.sealer = new Sealer(config.consoleSecret);
    this.version = config.xapiVersions.includes('2.0.0') ? '2.0.0' : '1.0.3';
    this.oidcEnabled = config.consoleOidcClientId !== '' && config.oidcIssuerUri !== '';
    this.basicEnabled = (config.authBackend.length ? config.authBackend : config.authBackends).includes('basic');
  }

  /** Epoch milliseconds now. */
  now(): number {
    return this.deps.clock.now();
  }

  secure(request: FastifyRequest): boolean {
    return request.protocol === 'https';
  }

  /**
   * The store a session works in: an operator's chosen one (the store switcher), else the user's
   * own. Only an operator's choice counts, whatever a session holds.
   */
  workingStore(s: Session): string {
    return adminRole(s.user)?.kind === 'operator' ? (s.store ?? s.user.target) : s.user.target;
  }

  ctx(session?: Session): PageContext {
    const assets = this.assets.urls;
    if (!session) return { assets };
    const role = adminRole(session.user)?.kind;
    return { assets, session: { user: session.user, csrf: session.csrf, store: this.workingStore(session), ...(role && { role }) } };
  }

  sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
    return send(reply, { status, headers: PAGE_HEADERS, body });
  }

  sendJson(reply: FastifyReply, status: number, value: unknown): FastifyReply {
    return send(reply, { status, headers: JSON_HEADERS, body: JSON.stringify(value) });
  }

  queryOf(request: FastifyRequest): Record<string, string> {
    return queryOf(request.url);
  }

  /**
   * Reads a small urlencoded form as every body is read (src/http/bodies.ts): at most FORM_MAX
   * bytes, 408 when it stalls or trickles, counted against the bodies in flight as `user`'s (none:
   * a sign-in, read before authentication). A refused body is left unread and its connection
   * closed after the answer.
   */
  async readForm(request: FastifyRequest, reply: FastifyReply, user?: AuthUser): Promise<Record<string, string>> {
    const body = await this.bodies.readWhole(request.raw, reply.raw, user, this.formLimits);
    return body ? parseQuery(body.toString('utf8'), 'form') : {};
  }

  /**
   * The request's session, when its cookie is sealed here, not expired, not signed out, and its
   * credential still holds and still gives the user it shows. Whether it was signed out is one
   * indexed read of the primary on every request, never cached (a copy of the cookie would work
   * meanwhile on a process that had not read it); the credential's recheck (auth.recheck: the
   * credentials file re-read when it changed, the database credentials' cache and change
   * counter) costs no read.
   * `ended`: why a session it carries no longer counts.
   */
  async sessionOf(request: FastifyRequest): Promise<{ session?: Session; ended?: 'signed-out' | 'credential' | 'unavailable' }> {
    const session = openSession(this.sealer, parseCookies(request.headers.cookie).get(SESSION_COOKIE), this.now());
    if (!session) return {};
    try {
      if (await this.deps.store.sessionEnded(session.id)) return { ended: 'signed-out' };
    } catch (err) {
      if (err instanceof LrsError && err.kind === 'unavailable') return { ended: 'unavailable' };
      throw err;
    }
    const state = await this.auth.recheck(session.user, session.stamp);
    return state === 'valid' ? { session } : { ended: state === 'ended' ? 'credential' : 'unavailable' };
  }

  /** Signs the session out on every process (until its expiry, after which its cookie is refused anyway). */
  endSession(s: Session): Promise<void> {
    return this.deps.store.endSession(s.id, s.expires, this.now());
  }

  clearSession(request: FastifyRequest, reply: FastifyReply): void {
    reply.header('set-cookie', cookie(SESSION_COOKIE, '', { path: '/console', maxAge: 0, secure: this.secure(request) }));
  }

  /** A page's session, or (sent) a redirect to the sign-in page that comes back here, saying why when its credential ended it. */
  async pageSession(request: FastifyRequest, reply: FastifyReply): Promise<Session | undefined> {
    const { session, ended } = await this.sessionOf(request);
    if (session) return session;
    if (ended === 'unavailable') {
      void this.sendPage(reply.header('retry-after', '5'), 503, errorPage(this.ctx(), 'Try again shortly', UNAVAILABLE));
      return undefined;
    }
    if (ended) this.clearSession(request, reply);
    void reply.redirect(`/console/sign-in?next=${encodeURIComponent(request.url)}${ended === 'credential' ? '&ended=credential' : ''}`, 303);
    return undefined;
  }

  /** The session of a script's request (JSON answers), or (sent) its 401 or 503. */
  async jsonSession(request: FastifyRequest, reply: FastifyReply): Promise<Session | undefined> {
    const { session, ended } = await this.sessionOf(request);
    if (session) return session;
    if (ended === 'unavailable') void this.sendJson(reply.header('retry-after', '5'), 503, { detail: UNAVAILABLE });
    else {
      if (ended) this.clearSession(request, reply);
      void this.sendJson(reply, 401, { detail: 'the console session has ended: sign in again' });
    }
    return undefined;
  }

  openSessionFor(reply: FastifyReply, request: FastifyRequest, signed: AuthSuccess): void {
    const at = this.now();
    const s = newSession(signed.user, signed.stamp ?? '', this.deps.config.consoleSessionTtl, at, signed.expiresMs);
    reply.header('set-cookie', cookie(SESSION_COOKIE, this.sealer.seal('session', s), { path: '/console', maxAge: (s.expires - at) / 1000, secure: this.secure(request) }));
  }

  /** Sets the session cookie anew (a switched store), keeping its id, expiry and CSRF token. */
  reseal(request: FastifyRequest, reply: FastifyReply, s: Session): void {
    reply.header('set-cookie', cookie(SESSION_COOKIE, this.sealer.seal('session', s), { path: '/console', maxAge: (s.expires - this.now()) / 1000, secure: this.secure(request) }));
  }

  /**
   * Every change (POST), sign-in and sign-out must come from the console's own pages: no Origin of
   * another host, and no Sec-Fetch-Site but same-origin (or none: the user's own navigation) where
   * the browser sends it; a change carries the session's CSRF token too. The host only: behind a
   * TLS proxy that is not trusted (LECTERN_RUNSERVER_TRUST_PROXY) the page is https while the
   * request reaching here is http. A sign-out is checked too: a cross-site one carries no cookie
   * (SameSite=Strict), so no token can be asked of it, and its answer would clear the cookie.
   */
  sameOrigin(request: FastifyRequest): boolean {
    const site = request.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
    const origin = request.headers.origin;
    if (origin === undefined) return true;
    try {
      return new URL(origin).host === request.host;
    } catch {
      return false;
    }
  }

  /** Whether a change carries the session's CSRF token, from the console's own origin. */
  fromConsole(request: FastifyRequest, s: Session, form: Record<string, string>): boolean {
    return this.sameOrigin(request) && csrfMatches(s, (request.headers['x-csrf-token'] as string | undefined) ?? form.csrf);
  }

  async change(request: FastifyRequest, reply: FastifyReply): Promise<{ session: Session; form: Record<string, string> } | undefined> {
    // The session first: a body is read only for a request that may make the change.
    const s = await this.jsonSession(request, reply);
    if (!s) return undefined;
    const form = await this.readForm(request, reply, s.user);
    if (!this.fromConsole(request, s, form)) {
      void this.sendJson(reply, 403, { detail: 'refused: this change does not carry the session’s CSRF token' });
      return undefined;
    }
    // Refused before the change is made, not when its answer redirects to it.
    const problem = this.nextProblem(form.next);
    if (problem) {
      void this.sendPage(reply, 400, errorPage(this.ctx(s), 'Not changed', problem));
      return undefined;
    }
    return { session: s, form };
  }

  /**
   * Why `next` (where a sign-in or a change leads afterwards) cannot be sent back, or undefined: it
   * goes into a Location header, which carries printable ASCII only (a CR, LF, U+2028 or U+2029
   * would split it or fail it). A browser sends a console path percent-encoded.
   */
  nextProblem(next: string | undefined): string | undefined {
    if (next === undefined || /^[\x21-\x7e]*$/.test(next)) return undefined;
    return 'next: must be a console path in printable ASCII (percent-encode anything else, a line break or a space included)';
  }

  /** Where to go after: `next` when it is a console path (no open redirect), else the Statements page; 400 for a `next` nextProblem refuses. */
  safeNext(next: string | undefined): string {
    const problem = this.nextProblem(next);
    if (problem) throw new LrsError('bad_request', problem);
    return next && /^\/console(\/|\?|$)/.test(next) && !next.includes('\\') ? next : '/console/statements';
  }

  /**
   * Who the console's reads run as: the session's user, in the store it works in. An
   * administrator (operator or store administrator) reads all of that store (`all/read` added),
   * as its admin role already reaches all of it (erasure, rejections' bodies, credentials).
   */
  actor(s: Session): AuthUser {
    if (!adminRole(s.user)) return s.user;
    return { ...s.user, target: this.workingStore(s), scopes: [...s.user.scopes, 'all/read'] };
  }

  /** The session's reader of a resource needing `scopes`: 403 without them, as the resource's route answers. */
  reader(s: Session, scopes: RouteScopes): Reader {
    const user = this.actor(s);
    const decision = authorise(user, 'GET', scopes, this.policy);
    if (!decision.ok) throw new LrsError('forbidden', `this needs the scope ${decision.needed}, which ${user.username} does not hold`);
    return { target: user.target, agent: user.agent, mineOnly: decision.access.mineOnly };
  }

  /**
   * A page's statement reads: one view for all of them (a healthy read replica, else the primary),
   * as one GET /statements has, so that the Consistent-Through shown is true of the whole page.
   * Documents are read on the primary.
   */
  readView(): StatementReads {
    return readView(this.deps.store);
  }
}
