/**
 * Users and their credentials in the credentials file (LECTERN_AUTH_FILE, Ralph's format: see
 * src/auth/credentials.ts): the checks a new user passes, its bcrypt hash, and adding or
 * replacing its entry while every other entry stays byte for byte as it was.
 */
import { existsSync, readFileSync } from 'node:fs';
import bcrypt from 'bcrypt';
import { controlCharacter, type CredentialEntry, parseCredentials, upsertCredentialText, writeCredentialsText } from '../auth/credentials.ts';
import { isScope, SCOPES } from '../auth/scopes.ts';
import type { ValidationIssue } from '../errors.ts';
import type { Agent } from '../xapi/types.ts';
import { validateAgentParam } from '../xapi/validate.ts';
import { OpsError } from './errors.ts';

/** bcrypt hashes only the first 72 bytes of a password: a longer one would match any tail. */
export const MAX_PASSWORD_BYTES = 72;
/** bcrypt's cost: 2^12 rounds. */
const BCRYPT_ROUNDS = 12;

/** Refuses a username no client could sign in with. */
export function checkUsername(username: string): void {
  // HTTP Basic splits user and password at the first colon (RFC 7617 §2): such a user could never sign in.
  if (username.includes(':')) throw new OpsError(`the username ${JSON.stringify(username)} contains ":", which HTTP Basic authentication cannot carry in a username: choose one without it`);
  // RFC 7617 §2: "The user-id and password MUST NOT contain any control characters" (and a newline
  // in a name would also split the log lines and listings that show it).
  const control = controlCharacter(username);
  if (control) throw new OpsError(`the username ${JSON.stringify(username)} contains the control character ${control}, which HTTP Basic authentication does not allow: choose one without control characters`);
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
    throw new OpsError(`the password is ${bytes} bytes long (UTF-8); bcrypt uses only the first ${MAX_PASSWORD_BYTES}, so anything after them would not be checked: choose one of at most ${MAX_PASSWORD_BYTES} bytes`);
  }
}

export interface NewUser {
  username: string;
  password: string;
  scopes: string[];
  agent: Agent;
  /** The store (tenant) the user works in. */
  target?: string;
  /** How the user's statement writes are validated, "strict" or "lax" (absent: LECTERN_XAPI_VALIDATION). */
  validation?: string;
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

/** The credentials entry of a user, checked, its password hashed. */
export async function credentialEntry(user: NewUser): Promise<CredentialEntry> {
  checkUsername(user.username);
  if (user.scopes.length === 0) throw new OpsError(`give at least one scope, among: ${SCOPES.join(', ')}`);
  checkScopes(user.scopes);
  checkAgent(user.agent);
  checkPassword(user.password);
  const validation = checkValidation(user.validation);
  const hash = await bcrypt.hash(user.password, await bcrypt.genSalt(BCRYPT_ROUNDS, 'b'));
  return {
    username: user.username,
    hash,
    scopes: user.scopes,
    agent: user.agent,
    ...(user.target !== undefined && { target: user.target }),
    ...(validation !== undefined && { validation }),
  };
}

/** The credentials file's text, checked (CredentialsFileError when it is not valid); undefined when there is none. */
export function readCredentialsText(file: string): string | undefined {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  if (text !== undefined && text.trim() !== '') parseCredentials(text, file);
  return text;
}

/**
 * Adds the entry to the file, or replaces the entry of the same username; `text` is the file as
 * read (readCredentialsText), so that nothing happens to a file that was not valid. Atomic.
 */
export function saveCredentialEntry(file: string, text: string | undefined, entry: CredentialEntry): { replaced: boolean } {
  const next = upsertCredentialText(text, entry);
  writeCredentialsText(file, next.text);
  return { replaced: next.replaced };
}
