/**
 * The operator console at /console: server-rendered pages (./console-pages.ts, ./console-views.ts)
 * with one small script and one stylesheet from the top-level console/ folder, served under a
 * content hash and cached for good. Sessions are sealed cookies (./console-session.ts); the
 * console's data comes from the xAPI handlers themselves, called in-process as the session's user
 * (its scopes and store), never with credentials held in the browser.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { adminRole, authorise, type AccessPolicy, type RouteScopes } from '../../auth/scopes.ts';
import type { Authenticator, AuthSuccess, AuthUser } from '../../auth/types.ts';
import { type Clock, systemClock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import type { StatementReads, Store } from '../../store/types.ts';
import { LrsError } from '../../errors.ts';
import type { XapiVersion } from '../../xapi/versions.ts';
import { errorPage, signInPage, type AssetUrls, type PageContext } from './pages.ts';
import { cookie, csrfMatches, newSession, openSession, parseCookies, Sealer, SESSION_COOKIE, type Session } from './session.ts';
import {
  agentParam, DEFAULT_EXPORT_FIELDS, EXPORT_FIELDS, FILTERS, ifiOf, learnerPage, statementPage, statementRow, statementsPage, type Filters,
} from './views.ts';
import { errorResponse, HttpRefusal } from '../errors.ts';
import { parseQuery, type XapiRequest, type XapiResponse } from '../request.ts';
import { registerConsoleOidc } from './oidc.ts';
import { type ConsoleKit, registerConsoleAdmin } from '../console-admin.ts';
import { registerConsoleFailures } from '../console-failures.ts';
import { registerConsoleOverview } from './overview.ts';

type Handler = (req: XapiRequest) => Promise<XapiResponse>;
/** An xAPI resource the console reads, with the scopes its route needs. */
export interface ConsoleResource {
  handler: Handler;
  scopes: RouteScopes;
}

export interface ConsoleDeps {
  config: Config;
  auth: Authenticator;
  policy: AccessPolicy;
  resources: { statements: ConsoleResource; agents: ConsoleResource; state: ConsoleResource; agentProfile: ConsoleResource };
  /** What the admin pages call the src/ops/ use cases on. */
  store: Store;
  /** What audit times, credential creation and expiry are measured by. */
  clock?: Clock;
  /** Epoch milliseconds now (a test clock in unit tests). */
  now?: () => number;
}


/**
 * Where the console's assets are: beside this module in src/, and from dist/http/console/ (the
 * build copies no asset) the same folder of src/, which the package ships.
 */
const ASSET_DIR = new URL('../../../src/http/console/assets/', import.meta.url);
const ASSET_TYPES: Record<string, string> = { 'console.css': 'text/css; charset=utf-8', 'console.js': 'text/javascript; charset=utf-8' };
/** Most statements one download carries: narrow the query (since/until) for more. */
export const DOWNLOAD_MAX = 100_000;
/** How far back from the newest statement shown each poll of the live tail looks. */
const TAIL_OVERLAP_MS = 5000;
/** Largest sign-in or sign-out form read. */
const FORM_MAX = 8 * 1024;

const CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'", "connect-src 'self'", "form-action 'self'",
  "frame-ancestors 'none'", "base-uri 'none'",
].join('; ');

function loadAssets(): { urls: AssetUrls; files: Map<string, Buffer>; hash: string } {
  const files = new Map(Object.keys(ASSET_TYPES).map((name) => [name, readFileSync(new URL(name, ASSET_DIR))]));
  const h = createHash('sha256');
  for (const [name, body] of files) h.update(name).update(body);
  const hash = h.digest('hex').slice(0, 16);
  return { urls: { css: `/console/assets/${hash}/console.css`, js: `/console/assets/${hash}/console.js` }, files, hash };
}

export { agentParam };


function filtersOf(query: Record<string, string>): Filters {
  const f: Filters = {};
  for (const k of FILTERS) {
    const v = query[k]?.trim();
    if (v) f[k] = k === 'agent' ? agentParam(v) : v;
  }
  return f;
}

