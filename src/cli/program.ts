/**
 * The `lectern` commands. Each command imports what it uses when it runs, so `lectern auth` loads
 * neither a database driver nor the HTTP server. With LECTERN_MONITORING_DSN set, every command
 * runs in a monitored transaction and a failure is reported before the process exits.
 */
import { Command, Option } from 'commander';
import { SCOPES } from '../auth/scopes.ts';
import { environment, loadConfig, type Config } from '../config.ts';
import type { Monitoring } from '../monitoring/sentry.ts';
import { LECTERN_VERSION } from '../version.ts';

/** Errors that say what the user must fix: one line on stderr, exit code 2. */
const USER_ERRORS = new Set(['CliError', 'ConfigError', 'CredentialsFileError']);

let monitoring: Monitoring | undefined;

/** Starts monitoring for a command. Bad settings are left for the command itself to report. */
async function monitor(kind: 'lrs' | 'cli'): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(environment());
  } catch {
    return;
  }
  const { startMonitoring } = await import('../monitoring/sentry.ts');
  monitoring = await startMonitoring(kind, config);
}

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
  .action(async (o: Record<string, string | undefined>) => {
    // Before the server's modules load, so the SDK instruments them; requests are the transactions.
    await monitor('lrs');
    const { runserver } = await import('./runserver.ts');
    await runserver(o, monitoring);
  });

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
    await monitor('cli');
    if (typeof o.password === 'string') monitoring?.addSecret(o.password);
    const run = async () => {
      const { authCommand, CliError } = await import('./auth.ts');
      if (o.agentMbox !== undefined && o.agentIfiMbox === undefined) o.agentIfiMbox = o.agentMbox;
      const account = o.agentIfiAccount as string[] | undefined;
      if (account !== undefined && account.length !== 2) throw new CliError('-A/--agent-ifi-account takes two values: NAME HOMEPAGE');
      await authCommand(o);
    };
    await (monitoring ? monitoring.command('auth', run) : run());
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
  .action(async (o: { json?: boolean }) => {
    await monitor('cli');
    const run = async () => (await import('./forwarding.ts')).forwardingStatus(o);
    await (monitoring ? monitoring.command('forwarding status', run) : run());
  });
forwarding
  .command('retry')
  .description('put dead letters back into the queue (of every target, or of one)')
  .helpOption('--help', 'show help')
  .option('-t, --target <url>', 'only the dead letters of this target url')
  .action(async (o: { target?: string }) => {
    await monitor('cli');
    const run = async () => (await import('./forwarding.ts')).forwardingRetry(o);
    await (monitoring ? monitoring.command('forwarding retry', run) : run());
  });

try {
  await program.parseAsync(process.argv);
  await monitoring?.flush();
} catch (err) {
  const known = err instanceof Error && USER_ERRORS.has(err.name);
  if (monitoring) {
    monitoring.captureException(err, { command: process.argv[2] ?? '' });
    await monitoring.flush();
  }
  if (known) {
    process.stderr.write(`lectern: error: ${(err as Error).message}\n`);
    process.exit(2);
  }
  process.stderr.write(`lectern: error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
}
