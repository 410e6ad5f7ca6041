/**
 * Credentials: the rules of their fields, written once for both kinds (the credentials file's
 * users, ./users.ts, and the database's), and the database credentials' records: key and secret
 * pairs with scopes, a target, an authority agent and a validation choice, used as HTTP Basic
 * users beside the credentials file's (src/auth/database.ts checks them). A secret is generated
 * here, returned once (create, rotate) and stored only as its SHA-256. The admin actions over
 * them (reach, grant, audit) are ./admin/credentials.ts, whose entry each change writes in its
 * own transaction (CredentialOptions.audit).
 */
import { randomBytes } from 'node:crypto';
import { hashSecret } from '../auth/database.ts';
import { controlCharacter } from '../auth/credentials.ts';
import { isScope, SCOPES } from '../auth/scopes.ts';
import { type Clock, systemClock } from '../clock.ts';
import { LrsError, type ValidationIssue } from '../errors.ts';
import type { ChangeAudit, CredentialRow, CredentialStore } from '../store/types.ts';
import type { Agent } from '../xapi/types.ts';
import { givenTimeError, parseGivenTime, validateAgentParam } from '../xapi/validate.ts';
import { OpsError } from './errors.ts';

// ----- the fields' rules -----------------------------------------------------------------------

/** bcrypt hashes only the first 72 bytes of a password: a longer one would match any tail. */
export const MAX_PASSWORD_BYTES = 72;

/** Refuses a username (or key) no client could sign in with. */
export function checkUsername(username: string): void {
  // HTTP Basic splits user and password at the first colon (RFC 7617 §2): such a user could never sign in.
  if (username.includes(':'))
    throw new OpsError(`the username ${JSON.stringify(username)} contains ":", which HTTP Basic authentication cannot carry in a username: choose one without it`);
  // RFC 7617 §2: "The user-id and password MUST NOT contain any control characters" (and a newline
  // in a name would also split the log lines and listings that show it).
  const control = controlCharacter(username);
  if (control)
    throw new OpsError(
      `the username ${JSON.stringify(username)} contains the control character ${control}, which HTTP Basic authentication does not allow: choose one without control characters`,
    );
}

/** Refuses unknown scope names. */
export function checkScopes(scopes: readonly string[]): void {
  const bad = scopes.filter((s) => !isScope(s));
  if (bad.length) throw new OpsError(`unknown scope ${bad.map((s) => JSON.stringify(s)).join(', ')}: scopes are ${SCOPES.join(', ')}`);
}

/** Refuses an agent the credentials file could not hold (validated as the `agent` parameter is). */
export function checkAgent(agent: Agent): void {
  const issues: ValidationIssue[] = [];
  validateAgentParam(agent, ['agent'], issues);
  if (issues.length) throw new OpsError(`invalid agent: ${issues.map((i) => `${i.loc.slice(1).join('.') || 'agent'}: ${i.msg}`).join('; ')}`);
}

/** Refuses a password HTTP Basic cannot carry or bcrypt would not check in full. */
export function checkPassword(password: string): void {
  if (password === '') throw new OpsError('the password cannot be empty');
  const control = controlCharacter(password);
  if (control) throw new OpsError(`the password contains the control character ${control}, which HTTP Basic authentication does not allow: choose one without control characters`);
  const bytes = Buffer.byteLength(password, 'utf8');
  if (bytes > MAX_PASSWORD_BYTES) {
    throw new OpsError(
      `the password is ${bytes} bytes long (UTF-8); bcrypt uses only the first ${MAX_PASSWORD_BYTES}, so anything after them would not be checked: choose one of at most ${MAX_PASSWORD_BYTES} bytes`,
    );
  }
}

/**
 * A user's or credential's validation mode (docs/validation.md): strict, lax, or none (the
 * server's); anything else is refused. The one check of the credentials file's users and the
 * database credentials alike.
 */
export function checkValidation(validation: string | undefined): 'strict' | 'lax' | undefined {
  if (validation === undefined || validation === 'strict' || validation === 'lax') return validation;
  throw new OpsError(`validation must be strict or lax, got ${JSON.stringify(validation)}`);
}