/** The detail of an xAPI handler's error body, as one line. */
function detailOf(res: XapiResponse): string {
  try {
    const d = (JSON.parse(String(res.body)) as { detail?: unknown }).detail;
    if (Array.isArray(d)) return d.map((i: { loc?: unknown[]; msg?: string }) => `${(i.loc ?? []).slice(1).join('.')}: ${i.msg ?? ''}`).join('; ');
    return String(d);
  } catch {
    return `the request failed (${res.status})`;
  }
}

/** The header an xAPI statements answer carries, which the console's pages of statements carry too. */
const CONSISTENT_THROUGH = 'x-experience-api-consistent-through';
/** The Consistent-Through of an xAPI handler's answer. */
const throughOf = (res: XapiResponse): string => res.headers?.[CONSISTENT_THROUGH] ?? new Date(0).toISOString();

/** The next page's query string of a `more` link. */
const moreQuery = (more: string): string => (more ? more.slice(more.indexOf('?') + 1) : '');

/**
 * Reads a small urlencoded form; beyond FORM_MAX bytes, 413 with the rest left unread (the server
 * then closes the connection after the answer).
 */
function readForm(request: FastifyRequest): Promise<Record<string, string>> {
  const tooLarge = () => new HttpRefusal(413, `a console form has at most ${FORM_MAX} bytes`);
  if (Number(request.headers['content-length'] ?? 0) > FORM_MAX) return Promise.reject(tooLarge());
  const raw = request.raw;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', reject);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= FORM_MAX) return void chunks.push(chunk);
      stop();
      raw.pause();
      reject(tooLarge());
    };
    const onEnd = () => {
      stop();
      try {
        resolve(parseQuery(Buffer.concat(chunks).toString('utf8'), 'form'));
      } catch (err) {
        reject(err);
      }
    };
    raw.on('data', onData);
    raw.once('end', onEnd);
    raw.once('error', reject);
  });
}

