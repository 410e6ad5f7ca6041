/**
 * The console's admin pages (docs/console.md): the operator's store switcher and the Access page
 * (credentials and the audit list), and erasure from the Learner page. Each translates its form
 * into the input of one admin action of src/ops/admin/ (the admin API's and the CLI's), run as the
 * session's user; every change is a POST carrying the session's CSRF token (ConsoleKit.change).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { adminRole, type AdminRole, type RouteScopes } from '../../auth/scopes.ts';
import { credentialKind } from '../../auth/basic.ts';
import { type AuthUser, TOKEN_STAMP } from '../../auth/types.ts';
import type { Clock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import { LrsError, ValidationFailed } from '../../errors.ts';
import { createCredential, listCredentials, listFileUsers, revokeCredential, rotateCredential } from '../../ops/admin/credentials.ts';
import { erase } from '../../ops/admin/erasure.ts';
import { listAudit, listStores } from '../../ops/admin/reads.ts';
import { type AdminActor, type AdminContext, httpActor, reachableStore } from '../../ops/admin/roles.ts';
import { OpsError } from '../../ops/errors.ts';
import type { Reader } from '../../ops/reads.ts';
import type { Store } from '../../store/types.ts';
import type { Agent } from '../../xapi/types.ts';
import { validateAgentParam } from '../../xapi/validate.ts';
import { accessPage, confirmationText, erasePage, GRANTABLE, issuedPage, notAllowedPage, revokePage, storesPage } from './admin-views.ts';
import { errorPage, type PageContext, storeName } from './pages.ts';
import type { Session } from './session.ts';
import { agentParam } from './views.ts';

/**
 * What the admin pages share with the console's own routes (./kit.ts, ConsoleDoor): the session,
 * the store it works in, pages and forms.
 */
export interface ConsoleKit {
  deps: { store: Store; config: Config; clock: Clock };
  ctx(session: Session): PageContext;
  sendPage(reply: FastifyReply, status: number, body: string): FastifyReply;
  sendJson(reply: FastifyReply, status: number, value: unknown): FastifyReply;
  /** A page's session, or undefined after a redirect to the sign-in page. */
  pageSession(request: FastifyRequest, reply: FastifyReply): Promise<Session | undefined>;
  /**
   * A change's session and form: undefined when refused (no session: 401; no CSRF token or a
   * foreign Origin: 403), the answer then sent.
   */
  change(request: FastifyRequest, reply: FastifyReply): Promise<{ session: Session; form: Record<string, string> } | undefined>;
  /** Sets the session cookie anew (a switched store), keeping its expiry and CSRF token. */
  reseal(request: FastifyRequest, reply: FastifyReply, session: Session): void;
  /** The store the session works in: an operator's chosen one, else the user's own. */
  workingStore(session: Session): string;
  queryOf(request: FastifyRequest): Record<string, string>;
  safeNext(next: string | undefined): string;
  /** The session's reader of a resource needing `scopes` (an LrsError 403 without them). */
  reader(session: Session, scopes: RouteScopes): Reader;
}

/** The longest store name the switcher takes (a credential's target has at most as many). */
const MAX_STORE_NAME = 200;

/** Audit entries the Access page shows at once. */
const AUDIT_SHOWN = 50;

/** What an admin page needs: an admin role (operator or store administrator), or the operator's. */
export type AdminNeed = 'admin' | 'operator';

/**
 * The scope that gives `user` what `need` asks: `admin` in the default store (the operator),
 * `admin/store` in another (its administrator); undefined when none can (a store's user never
 * becomes the operator).
 */
export function missingScope(user: AuthUser, need: AdminNeed): 'admin' | 'admin/store' | undefined {
  if (user.target === '') return 'admin';
  return need === 'operator' ? undefined : 'admin/store';
}

/**
 * The session's admin role when it has what `need` asks; without, a 403 page naming the scope
 * missing and the command that grants it (or a JSON answer naming the scope) and undefined.
 */
export function adminRoleOf(kit: ConsoleKit, reply: FastifyReply, s: Session, what: string, json = false, need: AdminNeed = 'admin'): AdminRole | undefined {
  const role = adminRole(s.user);
  if (role && (need === 'admin' || role.kind === 'operator')) return role;
  const scope = missingScope(s.user, need);
  const detail = scope
    ? `${what} needs the ${scope} scope, which ${s.user.username} does not hold`
    : `${what} is the operator’s (the admin scope, held by a user of the default store): ${s.user.username} works in the ${storeName(s.user.target)}`;
  void (json ? kit.sendJson(reply, 403, { detail }) : kit.sendPage(reply, 403, notAllowedPage(kit.ctx(s), { what, user: s.user, kind: credentialKind(s.stamp), scope, need })));
  return undefined;
}

/** A refusal of a use case (OpsError and the like) as a page's status and message; anything else goes on (a 500). */
export function refusal(err: unknown): { status: number; message: string } {
  if (err instanceof LrsError) return { status: err.status, message: err.message };
  throw err;
}

