/**
 * The console's admin pages (docs/console.md): the operator's store switcher and the Access page
 * (credentials and the audit list). Each calls the src/ops/ use cases directly, with the same
 * reach checks and audit entries as the admin API (./admin.ts), as the session's user; every
 * change is a POST carrying the session's CSRF token (ConsoleKit.change).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { readCredentialsFile } from '../auth/credentials.ts';
import { adminRole, type AdminRole } from '../auth/scopes.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { LrsError, ValidationFailed } from '../errors.ts';
import { adminErase, type AdminActor, checkGrantable, credentialInReach, listAudit, listStores, reachableStore, recordAudit } from '../ops/admin.ts';
import { createCredential, type IssuedCredential, listCredentials, revokeCredential, rotateCredential } from '../ops/credentials.ts';
import { OpsError } from '../ops/errors.ts';
import type { Store } from '../store/types.ts';
import type { Agent } from '../xapi/types.ts';
import { validateAgentParam } from '../xapi/validate.ts';
import { accessPage, confirmationText, erasePage, GRANTABLE, issuedPage, storesPage } from './console-admin-views.ts';
import { errorPage, type PageContext } from './console/pages.ts';
import type { Session } from './console/session.ts';
import { agentParam } from './console/views.ts';

/**
 * What the admin pages share with the console's own routes (./console.ts): the session, the store
 * it works in, pages and forms.
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
}

/** The longest store name the switcher takes (a credential's target has at most as many). */
const MAX_STORE_NAME = 200;

/** Audit entries the Access page shows at once. */
const AUDIT_SHOWN = 50;

/** The session's admin role; without one, a 403 page (or JSON answer) and undefined. */
export function adminRoleOf(kit: ConsoleKit, reply: FastifyReply, s: Session, what: string, json = false): AdminRole | undefined {
  const role = adminRole(s.user);
  if (role) return role;
  const detail = `${what} needs the admin or admin/store scope, which ${s.user.username} does not hold`;
  void (json ? kit.sendJson(reply, 403, { detail }) : kit.sendPage(reply, 403, errorPage(kit.ctx(s), 'Not allowed', detail)));
  return undefined;
}

/** A refusal of a use case (OpsError and the like) as a page's status and message; anything else goes on (a 500). */
export function refusal(err: unknown): { status: number; message: string } {
  if (err instanceof LrsError) return { status: err.status, message: err.message };
  throw err;
}

/** Who acts, for the audit: the session's user, from the request's address, over HTTP. */
export const consoleActor = (request: FastifyRequest, s: Session, role: AdminRole): AdminActor => ({ name: s.user.username, role, client: request.ip, via: 'http' });

