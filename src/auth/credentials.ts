/**
 * The credentials file: a JSON list of `{username, hash, scopes, agent, target?}` exactly as Ralph
 * writes it. Reading is lenient where Ralph is (nulls for absent optional fields); anything else
 * malformed makes the whole file invalid, with a message saying where.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { ValidationIssue } from '../errors.ts';
import type { Agent } from '../xapi/types.ts';
import { validateAgentParam } from '../xapi/validate.ts';
import { isScope } from './scopes.ts';

export interface CredentialEntry {
  username: string;
  hash: string;
  scopes: string[];
  agent: Agent;
  target?: string | null;
  /** How the user's statement writes are validated (docs/validation.md); absent: LECTERN_XAPI_VALIDATION. */
  validation?: 'strict' | 'lax';
}

export class CredentialsFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CredentialsFileError';
  }
}

/** Drops nulls Ralph/pydantic write for absent optional agent fields. */
function cleanAgent(agent: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(agent)) if (v !== null) out[k] = v;
  return out;
}

/** The first control character of `text` (C0, DEL or C1) as `U+XXXX`, or undefined: RFC 7617 §2 forbids them in Basic credentials. */
export function controlCharacter(text: string): string | undefined {
  const c = /\p{Cc}/u.exec(text)?.[0];
  return c === undefined ? undefined : `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * Parses and checks the file's text; throws CredentialsFileError naming the bad entry. An entry
 * that is valid but can never sign in (a username with ":", which HTTP Basic cannot carry) or
 * should not (one with a control character, which RFC 7617 forbids) is kept, as Ralph keeps it,
 * and told to `warn` naming the entry: one unusable user must not lock out every other one.
 */
export function parseCredentials(text: string, source: string, warn?: (message: string) => void): CredentialEntry[] {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new CredentialsFileError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(data)) throw new CredentialsFileError(`${source} must hold a JSON list of users`);
  const seen = new Set<string>();
  return data.map((e: unknown, i) => {
    const where = `${source}: entry ${i}`;
    if (typeof e !== 'object' || e === null || Array.isArray(e)) throw new CredentialsFileError(`${where} is not an object`);
    const o = e as Record<string, unknown>;
    if (typeof o.username !== 'string' || o.username === '') throw new CredentialsFileError(`${where} has no username`);
    if (seen.has(o.username)) throw new CredentialsFileError(`${where} repeats the username ${JSON.stringify(o.username)}`);
    seen.add(o.username);
    if (o.username.includes(':'))
      warn?.(
        `${where} (${JSON.stringify(o.username)}): the username contains ":", which HTTP Basic authentication cannot carry in a username: this user can never sign in with Basic`,
      );
    const control = controlCharacter(o.username);
    if (control)
      warn?.(
        `${where} (${JSON.stringify(o.username)}): the username contains the control character ${control}, which HTTP Basic authentication does not allow (RFC 7617): clients may refuse to send it`,
      );
    if (typeof o.hash !== 'string' || !/^\$2[aby]\$\d\d\$/.test(o.hash)) throw new CredentialsFileError(`${where} (${o.username}) has no bcrypt hash`);
    if (!Array.isArray(o.scopes) || !o.scopes.every((s) => typeof s === 'string' && isScope(s))) {
      throw new CredentialsFileError(`${where} (${o.username}) has scopes that are not a list of known scope names`);
    }
    if (typeof o.agent !== 'object' || o.agent === null || Array.isArray(o.agent)) {
      throw new CredentialsFileError(`${where} (${o.username}) has no agent`);
    }
    const agent = cleanAgent(o.agent as Record<string, unknown>);
    const issues: ValidationIssue[] = [];
    validateAgentParam(agent, ['agent'], issues);
    if (issues.length) throw new CredentialsFileError(`${where} (${o.username}) has an invalid agent: ${issues.map((x) => x.msg).join('; ')}`);
    if (o.target !== undefined && o.target !== null && typeof o.target !== 'string') {
      throw new CredentialsFileError(`${where} (${o.username}) has a target that is not a string`);
    }
    if (o.validation !== undefined && o.validation !== null && o.validation !== 'strict' && o.validation !== 'lax') {
      throw new CredentialsFileError(`${where} (${o.username}) has a validation that is neither "strict" nor "lax"`);
    }
    const entry: CredentialEntry = {
      username: o.username,
      hash: o.hash,
      scopes: o.scopes as string[],
      agent: agent as Agent,
      target: (o.target as string | null | undefined) ?? null,
    };
    if (o.validation === 'strict' || o.validation === 'lax') entry.validation = o.validation;
    return entry;
  });
}

export function readCredentialsFile(path: string, warn?: (message: string) => void): CredentialEntry[] {
  return existsSync(path) ? parseCredentials(readFileSync(path, 'utf8'), path, warn) : [];
}

/**
 * The text spans [start, end) of the top-level array's elements in a JSON text already known to
 * be a valid array, and the offset of its closing bracket.
 */
function elementSpans(text: string): { spans: [number, number][]; close: number } {
  const spans: [number, number][] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    if (c === '[' || c === '{') {
      depth++;
      if (depth === 1) continue;
    } else if (c === ']' || c === '}') {
      depth--;
      if (depth === 0) {
        if (start >= 0) spans.push([start, lastNonSpace(text, i)]);
        return { spans, close: i };
      }
    }
    if (depth === 1 && c === ',') {
      spans.push([start, lastNonSpace(text, i)]);
      start = -1;
    } else if (depth >= 1 && start < 0 && !/\s/.test(c)) {
      start = i;
    }
  }
  throw new CredentialsFileError('the credentials file is not a JSON list');
}

/** One past the last non-space character before `i`. */
function lastNonSpace(text: string, i: number): number {
  let j = i;
  while (j > 0 && /\s/.test(text[j - 1])) j--;
  return j;
}

/**
 * Adds or replaces the entry of `entry.username` in the file's text, leaving every other entry
 * byte for byte as it was (whatever wrote it: Ralph, an editor, this command).
 */
export function upsertCredentialText(text: string | undefined, entry: CredentialEntry): { text: string; replaced: boolean } {
  const json = JSON.stringify(entry, null, 2).replaceAll('\n', '\n  ');
  if (text === undefined || text.trim() === '') return { text: `[\n  ${json}\n]\n`, replaced: false };
  const entries = parseCredentials(text, 'the credentials file');
  const { spans, close } = elementSpans(text);
  const i = entries.findIndex((e) => e.username === entry.username);
  if (i >= 0) {
    const [a, b] = spans[i];
    return { text: text.slice(0, a) + json + text.slice(b), replaced: true };
  }
  if (!spans.length) return { text: `${text.slice(0, close)}\n  ${json}\n${text.slice(close)}`, replaced: false };
  const end = spans[spans.length - 1][1];
  return { text: `${text.slice(0, end)},\n  ${json}${text.slice(end)}`, replaced: false };
}

/** Writes the text atomically: a temporary file in the same folder, then a rename. */
export function writeCredentialsText(path: string, text: string): void {
  const abs = resolve(path);
  mkdirSync(dirname(abs), { recursive: true });
  const tmp = `${abs}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, abs);
}