/** The session's admin actor (its user, from the request's address, over HTTP); without the role `need` asks, a 403 page (or JSON answer) and undefined. */
export function adminActorOf(
  kit: ConsoleKit,
  request: FastifyRequest,
  reply: FastifyReply,
  s: Session,
  what: string,
  json = false,
  need: AdminNeed = 'admin',
): AdminActor | undefined {
  if (!adminRoleOf(kit, reply, s, what, json, need)) return undefined;
  return httpActor(s.user, request.ip, s.stamp === TOKEN_STAMP ? 'token' : 'basic');
}

/** The admin actions' context of the console's server. */
export const adminContext = (kit: ConsoleKit): AdminContext => ({ store: kit.deps.store, config: kit.deps.config, clock: kit.deps.clock });

/** A route of the admin pages: it runs the admin actions in `ctx` as the session's user. */
export type AdminPageRoute = (kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;

/** Registers `routes`, each run with the console's kit and the admin actions' context. */
export function registerAdminPages(app: FastifyInstance, kit: ConsoleKit, routes: readonly [method: 'GET' | 'POST', path: string, route: AdminPageRoute][]): void {
  const ctx = adminContext(kit);
  for (const [method, url, route] of routes) app.route({ method, url, handler: (request, reply) => route(kit, ctx, request, reply) });
}

/** The stores page and its switcher, the Access page and its three changes, and erasure from the Learner page. */
export function registerConsoleAdmin(app: FastifyInstance, kit: ConsoleKit): void {
  registerAdminPages(app, kit, [
    ['GET', '/console/stores', storesRoute],
    ['POST', '/console/store', switchRoute],
    ['GET', '/console/access', accessRoute],
    ['POST', '/console/access/create', accessChange(createFromForm)],
    ['POST', '/console/access/revoke', accessChange(revokeFromForm)],
    ['POST', '/console/access/rotate', accessChange(rotateFromForm)],
    ['POST', '/console/learner/erase', eraseRoute],
  ]);
}

async function storesRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await kit.pageSession(request, reply);
  if (!s) return reply;
  const by = adminActorOf(kit, request, reply, s, 'The stores page');
  if (!by) return reply;
  const stores = await listStores(ctx, by);
  return kit.sendPage(reply, 200, storesPage(kit.ctx(s), { stores, operator: by.role.kind === 'operator', next: kit.queryOf(request).next }));
}

/**
 * The store switcher: an operator works in any store (its name as typed: one without data yet
 * too, to hand out its first credential); anyone else only in its own, and another store's name
 * is the 404 an absent store gets (reachableStore), the session unchanged.
 */
async function switchRoute(kit: ConsoleKit, _ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const c = await kit.change(request, reply);
  if (!c) return reply;
  const role = adminRoleOf(kit, reply, c.session, 'Switching stores', true);
  if (!role) return reply;
  let target: string;
  try {
    const asked = (c.form.store ?? '').trim();
    if (asked.length > MAX_STORE_NAME) throw new OpsError(`store: at most ${MAX_STORE_NAME} characters`);
    target = reachableStore(role, asked);
  } catch (err) {
    const r = refusal(err);
    return kit.sendPage(reply, r.status, errorPage(kit.ctx(c.session), 'No such store', r.message, 'stores'));
  }
  if (role.kind === 'operator') kit.reseal(request, reply, { ...c.session, store: target });
  return reply.redirect(kit.safeNext(c.form.next), 303);
}

/** A change on the Access page, in the store the session works in: the page it answers, or undefined for the Access page again. */
type AccessChange = (ctx: AdminContext, c: { kit: ConsoleKit; session: Session; form: Record<string, string>; by: AdminActor; target: string }) => Promise<string | undefined>;

const createFromForm: AccessChange = async (ctx, { kit, session, form, by, target }) => {
  const scopes = GRANTABLE.filter((sc) => form[`scope.${sc}`] === 'on');
  const agentText = (form.agent ?? '').trim();
  if (!agentText) throw new OpsError('agent: give the credential’s agent (an email address, or an Agent as JSON): the authority of what it stores');
  let agent: Agent;
  try {
    agent = JSON.parse(agentParam(agentText)) as Agent;
  } catch {
    throw new OpsError('agent: an email address, or an Agent as JSON, e.g. {"mbox": "mailto:reports@example.com"}');
  }
  const opt = (name: string) => (form[name]?.trim() ? form[name].trim() : undefined);
  const issued = await createCredential(ctx, by, { scopes, agent, target, key: opt('key'), label: opt('label'), expires: opt('expires'), validation: opt('validation') });
  return issuedPage(kit.ctx(session), issued, 'created');
};

/** The key of a revoke or rotate form. */
const keyOf = (form: Record<string, string>): string => {
  if (!form.key) throw new OpsError('key: which credential?');
  return form.key;
};

/**
 * Revoking asks first: the row's button answers the confirmation page (nothing changed), whose
 * form carries `confirm=yes`. A key of another store than the one the session works in is
 * unknown (404), as is one the actor may not manage, on either step.
 */
