/**
 * The admin actions on database credentials (docs/admin-api.md): list, create, revoke, rotate;
 * and the credentials file's users listed beside them (read-only: `lectern auth` writes the file).
 * Each reaches the store, checks the grant (which scopes may be given; which credentials the actor
 * may rotate or revoke: ./roles.ts, mayManageCredential), acts through the records of
 * ../credentials.ts (which hold the fields' rules) and audits what changed, never a secret, in
 * the change's own transaction.
 */
import { CredentialsFileError, readCredentialsFile } from '../../auth/credentials.ts';
import type { CredentialRow } from '../../store/types.ts';
import type { Agent } from '../../xapi/types.ts';
import * as records from '../credentials.ts';
import type { CredentialInfo, IssuedCredential, NewCredential } from '../credentials.ts';
import { OpsError } from '../errors.ts';
import { type AdminActor, type AdminContext, changeAudit, checkGrantable, listedStore, mayManageCredential, reachableStore } from './roles.ts';

export type { CredentialInfo, IssuedCredential, NewCredential };

/** The credentials file's user names: a key may not be one, and a Basic user of that name is the file's. */
const fileUsers = (ctx: AdminContext): Set<string> => new Set(readCredentialsFile(ctx.config.authFile).map((e) => e.username));

/** Whether the actor signed in with the database credential `key`: Basic, under that name, which the file does not have. */
const signedInWith = (by: AdminActor, key: string, file: () => Set<string>): boolean => by.signIn === 'basic' && by.name === key && !file().has(key);

export interface CredentialListing {
  credentials: CredentialInfo[];
  /** The keys among them the actor may rotate or revoke. */
  manageable: ReadonlySet<string>;
}

/** The credentials the actor sees: an operator every store's (or `target`'s), a store administrator its own store's. */
export async function listCredentials(ctx: AdminContext, by: AdminActor, input: { target?: string } = {}): Promise<CredentialListing> {
  const credentials = await records.listCredentials(ctx.store, { target: listedStore(by.role, input.target) }, { clock: ctx.clock });
  let file: Set<string> | undefined;
  const files = () => (file ??= fileUsers(ctx));
  const manageable = new Set(credentials.filter((c) => mayManageCredential(by, c, signedInWith(by, c.key, files))).map((c) => c.key));
  return { credentials, manageable };
}

/** A user of the credentials file (LECTERN_AUTH_FILE) as listed: never its hash. */
export interface FileUser {
  username: string;
  scopes: string[];
  agent: Agent;
  /** The store it works in ('' for the default store). */
  target: string;
  validation?: 'strict' | 'lax';
}

/**
 * The credentials file's users the actor sees, by name: an operator every store's (or
 * `target`'s), a store administrator its own store's; the file as it is now (re-read), or its
 * problem when it cannot be read.
 */
export function listFileUsers(ctx: AdminContext, by: AdminActor, input: { target?: string } = {}): { users: FileUser[] } | { problem: string } {
  const target = listedStore(by.role, input.target);
  let entries: ReturnType<typeof readCredentialsFile>;
  try {
    entries = readCredentialsFile(ctx.config.authFile);
  } catch (err) {
    if (err instanceof CredentialsFileError) return { problem: err.message };
    throw err;
  }
  const users = entries
    .filter((e) => target === undefined || (e.target ?? '') === target)
    .map((e): FileUser => ({ username: e.username, scopes: e.scopes, agent: e.agent, target: e.target ?? '', ...(e.validation && { validation: e.validation }) }));
  return { users: users.sort((a, b) => (a.username < b.username ? -1 : a.username > b.username ? 1 : 0)) };
}

/**
 * Creates a credential in the store the actor reaches (`target`: an operator's choice, else its
 * own); its secret is in the answer only. A refused create writes nothing and is not audited.
 */
export async function createCredential(ctx: AdminContext, by: AdminActor, input: NewCredential): Promise<IssuedCredential> {
  const target = reachableStore(by.role, input.target);
  checkGrantable(by.role, input.scopes);
  const audit = ({ key, scopes, label, expires, validation }: CredentialInfo) =>
    changeAudit(ctx, by, 'credentials.create', target, { key, scopes, label, ...(expires && { expires }), ...(validation && { validation }) });
  return records.createCredential(ctx.store, { ...input, target }, { fileUsers: fileUsers(ctx), clock: ctx.clock, audit });
}

/** Which credential: its key, and optionally the store the caller works in (a key of another store is then unknown). */
export interface CredentialKey {
  key: string;
  target?: string;
}

/**
 * The credential the actor may rotate or revoke; any other is the 404 an unknown key gets, so
 * that a store administrator learns nothing of other stores' keys nor of its fellows' grants.
 */
async function manageable(ctx: AdminContext, by: AdminActor, which: CredentialKey): Promise<CredentialRow> {
  const row = await ctx.store.getCredential(which.key);
  const inStore = row !== undefined && (which.target === undefined || row.target === reachableStore(by.role, which.target));
  if (
    !row ||
    !inStore ||
    !mayManageCredential(
      by,
      row,
      signedInWith(by, row.key, () => fileUsers(ctx)),
    )
  ) {
    throw new OpsError(`no credential has the key ${JSON.stringify(which.key)}`, 'not_found');
  }
  return row;
}

/** Revokes a credential (again: no change); every server refuses it within its refresh interval. */
export async function revokeCredential(ctx: AdminContext, by: AdminActor, which: CredentialKey): Promise<CredentialInfo> {
  await manageable(ctx, by, which);
  const audit = (c: CredentialInfo) => changeAudit(ctx, by, 'credentials.revoke', c.target, { key: c.key });
  return records.revokeCredential(ctx.store, which.key, { clock: ctx.clock, audit });
}

/** Gives a credential a new secret (returned once); with a grace, the old one works that many seconds more. */
export async function rotateCredential(ctx: AdminContext, by: AdminActor, which: CredentialKey & { graceSeconds?: number }): Promise<IssuedCredential> {
  await manageable(ctx, by, which);
  const audit = (c: CredentialInfo) => changeAudit(ctx, by, 'credentials.rotate', c.target, { key: c.key, grace: which.graceSeconds ?? 0 });
  return records.rotateCredential(ctx.store, which.key, { graceSeconds: which.graceSeconds }, { clock: ctx.clock, audit });
}
