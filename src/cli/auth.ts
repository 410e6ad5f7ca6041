/**
 * `lectern auth`: create or update a user in the credentials file (Ralph's options; the checks,
 * hashing and file update are src/ops/users.ts, the fields' rules src/ops/credentials.ts). Prints the entry, or with -w writes it
 * (atomically), replacing a user of the same name; asks for the password in a terminal.
 */
import { SCOPES } from '../auth/scopes.ts';
import { loadConfig } from '../config.ts';
import { checkAgent, checkScopes, checkUsername, checkValidation } from '../ops/credentials.ts';
import { credentialEntry, readCredentialsText, saveCredentialEntry } from '../ops/users.ts';
import type { Agent } from '../xapi/types.ts';
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
  validation?: string;
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
  checkAgent(agent);
  return agent;
}

export async function authCommand(o: AuthOptions): Promise<void> {
  if (!o.username) throw new CliError('a username is required (-u/--username)');
  checkUsername(o.username);
  const scopes = o.scope ?? [];
  if (scopes.length === 0) throw new CliError(`give at least one scope (-s/--scope), among: ${SCOPES.join(', ')}`);
  checkScopes(scopes);
  checkValidation(o.validation);
  const agent = buildAgent(o);
  const file = o.file ?? loadConfig().authFile;
  // Read (and so validate) the existing file before asking for anything: a corrupt file is left as is.
  const existing = o.writeToDisk ? readCredentialsText(file) : undefined;
  let password = o.password;
  if (password === undefined) {
    if (!process.stdin.isTTY) throw new CliError('a password is required (-p/--password), or run in a terminal to be asked for it');
    password = await promptPassword();
  }
  const entry = await credentialEntry({ username: o.username, password, scopes, agent, target: o.target, validation: o.validation });
  if (!o.writeToDisk) {
    process.stdout.write(`${JSON.stringify(entry, null, 2)}\n`);
    return;
  }
  // Only this user's entry changes: the others stay byte for byte as they were.
  const { replaced } = saveCredentialEntry(file, existing, entry);
  process.stderr.write(`${replaced ? 'updated' : 'added'} user ${o.username} in ${file}\n`);
}
