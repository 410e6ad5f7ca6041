#!/usr/bin/env node
/** The `lectern` command line. */
import { Command, Option } from 'commander';
import { CredentialsFileError } from '../auth/credentials.ts';
import { SCOPES } from '../auth/scopes.ts';
import { ConfigError } from '../config.ts';
import { LECTERN_VERSION } from '../version.ts';
import { authCommand, CliError } from './auth.ts';
import { forwardingRetry, forwardingStatus } from './forwarding.ts';
import { runserver } from './runserver.ts';

const program = new Command('lectern')
  .description('Lectern: an xAPI 1.0.3 Learning Record Store')
  .version(LECTERN_VERSION, '-v, --version')
  .helpOption('--help', 'show help');

program
  .command('runserver')
  .description('serve the LRS (settings: LECTERN_* environment variables and .env)')
  .helpOption('--help', 'show help')
  .option('-b, --backend <backend>', 'storage backend: sqlite or postgres (LECTERN_RUNSERVER_BACKEND)')
  .option('-h, --host <host>', 'address to listen on (LECTERN_RUNSERVER_HOST)')
  .option('-p, --port <port>', 'port to listen on (LECTERN_RUNSERVER_PORT)')
  .option('-w, --workers <n>', 'server processes sharing the port; more than 1 needs postgres (LECTERN_RUNSERVER_WORKERS)')
  .action(runserver);

const collect = (v: string, prev: string[] = []) => [...prev, v];

program
  .command('auth')
  .description('create or update a user in the credentials file (LECTERN_AUTH_FILE)')
  .helpOption('--help', 'show help')
  .option('-u, --username <username>', 'the user name')
  .option('-p, --password <password>', 'the password (asked for, hidden, when omitted in a terminal)')
  .option('-s, --scope <scope>', `a scope (repeatable): ${SCOPES.join(', ')}`, collect)
  .option('-t, --target <target>', 'the store (tenant) the user works in')
  .option('-M, --agent-ifi-mbox <mbox>', 'agent identifier: a mailto: IRI')
  .addOption(new Option('--agent-mbox <mbox>', 'alias of --agent-ifi-mbox').hideHelp())
  .option('-S, --agent-ifi-mbox-sha1sum <sha1>', 'agent identifier: SHA-1 of a mailto: IRI')
  .option('-O, --agent-ifi-openid <openid>', 'agent identifier: an OpenID URI')
  .option('-A, --agent-ifi-account <name_homepage...>', 'agent identifier: account NAME HOMEPAGE')
  .option('-N, --agent-name <name>', 'the agent name')
  .option('-w, --write-to-disk', 'write the user to the credentials file instead of printing it')
  .action(async (o: Record<string, unknown>) => {
    if (o.agentMbox !== undefined && o.agentIfiMbox === undefined) o.agentIfiMbox = o.agentMbox;
    const account = o.agentIfiAccount as string[] | undefined;
    if (account !== undefined && account.length !== 2) throw new CliError('-A/--agent-ifi-account takes two values: NAME HOMEPAGE');
    await authCommand(o);
  });

const forwarding = program
  .command('forwarding')
  .description('statement forwarding (LECTERN_XAPI_FORWARDINGS): outbox figures and dead letters')
  .helpOption('--help', 'show help');
forwarding
  .command('status')
  .description('queued, delivered, retried and dead-lettered statements per target')
  .helpOption('--help', 'show help')
  .option('--json', 'print JSON')
  .action(forwardingStatus);
forwarding
  .command('retry')
  .description('put dead letters back into the queue (of every target, or of one)')
  .helpOption('--help', 'show help')
  .option('-t, --target <url>', 'only the dead letters of this target url')
  .action(forwardingRetry);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof ConfigError || err instanceof CliError || err instanceof CredentialsFileError) {
    process.stderr.write(`lectern: error: ${err.message}\n`);
    process.exit(2);
  }
  throw err;
}
