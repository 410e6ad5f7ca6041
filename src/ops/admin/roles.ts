/**
 * Who acts in an admin action, and the rules every action applies before it acts: which store a
 * role reaches, what is the operator's alone, which scopes a role may give, which credentials it
 * may rotate or revoke; and the audit entry an action that changed something leaves. Every admin
 * action (./credentials.ts, ./rejections.ts, ./forwarding.ts, ./erasure.ts, ./reads.ts) is one
 * function `(ctx, actor, input)`: reach, grant, act, audit; the admin API, the console and the
 * CLI only translate their input and answers. Roles come from src/auth/scopes.ts (adminRole).
 */
import { hostname, userInfo } from 'node:os';
import { readCredentialsFile } from '../../auth/credentials.ts';
import { type AdminRole, adminRole } from '../../auth/scopes.ts';
import type { AuthUser } from '../../auth/types.ts';
import type { Clock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import type { ActorKind, AuditEntry, AuditRecord, ChangeAudit, Store } from '../../store/types.ts';
import { OpsError } from '../errors.ts';

/** What every admin action runs with: the store, the settings where it runs, and its clock. */
export interface AdminContext {
  store: Store;
  config: Config;
  /** What audit times, credential creation, expiry and rotation grace are measured by. */
  clock: Clock;
}

/** Who acts, with which role, from where: what an audit entry records of them (never a secret). */
export interface AdminActor {
  /** The user name, credential key or token subject; the OS user from the CLI. */
  name: string;
  role: AdminRole;
  /** The client's address (HTTP), or the host the CLI ran on. */
  client: string;
  via: 'http' | 'cli';
  /**
   * How it proved who it is: HTTP Basic (a credentials-file user, or the database credential
   * whose key is `name`), an OpenID Connect token, or as the OS user on a host that holds the
   * database's settings (the CLI).
   */
  signIn: 'basic' | 'token' | 'os';
}

/** The actor of an HTTP request (admin API, console): undefined when the user holds no admin scope. */
export function httpActor(user: AuthUser, client: string, signIn: 'basic' | 'token'): AdminActor | undefined {
  const role = adminRole(user);
  return role && { name: user.username, role, client, via: 'http', signIn };
}

/** The CLI's actor: the OS user on this host, an operator (it holds the database's settings). */
export function cliActor(): AdminActor {
  let name = '';
  try {
    name = userInfo().username;
  } catch {
    // No passwd entry for this uid (a container's arbitrary user): the entry says who by host only.
  }
  return { name, role: { kind: 'operator' }, client: hostname(), via: 'cli', signIn: 'os' };
}

/**
 * The store an action reaches: `asked` when the role may reach it, else a not_found, the answer a
 * store that holds nothing would get: a store administrator cannot tell other stores' existence
 * from their absence. Not named: the administrator's own store, the default store ('') for an operator.
 */
export function reachableStore(role: AdminRole, asked: string | undefined): string {
  if (role.kind === 'operator') return asked ?? '';
  if (asked === undefined || asked === role.target) return role.target;
  throw new OpsError(`no store ${JSON.stringify(asked)} here`, 'not_found');
}

/** The store a listing is of: an operator's `asked` (undefined: every store), a store administrator's own. */
export const listedStore = (role: AdminRole, asked: string | undefined): string | undefined => (role.kind === 'operator' ? asked : reachableStore(role, asked));

/** Refuses a store administrator (403): for actions on the server as a whole (status, forwarding). */
export function requireOperator(role: AdminRole, what: string): void {
  if (role.kind !== 'operator') throw new OpsError(`${what} is the operator's: it concerns every store (the admin scope, in the default store)`, 'forbidden');
}

/**
 * Refuses (403) scopes the role may not give: a store administrator may give the xAPI scopes and
 * `admin/store`, not `admin` (held in the default store, it makes an operator).
 */
export function checkGrantable(role: AdminRole, scopes: readonly string[]): void {
  if (role.kind === 'store' && scopes.includes('admin')) {
    throw new OpsError('scopes: a store administrator may not give the admin scope (it may give admin/store and the xAPI scopes)', 'forbidden');
  }
}

const ADMIN_SCOPES: ReadonlySet<string> = new Set(['admin', 'admin/store']);

/**
 * Whether the actor may rotate or revoke a database credential (docs/admin-api.md, "Who may rotate
 * or revoke whom"): an operator any; a store administrator, in its own store, one that holds no
 * admin scope, and the credential it signed in with (`own`). A fellow administrator's credential
 * is the operator's to rotate or revoke: else a store administrator could take its secret, act as
 * it, and have the audit name it.
 */
export function mayManageCredential(by: AdminActor, credential: { target: string; scopes: readonly string[] }, own: boolean): boolean {
  if (by.role.kind === 'operator') return true;
  if (credential.target !== by.role.target) return false;
  return own || !credential.scopes.some((s) => ADMIN_SCOPES.has(s));
}

/**
 * Which kind of name the actor is. A Basic name the credentials file has is that file's user (the
 * file's users keep their names: src/auth/basic.ts asks the database only for other names), any
 * other a database credential's key; unknown when the file cannot be read to tell.
 */
export function actorKindOf(ctx: AdminContext, by: AdminActor): ActorKind {
  if (by.signIn === 'token') return 'token-subject';
  if (by.signIn === 'os') return 'os-user';
  try {
    return readCredentialsFile(ctx.config.authFile).some((e) => e.username === by.name) ? 'file-user' : 'database-key';
  } catch {
    return 'unknown';
  }
}

/** The audit entry of an admin action: who (and what kind of name), from where, what, in which store, when. */
export function auditRecord(ctx: AdminContext, by: AdminActor, action: string, target: string | null, details: Record<string, unknown>): AuditRecord {
  const role = by.role.kind === 'operator' ? 'operator' : 'store';
  return { timeMs: ctx.clock.now(), actor: by.name, actorKind: actorKindOf(ctx, by), role, via: by.via, client: by.client, action, target, details };
}

/** The entry for a store change to write in its own transaction (ChangeAudit), what it came to under `details[outcome]`. */
export const changeAudit = (ctx: AdminContext, by: AdminActor, action: string, target: string | null, details: Record<string, unknown>, outcome?: string): ChangeAudit => ({
  ...auditRecord(ctx, by, action, target, details),
  ...(outcome !== undefined && { outcome }),
});

/** Records an admin action on its own: a long job's start and end (a change of one transaction takes its entry with it: changeAudit). */
export function recordAudit(ctx: AdminContext, by: AdminActor, action: string, target: string | null, details: Record<string, unknown>): Promise<AuditEntry> {
  return ctx.store.appendAudit(auditRecord(ctx, by, action, target, details));
}