/** A CSV cell: quoted when needed; text that a spreadsheet would run as a formula is prefixed with '. */
function csvCell(v: unknown): string {
  if (v === undefined || v === null) return '';
  let s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** A download field's value: actor and authority by their identifier, verb and object by id. */
function fieldValue(statement: Record<string, unknown>, name: string): unknown {
  if (name === 'actor' || name === 'authority') {
    const ifi = ifiOf(statement[name]);
    if (!ifi) return statement[name];
    const acc = ifi.account as { homePage: string; name: string } | undefined;
    return acc ? `${acc.homePage}#${acc.name}` : Object.values(ifi)[0];
  }
  if (name === 'verb' || name === 'object') return (statement[name] as { id?: unknown } | undefined)?.id;
  let v: unknown = name === 'registration' ? statement.context : statement;
  for (const part of name.split('.')) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[part] : undefined;
  return v;
}

export function registerConsole(parent: FastifyInstance, deps: ConsoleDeps): void {
  // A scope of its own: its error handler and hooks apply to the console's routes only.
  void parent.register(async (app) => consoleRoutes(app, deps));
}

function consoleRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { config, auth, policy, resources } = deps;
  const clock = deps.clock ?? systemClock;
  const now = deps.now ?? (() => clock.now());
  const sealer = new Sealer(config.consoleSecret);
  const assets = loadAssets();
  const version: XapiVersion = config.xapiVersions.includes('2.0.0') ? '2.0.0' : '1.0.3';
  const oidcEnabled = config.consoleOidcClientId !== '' && config.oidcIssuerUri !== '';
  const basicEnabled = (config.authBackend.length ? config.authBackend : config.authBackends).includes('basic');

  const secure = (request: FastifyRequest) => request.protocol === 'https';
  /**
   * The store a session works in: an operator's chosen one (the store switcher), else the user's
   * own. Only an operator's choice counts, whatever a session holds.
   */
  const workingStore = (s: Session): string => (adminRole(s.user)?.kind === 'operator' ? (s.store ?? s.user.target) : s.user.target);
  const ctx = (session?: Session): PageContext => {
    if (!session) return { assets: assets.urls };
    const role = adminRole(session.user)?.kind;
    return { assets: assets.urls, session: { user: session.user, csrf: session.csrf, store: workingStore(session), ...(role && { role }) } };
  };
  const sendPage = (reply: FastifyReply, status: number, body: string) =>
    reply
      .status(status)
      .headers({
        'content-type': 'text/html; charset=utf-8',
        'content-security-policy': CSP,
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'same-origin',
        'x-frame-options': 'DENY',
      })
      .send(body);
  const sendJson = (reply: FastifyReply, status: number, value: unknown) =>
    reply.status(status).headers({ 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }).send(JSON.stringify(value));

  /**
   * The request's session, when its cookie is sealed here, not expired, and its credential still
   * holds and still gives the user it shows (auth.recheck: the credentials file re-read when it
   * changed, the database credentials' cache and change counter; no database read per request).
   * `ended`: why a session it carries no longer counts.
   */
  const sessionOf = async (request: FastifyRequest): Promise<{ session?: Session; ended?: 'credential' | 'unavailable' }> => {
    const session = openSession(sealer, parseCookies(request.headers.cookie).get(SESSION_COOKIE), now());
    if (!session) return {};
    const state = await auth.recheck(session.user, session.stamp);
    return state === 'valid' ? { session } : { ended: state === 'ended' ? 'credential' : 'unavailable' };
  };
  const clearSession = (request: FastifyRequest, reply: FastifyReply) =>
    reply.header('set-cookie', cookie(SESSION_COOKIE, '', { path: '/console', maxAge: 0, secure: secure(request) }));
  const UNAVAILABLE = 'the console cannot check your sign-in right now (the database does not answer); try again shortly';
  /** A page's session, or (sent) a redirect to the sign-in page that comes back here, saying why when a session ended. */
  const pageSession = async (request: FastifyRequest, reply: FastifyReply): Promise<Session | undefined> => {
    const { session, ended } = await sessionOf(request);
    if (session) return session;
    if (ended === 'unavailable') {
      void sendPage(reply.header('retry-after', '5'), 503, errorPage(ctx(), 'Try again shortly', UNAVAILABLE));
      return undefined;
    }
    if (ended) clearSession(request, reply);
    void reply.redirect(`/console/sign-in?next=${encodeURIComponent(request.url)}${ended ? '&ended=credential' : ''}`, 303);
    return undefined;
  };
  /** The session of a script's request (JSON answers), or (sent) its 401 or 503. */
  const jsonSession = async (request: FastifyRequest, reply: FastifyReply): Promise<Session | undefined> => {
    const { session, ended } = await sessionOf(request);
    if (session) return session;
    if (ended === 'unavailable') void sendJson(reply.header('retry-after', '5'), 503, { detail: UNAVAILABLE });
    else {
      if (ended) clearSession(request, reply);
      void sendJson(reply, 401, { detail: 'the console session has ended: sign in again' });
    }
    return undefined;
  };
  const openSessionFor = (reply: FastifyReply, request: FastifyRequest, signed: AuthSuccess) => {
    const at = now();
    const s = newSession(signed.user, signed.stamp ?? '', config.consoleSessionTtl, at, signed.expiresMs);
    reply.header('set-cookie', cookie(SESSION_COOKIE, sealer.seal('session', s), { path: '/console', maxAge: (s.expires - at) / 1000, secure: secure(request) }));
  };
  /**
   * Every change (POST) must come from the console's own pages: the session's CSRF token in the
   * X-CSRF-Token header or the form's `csrf` field, and no Origin of another host. The host only:
   * behind a TLS proxy that is not trusted (LECTERN_RUNSERVER_TRUST_PROXY) the page is https while
   * the request reaching here is http.
   */
  const sameOrigin = (request: FastifyRequest) => {
    const origin = request.headers.origin;
    if (origin === undefined) return true;
    try {
      return new URL(origin).host === request.host;
    } catch {
      return false;
    }
  };
  const safeNext = (next: string | undefined) => (next && /^\/console(\/|\?|$)/.test(next) && !next.includes('\\') ? next : '/console/statements');

  /**
   * Who the console's data calls run as: the session's user, in the store it works in. An
   * administrator (operator or store administrator) reads all of that store (`all/read` added),
   * as its admin role already reaches all of it (erasure, rejections' bodies, credentials).
   */
  const actor = (s: Session): AuthUser => {
    if (!adminRole(s.user)) return s.user;
    return { ...s.user, target: workingStore(s), scopes: [...s.user.scopes, 'all/read'] };
  };
  /**
   * A page's reads: one view for all of them (a healthy read replica, else the primary), as one
   * GET /statements has, so that the Consistent-Through shown is true of the whole page.
   * Documents are read on the primary (their handler does not take a view).
   */
  const readView = (): StatementReads => deps.store.readView?.() ?? deps.store;
  /** Calls an xAPI resource as `user` (its scopes and its store), its statement reads on `reads`. */
  const xapiGet = async (resource: ConsoleResource, user: AuthUser, query: Record<string, string>, reads?: StatementReads): Promise<XapiResponse> => {
    const decision = authorise(user, 'GET', resource.scopes, policy);
    if (!decision.ok) return { status: 403, body: JSON.stringify({ detail: `this needs the scope ${decision.needed}, which ${user.username} does not hold` }) };
    const q = Object.assign(Object.create(null) as Record<string, string>, query);
    try {
      return await resource.handler({ method: 'GET', query: q, headers: { 'x-experience-api-version': version }, body: undefined, user, access: decision.access, version, ...(reads && { reads }) });
    } catch (err) {
      if (err instanceof LrsError || err instanceof HttpRefusal) return errorResponse(err);
      throw err;
    }
  };
  /** A page of statements, and the Consistent-Through of the server that read it. */
  type Result = { statements: Record<string, unknown>[]; more: string; through: string };
  const queryStatements = async (user: AuthUser, query: Record<string, string>, reads: StatementReads): Promise<{ ok: true; result: Result } | { ok: false; status: number; detail: string }> => {
    const res = await xapiGet(resources.statements, user, query, reads);
    if (res.status !== 200) return { ok: false, status: res.status, detail: detailOf(res) };
    return { ok: true, result: { ...(JSON.parse(String(res.body)) as Omit<Result, 'through'>), through: throughOf(res) } };
  };
  const queryOf = (request: FastifyRequest): Record<string, string> => {
    const i = request.url.indexOf('?');
    return i < 0 ? {} : parseQuery(request.url.slice(i + 1));
  };

  app.addHook('onRequest', async (_request, reply) => {
    reply.removeHeader('x-experience-api-version');
  });
  // A client's mistake (a repeated parameter, bad percent-escapes, a form too large) is its 4xx;
  // anything else goes on to the server's handler (a 500, logged).
  app.setErrorHandler(async (err, _request, reply) => {
    if (!(err instanceof LrsError || err instanceof HttpRefusal)) throw err;
    const res = errorResponse(err);
    return reply.status(res.status).headers(res.headers ?? {}).send(res.body);
  });

  app.get('/console', async (request, reply) => {
    const { session } = await sessionOf(request);
    // Administrators land on the Overview; a plain xAPI user on its statements.
    return reply.redirect(!session ? '/console/sign-in' : adminRole(session.user) ? '/console/overview' : '/console/statements', 303);
  });

  app.get('/console/assets/:hash/:name', async (request, reply) => {
    const { hash, name } = request.params as { hash: string; name: string };
    const body = assets.files.get(name);
    if (hash !== assets.hash || !body) return sendJson(reply, 404, { detail: 'no such console asset (the console was updated: reload the page)' });
    return reply.headers({ 'content-type': ASSET_TYPES[name], 'cache-control': 'public, max-age=31536000, immutable', 'x-content-type-options': 'nosniff' }).send(body);
  });

  app.get('/console/sign-in', async (request, reply) => {
    const { next, ended } = queryOf(request);
    if ((await sessionOf(request)).session) return reply.redirect(safeNext(next), 303);
    const notice = ended === 'credential' ? 'Your session has ended: the credential you signed in with was revoked, rotated, expired or changed. Sign in again.' : undefined;
    return sendPage(reply, 200, signInPage(ctx(), { oidc: oidcEnabled, basic: basicEnabled, next, notice }));
  });

  app.post('/console/sign-in', async (request, reply) => {
    if (!sameOrigin(request)) return sendJson(reply, 403, { detail: 'a sign-in must come from the console’s own page' });
    const form = await readForm(request);
    const username = form.username ?? '';
    const page = (status: number, error: string) => sendPage(reply, status, signInPage(ctx(), { error, username, oidc: oidcEnabled, basic: basicEnabled, next: form.next }));
    if (!basicEnabled) return page(400, 'This LRS accepts no passwords (LECTERN_RUNSERVER_AUTH_BACKENDS has no basic): sign in with OpenID Connect.');
    if (!username || !form.password || username.includes(':')) return page(400, 'Give a username and a password.');
    // The same check as an API request's, failed sign-ins counted per address by the throttle.
    const result = await auth.authenticate(`Basic ${Buffer.from(`${username}:${form.password}`, 'utf8').toString('base64')}`, request.ip);
    if (!result.ok) {
      if (result.headers['retry-after']) reply.header('retry-after', result.headers['retry-after']);
      if (result.status === 401) return page(401, 'Wrong username or password.');
      return page(result.status, `Too many sign-in attempts; try again in ${result.headers['retry-after'] ?? 'a few'} seconds.`);
    }
    openSessionFor(reply, request, result);
    return reply.redirect(safeNext(form.next), 303);
  });

  app.post('/console/sign-out', async (request, reply) => {
    const { session: s } = await sessionOf(request);
    const form = await readForm(request);
    if (s && (!sameOrigin(request) || !csrfMatches(s, (request.headers['x-csrf-token'] as string | undefined) ?? form.csrf))) {
      return sendJson(reply, 403, { detail: 'refused: this change does not carry the session’s CSRF token' });
    }
    clearSession(request, reply);
    return reply.redirect('/console/sign-in', 303);
  });

  /** What the session holds (its expiry, scopes and store), for the console's script and the future admin pages. */
  app.get('/console/session', async (request, reply) => {
    const s = await jsonSession(request, reply);
    if (!s) return reply;
    return sendJson(reply, 200, { username: s.user.username, scopes: s.user.scopes, store: workingStore(s), expires: new Date(s.expires).toISOString() });
  });

  app.get('/console/statements', async (request, reply) => {
    const s = await pageSession(request, reply);
    if (!s) return reply;
    const query = queryOf(request);
    const filters = filtersOf(query);
    const q: Record<string, string> = { ...filters, ...(query.search_after && { search_after: query.search_after }) };
    const r = await queryStatements(actor(s), q, readView());
    if (!r.ok) return sendPage(reply, r.status, statementsPage(ctx(s), { filters, statements: [], more: '', error: r.detail }));
    const { statements, more, through } = r.result;
    const first = !query.search_after;
    const tailSince = first ? ((statements[0]?.stored as string | undefined) ?? new Date(now()).toISOString()) : undefined;
    reply.header(CONSISTENT_THROUGH, through);
    return sendPage(reply, 200, statementsPage(ctx(s), { filters, statements, more: more && `/console/statements?${moreQuery(more)}`, tailSince, through }));
  });

  /** The live tail: statements stored after `after` matching the filters, oldest first, as table rows. */
  app.get('/console/statements/tail', async (request, reply) => {
    const s = await jsonSession(request, reply);
    if (!s) return reply;
    const query = queryOf(request);
    const filters = filtersOf(query);
    const after = query.after ?? '';
    if (!after || Number.isNaN(Date.parse(after))) return sendJson(reply, 400, { detail: 'after must be a timestamp' });
    // A few seconds back from the newest shown: a statement committed after a later-stored one
    // (another process, a slower transaction) still shows; the page skips those it has.
    const from = new Date(Date.parse(after) - TAIL_OVERLAP_MS).toISOString();
    const since = filters.since && Date.parse(filters.since) > Date.parse(from) ? filters.since : from;
    const r = await queryStatements(actor(s), { ...filters, since, ascending: 'true', limit: '100' }, readView());
    if (!r.ok) return sendJson(reply, r.status, { detail: r.detail });
    reply.header(CONSISTENT_THROUGH, r.result.through);
    const rows = r.result.statements;
    const last = rows.at(-1)?.stored as string | undefined;
    const newest = last && Date.parse(last) > Date.parse(after) ? last : after;
    // More at once than a page: ask again at once, from the newest, while that moves on.
    return sendJson(reply, 200, { rows: rows.map((st) => statementRow(st).text), after: newest, more: r.result.more !== '' && newest !== after });
  });

  app.get('/console/statements/download', async (request, reply) => {
    const s = await jsonSession(request, reply);
    if (!s) return reply;
    const raw = request.url.slice(request.url.indexOf('?') + 1);
    const params = new URLSearchParams(request.url.includes('?') ? raw : '');
    const format = params.get('format') ?? 'csv';
    if (format !== 'csv' && format !== 'ndjson') return sendJson(reply, 400, { detail: 'format must be csv or ndjson' });
    const fields = params.getAll('fields');
    const chosen = fields.length ? fields : DEFAULT_EXPORT_FIELDS;
    const unknown = chosen.filter((f) => !(EXPORT_FIELDS as readonly string[]).includes(f));
    if (unknown.length) return sendJson(reply, 400, { detail: `unknown fields: ${unknown.join(', ')} (known: ${EXPORT_FIELDS.join(', ')})` });
    const filters = filtersOf(Object.fromEntries(FILTERS.flatMap((k) => (params.has(k) ? [[k, params.get(k)!]] : []))));
    // The first page is read before answering, so a bad filter is a 400 rather than a cut download.
    // Every page from one server, whose Consistent-Through (in the header) is true of them all.
    const reads = readView();
    const first = await queryStatements(actor(s), { ...filters, limit: '0' }, reads);
    if (!first.ok) return sendJson(reply, first.status, { detail: first.detail });
    let stopped = false;
    request.raw.once('close', () => (stopped = true));
    async function* lines(): AsyncGenerator<string> {
      if (format === 'csv') yield `${chosen.map(csvCell).join(',')}\r\n`;
      let page = first.ok ? first.result : undefined;
      let sent = 0;
      while (page && !stopped) {
        let out = '';
        for (const st of page.statements) {
          if (sent++ >= DOWNLOAD_MAX) return;
          out += format === 'csv' ? `${chosen.map((f) => csvCell(fieldValue(st, f))).join(',')}\r\n` : `${JSON.stringify(st)}\n`;
        }
        if (out) yield out;
        if (!page.more) return;
        const next = await queryStatements(actor(s!), Object.fromEntries(new URLSearchParams(moreQuery(page.more))), reads);
        page = next.ok ? next.result : undefined;
      }
    }
    const stamp = new Date(now()).toISOString().slice(0, 19).replaceAll(':', '-');
    return reply
      .headers({
        'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
        'content-disposition': `attachment; filename="statements-${stamp}.${format}"`,
        [CONSISTENT_THROUGH]: first.result.through,
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
      })
      .send(Readable.from(lines()));
  });

  app.get('/console/statements/:id', async (request, reply) => {
    const s = await pageSession(request, reply);
    if (!s) return reply;
    const { id } = request.params as { id: string };
    let voided = false;
    const reads = readView();
    let res = await xapiGet(resources.statements, actor(s), { statementId: id }, reads);
    if (res.status === 404) {
      const v = await xapiGet(resources.statements, actor(s), { voidedStatementId: id }, reads);
      if (v.status === 200) [res, voided] = [v, true];
    }
    if (res.status !== 200) return sendPage(reply, res.status, errorPage(ctx(s), res.status === 404 ? 'No such statement' : 'Statement', detailOf(res)));
    reply.header(CONSISTENT_THROUGH, throughOf(res));
    return sendPage(reply, 200, statementPage(ctx(s), JSON.parse(String(res.body)) as Record<string, unknown>, voided));
  });

  app.get('/console/learner', async (request, reply) => {
    const s = await pageSession(request, reply);
    if (!s) return reply;
    const agentText = (queryOf(request).agent ?? '').trim();
    const empty = { agentText, statements: [], more: '', profiles: [], states: [] };
    if (!agentText) return sendPage(reply, 200, learnerPage(ctx(s), empty));
    const agent = agentParam(agentText);
    const reads = readView();
    const personRes = await xapiGet(resources.agents, actor(s), { agent }, reads);
    if (personRes.status !== 200) return sendPage(reply, personRes.status === 403 ? 403 : 400, learnerPage(ctx(s), { ...empty, error: detailOf(personRes) }));
    const r = await queryStatements(actor(s), { agent, related_agents: 'true' }, reads);
    if (r.ok) reply.header(CONSISTENT_THROUGH, r.result.through);
    const statements = r.ok ? r.result.statements : [];
    const profilesRes = await xapiGet(resources.agentProfile, actor(s), { agent });
    const profiles = profilesRes.status === 200 ? (JSON.parse(String(profilesRes.body)) as string[]) : detailOf(profilesRes);
    // State documents are kept per activity: those of the activities in the statements shown.
    const activities = [...new Set(statements.map((st) => (st.object as { objectType?: string; id?: string } | undefined)).filter((o) => o && (o.objectType ?? 'Activity') === 'Activity' && o.id).map((o) => o!.id!))].slice(0, 20);
    let states: { activityId: string; ids: string[] }[] | string = [];
    for (const activityId of activities) {
      const res = await xapiGet(resources.state, actor(s), { activityId, agent });
      if (res.status !== 200) {
        states = detailOf(res);
        break;
      }
      states.push({ activityId, ids: JSON.parse(String(res.body)) as string[] });
    }
    return sendPage(
      reply,
      200,
      learnerPage(ctx(s), {
        agentText,
        agent: JSON.parse(agent) as Record<string, unknown>,
        person: JSON.parse(String(personRes.body)) as Record<string, unknown>,
        statements,
        more: r.ok && r.result.more ? `/console/statements?${moreQuery(r.result.more)}` : '',
        profiles,
        states,
        ...(!r.ok && { error: r.detail }),
      }),
    );
  });

  const change: ConsoleKit['change'] = async (request, reply) => {
    const form = await readForm(request);
    const s = await jsonSession(request, reply);
    if (!s) return undefined;
    if (!sameOrigin(request) || !csrfMatches(s, (request.headers['x-csrf-token'] as string | undefined) ?? form.csrf)) {
      void sendJson(reply, 403, { detail: 'refused: this change does not carry the session’s CSRF token' });
      return undefined;
    }
    return { session: s, form };
  };
  const reseal = (request: FastifyRequest, reply: FastifyReply, s: Session) => {
    reply.header('set-cookie', cookie(SESSION_COOKIE, sealer.seal('session', s), { path: '/console', maxAge: (s.expires - now()) / 1000, secure: secure(request) }));
  };
  const kit: ConsoleKit = { deps: { store: deps.store, config, clock }, ctx, sendPage, sendJson, pageSession, change, reseal, workingStore, queryOf, safeNext };
  registerConsoleAdmin(app, kit);
  registerConsoleFailures(app, kit);
  registerConsoleOverview(app, kit);

  if (oidcEnabled) registerConsoleOidc(app, { config, auth, sealer, secure, safeNext, openSessionFor, sendPage, page: (error) => signInPage(ctx(), { error, oidc: true, basic: basicEnabled }) });
}