const revokeFromForm: AccessChange = async (ctx, { kit, session, form, by, target }) => {
  const key = keyOf(form);
  if (form.confirm !== 'yes') {
    const { credentials, manageable } = await listCredentials(ctx, by, { target });
    const credential = credentials.find((c) => c.key === key && manageable.has(key));
    if (!credential) throw new OpsError(`no credential has the key ${JSON.stringify(key)}`, 'not_found');
    return revokePage(kit.ctx(session), credential);
  }
  await revokeCredential(ctx, by, { key, target });
  return undefined;
};

const rotateFromForm: AccessChange = async (ctx, { kit, session, form, by, target }) => {
  const key = keyOf(form);
  const graceText = (form.grace ?? '').trim() || '0';
  if (!/^\d{1,9}$/.test(graceText)) throw new OpsError('grace: a whole number of seconds');
  const issued = await rotateCredential(ctx, by, { key, target, graceSeconds: Number(graceText) });
  return issuedPage(kit.ctx(session), issued, 'rotated');
};

/** The Access page of the working store (credentials, with the forms the actor may use, and the audit list); after a refused change, with its status and message. */
async function showAccess(
  kit: ConsoleKit,
  ctx: AdminContext,
  request: FastifyRequest,
  reply: FastifyReply,
  s: Session,
  by: AdminActor,
  refused?: { status: number; message: string },
): Promise<FastifyReply> {
  const target = kit.workingStore(s);
  const before = Number(kit.queryOf(request).before);
  const { credentials, manageable } = await listCredentials(ctx, by, { target });
  const fileUsers = listFileUsers(ctx, by, { target });
  const audit = await listAudit(ctx, by, { target, limit: AUDIT_SHOWN, ...(Number.isSafeInteger(before) && before > 0 && { before }) });
  const more = audit.length === AUDIT_SHOWN ? `/console/access?before=${audit.at(-1)!.id}` : '';
  return kit.sendPage(reply, refused?.status ?? 200, accessPage(kit.ctx(s), { credentials, manageable, fileUsers, audit, more, ...(refused && { error: refused.message }) }));
}

async function accessRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await kit.pageSession(request, reply);
  if (!s) return reply;
  const by = adminActorOf(kit, request, reply, s, 'The Access page');
  if (!by) return reply;
  return showAccess(kit, ctx, request, reply, s, by);
}

/** The route of a change on the Access page: its page, or the Access page again (with the message of a refused change). */
const accessChange =
  (act: AccessChange): AdminPageRoute =>
  async (kit, ctx, request, reply) => {
    const c = await kit.change(request, reply);
    if (!c) return reply;
    const by = adminActorOf(kit, request, reply, c.session, 'The Access page', true);
    if (!by) return reply;
    try {
      const page = await act(ctx, { kit, session: c.session, form: c.form, by, target: kit.workingStore(c.session) });
      if (page !== undefined) return kit.sendPage(reply, 200, page);
      return reply.redirect('/console/access', 303);
    } catch (err) {
      return showAccess(kit, ctx, request, reply, c.session, by, refusal(err));
    }
  };

/**
 * Erase or pseudonymize one person of the working store (the Learner page): without `run`, the
 * dry run's figures and the confirmation form; with it and the person's identifier typed, the
 * erasure, recorded as the admin API's and the CLI's (the audit file's line and the audit log's entry).
 */
async function eraseRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const c = await kit.change(request, reply);
  if (!c) return reply;
  const by = adminActorOf(kit, request, reply, c.session, 'Erasing a learner', true);
  if (!by) return reply;
  const { form, session } = c;
  const mode = form.mode === 'pseudonymize' ? 'pseudonymize' : 'erase';
  try {
    let value: unknown;
    try {
      value = JSON.parse(form.agent ?? '');
    } catch {
      throw new OpsError('agent: the Agent to erase, as JSON');
    }
    const issues: ConstructorParameters<typeof ValidationFailed>[0] = [];
    const person = validateAgentParam(value, ['form', 'agent'], issues);
    if (issues.length || !person) throw new ValidationFailed(issues);
    const agent = value as Record<string, unknown>;
    const typed = confirmationText(agent);
    const confirmed = form.run === 'yes' && (form.confirm ?? '').trim() === typed && typed !== '';
    const { report } = await erase(ctx, by, { target: kit.workingStore(session), person, dryRun: !confirmed, pseudonymize: mode === 'pseudonymize' });
    // A run asked for without the identifier typed: the dry run's figures again, with the reason.
    const error = form.run === 'yes' && !confirmed ? `Type ${typed} exactly to confirm.` : undefined;
    return kit.sendPage(reply, error ? 400 : 200, erasePage(kit.ctx(session), { agent, mode, report, ...(error && { error }) }));
  } catch (err) {
    const r = refusal(err);
    return kit.sendPage(reply, r.status, errorPage(kit.ctx(session), 'Erasure refused', r.message, 'learner'));
  }
}
