/**
 * `lectern auth`: create or update a user in the credentials file (Ralph's options). Prints the
 * entry, or with -w writes it (atomically), replacing a user of the same name.
 */
import bcrypt from 'bcrypt';
import { loadConfig } from '../config.ts';
import { existsSync, readFileSync } from 'node:fs';
import { controlCharacter, type CredentialEntry, parseCredentials, upsertCredentialText, writeCredentialsText } from '../auth/credentials.ts';
import { isScope, SCOPES } from '../auth/scopes.ts';
import type { ValidationIssue } from '../errors.ts';
import type { Agent } from '../xapi/types.ts';
import { validateAgentParam } from '../xapi/validate.ts';
import { CliError } from './errors.ts';
import { promptPassword } from './prompt.ts';

export interface AuthOptions {
  username?: string;
  password?: string;
  scope?: string[];
  target?: string;
  agentIfiMbox?: string;
  agentIfiMboxSha1sum?: string;
  agentIfiOpenid?: string;
  agentIfiAccount?: string[];
  agentName?: string;
  writeToDisk?: boolean;
  file?: string;
}

export function buildAgent(o: AuthOptions): Agent {
  const given = [
    o.agentIfiMbox !== undefined && 'mbox',
    o.agentIfiMboxSha1sum !== undefined && 'mbox_sha1sum',
    o.agentIfiOpenid !== undefined && 'openid',
    o.agentIfiAccount !== undefined && 'account',
  ].filter(Boolean);
  if (given.length !== 1) {
    throw new CliError(
      given.length === 0
        ? 'give exactly one agent identifier: -M/--agent-ifi-mbox, -S/--agent-ifi-mbox-sha1sum, -O/--agent-ifi-openid or -A/--agent-ifi-account NAME HOMEPAGE'
        : `give exactly one agent identifier, not ${given.join(' and ')}`,
    );
  }
  const agent: Agent = { objectType: 'Agent' };
  if (o.agentName !== undefined) agent.name = o.agentName;
  if (o.agentIfiMbox !== undefined) agent.mbox = o.agentIfiMbox;
  if (o.agentIfiMboxSha1sum !== undefined) agent.mbox_sha1sum = o.agentIfiMboxSha1sum;
  if (o.agentIfiOpenid !== undefined) agent.openid = o.agentIfiOpenid;
  if (o.agentIfiAccount !== undefined) {
    const [name, homePage] = o.agentIfiAccount;
    agent.account = { name, homePage };
  }
  const issues: ValidationIssue[] = [];
  validateAgentParam(agent, ['agent'], issues);
  if (issues.length) throw new CliError(`invalid agent: ${issues.map((i) => `${i.loc.slice(1).join('.') || 'agent'}: ${i.msg}`).join('; ')}`);
  return agent;
}

/** bcrypt hashes only the first 72 bytes of a password: a longer one would match any tail. */
export const MAX_PASSWORD_BYTES = 72;

export async function authCommand(o: AuthOptions): Promise<void> {
  if (!o.username) throw new CliError('a username is required (-u/--username)');
  // HTTP Basic splits user and password at the first colon (RFC 7617 §2): such a user could never sign in.
  if (o.username.includes(':')) throw new CliError(`the username ${JSON.stringify(o.username)} contains ":", which HTTP Basic authentication cannot carry in a username: choose one without it`);
  // RFC 7617 §2: "The user-id and password MUST NOT contain any control characters" (and a newline
  // in a name would also split the log lines and listings that show it).
  const control = controlCharacter(o.username);
  if (control) throw new CliError(`the username ${JSON.stringify(o.username)} contains the control character ${control}, which HTTP Basic authentication does not allow: choose one without control characters`);
  const scopes = o.scope ?? [];
  if (scopes.length === 0) throw new CliError(`give at least one scope (-s/--scope), among: ${SCOPES.join(', ')}`);
  const bad = scopes.filter((s) => !isScope(s));
  if (bad.length) throw new CliError(`unknown scope ${bad.map((s) => JSON.stringify(s)).join(', ')}: scopes are ${SCOPES.join(', ')}`);
  const agent = buildAgent(o);
  const file = o.file ?? loadConfig().authFile;
  // Read (and so validate) the existing file before asking for anything: a corrupt file is left as is.
  const existing = o.writeToDisk && existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  if (existing !== undefined && existing.trim() !== '') parseCredentials(existing, file);
  let password = o.password;
  if (password === undefined) {
    if (!process.stdin.isTTY) throw new CliError('a password is required (-p/--password), or run in a terminal to be asked for it');
    password = await promptPassword();
  }
  if (password === '') throw new CliError('the password cannot be empty');
  const inPassword = controlCharacter(password);
  if (inPassword) throw new CliError(`the password contains the control character ${inPassword}, which HTTP Basic authentication does not allow: choose one without control characters`);
  const bytes = Buffer.byteLength(password, 'utf8');
  if (bytes > MAX_PASSWORD_BYTES) {
    throw new CliError(`the password is ${bytes} bytes long (UTF-8); bcrypt uses only the first ${MAX_PASSWORD_BYTES}, so anything after them would not be checked: choose one of at most ${MAX_PASSWORD_BYTES} bytes`);
  }
  const hash = await bcrypt.hash(password, await bcrypt.genSalt(12, 'b'));
  const entry: CredentialEntry = { username: o.username, hash, scopes, agent, ...(o.target !== undefined && { target: o.target }) };
  if (!o.writeToDisk) {
    process.stdout.write(`${JSON.stringify(entry, null, 2)}\n`);
    return;
  }
  // Only this user's entry changes: the others stay byte for byte as they were.
  const { text, replaced } = upsertCredentialText(existing, entry);
  writeCredentialsText(file, text);
  process.stderr.write(`${replaced ? 'updated' : 'added'} user ${o.username} in ${file}\n`);
}
