/**
 * Users and their credentials in the credentials file (LECTERN_AUTH_FILE, Ralph's format: see
 * src/auth/credentials.ts): a new user checked (the fields' rules are ./credentials.ts's), its
 * bcrypt hash, and adding or replacing its entry while every other entry stays byte for byte as
 * it was.
 */
import { existsSync, readFileSync } from 'node:fs';
import bcrypt from 'bcrypt';
import { type CredentialEntry, parseCredentials, upsertCredentialText, writeCredentialsText } from '../auth/credentials.ts';
import { SCOPES } from '../auth/scopes.ts';
import type { Agent } from '../xapi/types.ts';
import { checkAgent, checkPassword, checkScopes, checkUsername, checkValidation } from './credentials.ts';
import { OpsError } from './errors.ts';

/** bcrypt's cost: 2^12 rounds. */
const BCRYPT_ROUNDS = 12;

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