export function registerConsoleAdmin(app: FastifyInstance, kit: ConsoleKit): void {
  const { store, config, clock } = kit.deps;

  const roleOf = (reply: FastifyReply, s: Session, what: string, json = false) => adminRoleOf(kit, reply, s, what, json);

  // ----- stores and the switcher ------------------------------------------------------------

  app.get('/console/stores', async (request, reply) => {
    const s = await kit.pageSession(request, reply);
    if (!s) return reply;
    const role = roleOf(reply, s, 'The stores page');
    if (!role) return reply;
    const stores = await listStores(store, role);
    return kit.sendPage(reply, 200, storesPage(kit.ctx(s), { stores, operator: role.kind === 'operator', next: kit.queryOf(request).next }));
  });

  /**
   * The store switcher: an operator works in any store (its name as typed: one without data yet
   * too, to hand out its first credential); anyone else only in its own, and another store's name
   * is the 404 an absent store gets (reachableStore), the session unchanged.
   */
  app.post('/console/store', async (request, reply) => {
    const c = await kit.change(request, reply);
    if (!c) return reply;
    const role = roleOf(reply, c.session, 'Switching stores', true);
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
  });

  // ----- access: credentials and the audit list ---------------------------------------------

  const showAccess = async (request: FastifyRequest, reply: FastifyReply, s: Session, role: AdminRole, status = 200, error?: string) => {
    const target = kit.workingStore(s);
    const before = Number(kit.queryOf(request).before);
    const credentials = await listCredentials(store, { target }, { clock });
    const audit = await listAudit(store, role, { target, limit: AUDIT_SHOWN, ...(Number.isSafeInteger(before) && before > 0 && { before }) });
    return kit.sendPage(reply, status, accessPage(kit.ctx(s), { credentials, audit, more: audit.length === AUDIT_SHOWN ? `/console/access?before=${audit.at(-1)!.id}` : '', ...(error && { error }) }));
  };

  app.get('/console/access', async (request, reply) => {
    const s = await kit.pageSession(request, reply);
    if (!s) return reply;
    const role = roleOf(reply, s, 'The Access page');
    if (!role) return reply;
    return showAccess(request, reply, s, role);
  });

  /** A change on the Access page: the session, role and form; a refusal shows the page again with its message. */
  const accessChange = (path: string, act: (c: { request: FastifyRequest; session: Session; role: AdminRole; form: Record<string, string>; by: AdminActor }) => Promise<string | undefined>) =>
    app.post(path, async (request, reply) => {
      const c = await kit.change(request, reply);
      if (!c) return reply;
      const role = roleOf(reply, c.session, 'The Access page', true);
      if (!role) return reply;
      try {
        const page = await act({ request, session: c.session, role, form: c.form, by: consoleActor(request, c.session, role) });
        if (page !== undefined) return kit.sendPage(reply, 200, page);
        return reply.redirect('/console/access', 303);
      } catch (err) {
        const r = refusal(err);
        return showAccess(request, reply, c.session, role, r.status, r.message);
      }
    });

  accessChange('/console/access/create', async ({ session, role, form, by }) => {
    const target = reachableStore(role, kit.workingStore(session));
    const scopes = GRANTABLE.filter((sc) => form[`scope.${sc}`] === 'on');
    checkGrantable(role, scopes);
    const agentText = (form.agent ?? '').trim();
    if (!agentText) throw new OpsError('agent: give the credential’s agent (an email address, or an Agent as JSON): the authority of what it stores');
    let agent: Agent;
    try {
      agent = JSON.parse(agentParam(agentText)) as Agent;
    } catch {
      throw new OpsError('agent: an email address, or an Agent as JSON, e.g. {"mbox": "mailto:reports@example.com"}');
    }
    const opt = (name: string) => (form[name]?.trim() ? form[name].trim() : undefined);
    const issued = await createCredential(
      store,
      { scopes, agent, target, key: opt('key'), label: opt('label'), expires: opt('expires'), validation: opt('validation') },
      { fileUsers: readCredentialsFile(config.authFile).map((e) => e.username), clock },
    );
    await recordAudit(store, by, 'credentials.create', target, { key: issued.key, scopes: issued.scopes, label: issued.label, ...(issued.expires && { expires: issued.expires }), ...(issued.validation && { validation: issued.validation }) }, clock);
    return issuedPage(kit.ctx(session), issued, 'created');
  });

  /** The key of a revoke or rotate: one in the session's working store (another store's is a 404, as an unknown key). */
  const keyInStore = async (session: Session, role: AdminRole, key: string | undefined): Promise<string> => {
    if (!key) throw new OpsError('key: which credential?');
    await credentialInReach(store, role, key);
    const row = await store.getCredential(key);
    if (row?.target !== kit.workingStore(session)) throw new OpsError(`no credential has the key ${JSON.stringify(key)}`, 'not_found');
    return key;
  };

  accessChange('/console/access/revoke', async ({ session, role, form, by }) => {
    const key = await keyInStore(session, role, form.key);
    const info = await revokeCredential(store, key, { clock });
    await recordAudit(store, by, 'credentials.revoke', info.target, { key: info.key }, clock);
    return undefined;
  });

  accessChange('/console/access/rotate', async ({ session, role, form, by }) => {
    const key = await keyInStore(session, role, form.key);
    const graceText = (form.grace ?? '').trim() || '0';
    if (!/^\d{1,9}$/.test(graceText)) throw new OpsError('grace: a whole number of seconds');
    const grace = Number(graceText);
    const issued: IssuedCredential = await rotateCredential(store, key, { graceSeconds: grace }, { clock });
    await recordAudit(store, by, 'credentials.rotate', issued.target, { key: issued.key, grace }, clock);
    return issuedPage(kit.ctx(session), issued, 'rotated');
  });


  // ----- erasure (the Learner page) ---------------------------------------------------------

  /**
   * Erase or pseudonymize one person of the working store: without `run`, the dry run's figures and
   * the confirmation form; with it and the person's identifier typed, the erasure, recorded as the
   * admin API's (adminErase: the audit file's line and the audit log's entry).
   */
  app.post('/console/learner/erase', async (request, reply) => {
    const c = await kit.change(request, reply);
    if (!c) return reply;
    const role = roleOf(reply, c.session, 'Erasing a learner', true);
    if (!role) return reply;
    const { form, session } = c;
    const mode = form.mode === 'pseudonymize' ? 'pseudonymize' : 'erase';
    try {
      const tenant = reachableStore(role, kit.workingStore(session));
      let value: unknown;
      try {
        value = JSON.parse(form.agent ?? '');
      } catch {
        throw new OpsError('agent: the Agent to erase, as JSON');
      }
      const issues: ConstructorParameters<typeof ValidationFailed>[0] = [];
      const person = validateAgentParam(value, ['form', 'agent'], issues);
      if (issues.length || !person) throw new ValidationFailed(issues);
      if (mode === 'pseudonymize' && config.pseudonymizeKey === '') throw new OpsError('this server has no LECTERN_PSEUDONYMIZE_KEY: it cannot pseudonymize');
      const agent = value as Record<string, unknown>;
      const typed = confirmationText(agent);
      const confirmed = form.run === 'yes' && (form.confirm ?? '').trim() === typed && typed !== '';
      const pseudonymizeKey = mode === 'pseudonymize' ? config.pseudonymizeKey : undefined;
      const { report } = await adminErase(store, consoleActor(request, session, role), { tenant, person, dryRun: !confirmed, pseudonymizeKey, auditFile: config.auditFile }, clock);
      // A run asked for without the identifier typed: the dry run's figures again, with the reason.
      const error = form.run === 'yes' && !confirmed ? `Type ${typed} exactly to confirm.` : undefined;
      return kit.sendPage(reply, error ? 400 : 200, erasePage(kit.ctx(session), { agent, mode, report, ...(error && { error }) }));
    } catch (err) {
      const r = refusal(err);
      return kit.sendPage(reply, r.status, errorPage(kit.ctx(session), 'Erasure refused', r.message, 'learner'));
    }
  });
}