/** The longest key and target (a store's name), and the longest label. */
const MAX_KEY = 200;
const MAX_LABEL = 200;
/** A rotation's grace at most: 30 days. */
export const MAX_GRACE_SECONDS = 30 * 86_400;

/** When a credential stops working, as every time an operator gives (GIVEN_TIME); OpsError naming `expires` otherwise. */
export function parseExpires(text: string, nowMs: number): number {
  const ms = parseGivenTime(text.trim());
  if (ms === undefined) throw new OpsError(givenTimeError('expires', text));
  if (ms <= nowMs) throw new OpsError(`expires: ${JSON.stringify(text)} is in the past`);
  return ms;
}

/** A rotation's grace: a whole number of seconds from 0 (the old secret stops at once) to 30 days. */
export function checkGrace(seconds: number | undefined): number {
  const grace = seconds ?? 0;
  if (!Number.isInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS) {
    throw new OpsError(`grace: a whole number of seconds from 0 to ${MAX_GRACE_SECONDS} (30 days)`);
  }
  return grace;
}

function checkText(field: string, value: string, max: number): void {
  if (value.length > max) throw new OpsError(`${field}: at most ${max} characters`);
  const control = controlCharacter(value);
  if (control) throw new OpsError(`${field}: contains the control character ${control}`);
}

// ----- the database's records ----------------------------------------------------------------

/** Random bytes of a secret: 256 bits, 43 base64url characters. */
const SECRET_BYTES = 32;
/** Random bytes of a generated key (after its `lk_` prefix): 96 bits, not secret, only unique. */
const KEY_BYTES = 12;

export interface NewCredential {
  scopes: string[];
  agent: Agent;
  /** The store (tenant) it works in; default: the default store. */
  target?: string;
  /** When it stops working: a date (that day's start in UTC) or a date-time with its offset (GIVEN_TIME). */
  expires?: string;
  label?: string;
  /** `strict` or `lax`; default: the server's. */
  validation?: string;
  /** A key of the caller's choosing (a readable name); default: generated. */
  key?: string;
}

export interface CredentialOptions {
  clock?: Clock;
  /** The credentials file's user names: a key may not be one of them. */
  fileUsers?: Iterable<string>;
  signal?: AbortSignal;
  /**
   * The admin action's audit entry, made from the credential as it will be (create) or as it is
   * (revoke, rotate), and written in the change's own transaction: both or neither.
   */
  audit?: (credential: CredentialInfo) => ChangeAudit;
}

/** A credential as shown: never its secret, nor the secret's hash. */
export interface CredentialInfo {
  key: string;
  label: string;
  scopes: string[];
  target: string;
  agent: Agent;
  validation?: 'strict' | 'lax';
  created: string;
  expires?: string;
  /** Coarse: recorded at most once a minute per key and server process. */
  lastUsed?: string;
  revoked?: string;
  /** After a rotation with a grace: until when the secret before it still works. */
  previousSecretUntil?: string;
}

/** What create and rotate return: the secret, shown this once. */
export type IssuedCredential = CredentialInfo & { secret: string };

const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

export function credentialInfo(row: CredentialRow, nowMs = Date.now()): CredentialInfo {
  const info: CredentialInfo = { key: row.key, label: row.label, scopes: row.scopes, target: row.target, agent: row.agent, created: iso(row.createdMs)! };
  if (row.validation) info.validation = row.validation;
  const optional = {
    expires: iso(row.expiresMs),
    lastUsed: iso(row.lastUsedMs),
    revoked: iso(row.revokedMs),
    previousSecretUntil: row.previousHash !== undefined && row.previousUntilMs !== undefined && row.previousUntilMs > nowMs ? iso(row.previousUntilMs) : undefined,
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) (info as unknown as Record<string, string>)[k] = v;
  return info;
}

const newSecret = (): string => randomBytes(SECRET_BYTES).toString('base64url');

/** Creates a credential; its secret is in the answer and nowhere else. Nothing is written when it is refused. */
export async function createCredential(store: CredentialStore, input: NewCredential, opts: CredentialOptions = {}): Promise<IssuedCredential> {
  opts.signal?.throwIfAborted();
  const now = (opts.clock ?? systemClock).now();
  if (!Array.isArray(input.scopes) || input.scopes.length === 0) throw new OpsError('scopes: give at least one scope');
  checkScopes(input.scopes);
  checkAgent(input.agent);
  const target = input.target ?? '';
  checkText('target', target, MAX_KEY);
  const label = input.label ?? '';
  checkText('label', label, MAX_LABEL);
  const validation = checkValidation(input.validation);
  const expiresMs = input.expires === undefined ? undefined : parseExpires(input.expires, now);
  const key = input.key ?? `lk_${randomBytes(KEY_BYTES).toString('base64url')}`;
  if (key === '') throw new OpsError('key: cannot be empty');
  checkText('key', key, MAX_KEY);
  checkUsername(key);
  if (new Set(opts.fileUsers ?? []).has(key)) {
    throw new OpsError(`key: ${JSON.stringify(key)} is the name of a user of the credentials file: choose another key`, 'conflict');
  }
  const secret = newSecret();
  const row: CredentialRow = { key, secretHash: hashSecret(secret), label, scopes: [...input.scopes], target, agent: input.agent, createdMs: now };
  if (validation) row.validation = validation;
  if (expiresMs !== undefined) row.expiresMs = expiresMs;
  try {
    await store.createCredential(row, opts.audit?.(credentialInfo(row, now)));
  } catch (err) {
    // The key exists (rolled back: nothing written): the caller's to change.
    if (err instanceof LrsError && err.kind === 'conflict') throw new OpsError(`key: ${err.message}`, 'conflict');
    throw err;
  }
  return { ...credentialInfo(row, now), secret };
}

/** Every credential (of one target), in key order: no secret, no hash. */
export async function listCredentials(store: CredentialStore, filter: { target?: string } = {}, opts: CredentialOptions = {}): Promise<CredentialInfo[]> {
  opts.signal?.throwIfAborted();
  const now = (opts.clock ?? systemClock).now();
  return (await store.listCredentials(filter.target)).map((r) => credentialInfo(r, now));
}

async function existing(store: CredentialStore, key: string): Promise<CredentialRow> {
  const row = await store.getCredential(key);
  if (!row) throw new OpsError(`no credential has the key ${JSON.stringify(key)}`, 'not_found');
  return row;
}

/** Revokes a credential (again: no change); every server refuses it within its refresh interval. */
export async function revokeCredential(store: CredentialStore, key: string, opts: CredentialOptions = {}): Promise<CredentialInfo> {
  opts.signal?.throwIfAborted();
  const now = (opts.clock ?? systemClock).now();
  const audit = opts.audit?.(credentialInfo(await existing(store, key), now));
  if (!(await store.revokeCredential(key, now, audit))) throw new OpsError(`no credential has the key ${JSON.stringify(key)}`, 'not_found');
  return credentialInfo(await existing(store, key), now);
}

/**
 * Gives a credential a new secret (returned once). With a grace, the secret it had keeps working
 * for that many seconds (an earlier rotation's grace ends now); without one, it stops at once.
 */
export async function rotateCredential(store: CredentialStore, key: string, rotation: { graceSeconds?: number } = {}, opts: CredentialOptions = {}): Promise<IssuedCredential> {
  opts.signal?.throwIfAborted();
  const grace = checkGrace(rotation.graceSeconds);
  const now = (opts.clock ?? systemClock).now();
  const before = await existing(store, key);
  const revoked = () => new OpsError(`the credential ${JSON.stringify(key)} is revoked: create a new one`, 'conflict');
  if (before.revokedMs !== undefined) throw revoked();
  const secret = newSecret();
  const audit = opts.audit?.(credentialInfo(before, now));
  if (!(await store.rotateCredential(key, hashSecret(secret), grace > 0 ? now + grace * 1000 : undefined, audit))) throw revoked();
  return { ...credentialInfo(await existing(store, key), now), secret };
}
