/**
 * The `lectern` commands. Each command imports what it uses when it runs, so `lectern auth` loads
 * neither a database driver nor the HTTP server. With LECTERN_MONITORING_DSN set, every command
 * runs in a monitored transaction and a failure is reported before the process exits.
 */
import { Command, Option } from 'commander';
import { SCOPES } from '../auth/scopes.ts';
import { environment, loadConfig, sqliteWriterThread, type Config } from '../config.ts';
import type { Monitoring } from '../monitoring/sentry.ts';
import { LECTERN_VERSION } from '../version.ts';
import { CliError } from './errors.ts';
import { backendOption, outboxTarget, progressOption, timeOption } from './options.ts';

/** Errors that say what the user must fix: one line on stderr, exit code 2. */
const USER_ERRORS = new Set(['CliError', 'OpsError', 'ConfigError', 'CredentialsFileError']);

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

/** Runs a command under monitoring (when configured), loading its module only then. */
async function monitored(name: string, run: () => Promise<void>, secrets: (string | undefined)[] = []): Promise<void> {
  await monitor('cli');
  for (const secret of secrets) if (secret) monitoring?.addSecret(secret);
  await (monitoring ? monitoring.command(name, run) : run());
}

/**
 * `lectern runserver` is long-lived, and Node's defaults size memory for throughput on a big
 * machine: large young-generation semi-spaces filled before each scavenge, an old generation let
 * grow to several times what survived the last full collection, a glibc malloc arena per busy
 * thread, and an mmap threshold that rises to the largest large block freed (the big blocks that
 * then come from the heap leave it fragmented). Smaller semi-spaces, an old generation grown by
 * half of what survives, two arenas and a fixed 1 MB mmap threshold (a statement page stays below
 * it, so it comes from the heap rather than its own mapping) cut the server's peak memory at the
 * same speed. With an old generation that small, V8's own rule for starting a full collection
 * fires far too often under PostgreSQL statement pages, so marking starts at half its limit.
 * The figures and what was tried: docs/decisions.md, "HTTP and the server process".
 *
 * V8 reads these at process start only, so the command re-executes itself in place (execve: same
 * pid, same stdio, signals reach it as before) with them. A flag the user gives (in NODE_OPTIONS
 * or on the node command line) or their own MALLOC_* setting wins. It runs with Node's defaults
 * where it cannot re-execute: without process.execve (Windows, Node < 22.15), and when a parent
 * talks to it over an IPC channel, which execve would close (cluster workers inherit the
 * primary's flags).
 *
 * With the SQLite writer thread (LECTERN_SQLITE_WRITER_THREAD) V8 flags apply to every thread, so
 * each isolate gets a young generation of the flag's size: half the semi-space and one malloc
 * arena for both threads keep the process near one event loop's memory. Settings that do not load
 * are reported by runserver itself, after the restart.
 */
function restartWithMemorySettings(backend: string | undefined): void {
  const given = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS || ''}`;
  const flags = ['--max-semi-space-size', '--heap-growing-percent', '--incremental-marking-soft-trigger'];
  if (flags.every((f) => given.includes(f)) || typeof process.execve !== 'function' || process.channel) return;
  let threads = false;
  try {
    threads = sqliteWriterThread(loadConfig(environment(), backend === undefined ? {} : { backend: { value: backend, source: '--backend' } }));
  } catch {
    // runserver reports it.
  }
  const values = [threads ? 8 : 16, 50, 50];
  const missing = flags.flatMap((f, i) => (given.includes(f) ? [] : [`${f}=${values[i]}`]));
  const malloc = { MALLOC_ARENA_MAX: threads ? '1' : '2', MALLOC_MMAP_THRESHOLD_: '1048576' };
  try {
    process.execve!(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], { ...malloc, ...process.env });
  } catch {
    // Not replaceable here: run with Node's defaults.
  }
}

const program = new Command('lectern')
  .description('Lectern: an xAPI 1.0.3 and 2.0 Learning Record Store')
  .version(LECTERN_VERSION, '-v, --version')
  .helpOption('-h, --help', 'show help')
  .option('--env-file <path>', "settings from this file (systemd's EnvironmentFile= format, e.g. /etc/lectern/lectern.env), over those of the environment")
  // Shown in every command's help; the subcommands copy it as they are made.
  .configureHelp({ showGlobalOptions: true })
  // Before any command (and its monitoring) reads its settings.
  .hook('preAction', async () => {
    const file = (program.opts() as { envFile?: string }).envFile;
    if (file !== undefined) (await import('./env-file.ts')).applyEnvironmentFile(file);
  });

program
  .command('runserver')
  .description('serve the LRS (settings: LECTERN_* environment variables and .env)')
  .helpOption('-h, --help', 'show help')
  .option('-b, --backend <backend>', 'storage backend: sqlite or postgres (LECTERN_RUNSERVER_BACKEND)')
  .option('-H, --host <host>', 'address to listen on (LECTERN_RUNSERVER_HOST)')
  .option('-p, --port <port>', 'port to listen on (LECTERN_RUNSERVER_PORT)')
  .option('-w, --workers <n>', 'server processes sharing the port; more than 1 needs postgres (LECTERN_RUNSERVER_WORKERS)')
  .action(async (o: Record<string, string | undefined>) => {
    restartWithMemorySettings(o.backend);
    // Before the server's modules load, so the SDK instruments them; requests are the transactions.
    await monitor('lrs');
    const { runserver } = await import('./runserver.ts');
    await runserver(o, monitoring);
  });

const collect = (v: string, prev: string[] = []) => [...prev, v];

program
  .command('auth')
  .description('create or update a user in the credentials file (LECTERN_AUTH_FILE)')
  .helpOption('-h, --help', 'show help')
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
  .option('--validation <mode>', "how the user's statement writes are validated: strict or lax (default: LECTERN_XAPI_VALIDATION)")
  .option('-w, --write-to-disk', 'write the user to the credentials file instead of printing it')
  .action((o: Record<string, unknown>) =>
    monitored('auth', async () => {
      if (o.agentMbox !== undefined && o.agentIfiMbox === undefined) o.agentIfiMbox = o.agentMbox;
      const account = o.agentIfiAccount as string[] | undefined;
      if (account !== undefined && account.length !== 2) throw new CliError('-A/--agent-ifi-account takes two values: NAME HOMEPAGE');
      await (await import('./auth.ts')).authCommand(o);
    }, [typeof o.password === 'string' ? o.password : undefined]),
  );

program
  .command('export')
  .description("write a store's statements as NDJSON in stored order (and optionally attachments and documents)")
  .helpOption('-h, --help', 'show help')
  .requiredOption('-o, --output <file>', 'the statements file (- for stdout; .gz compresses)')
  .addOption(backendOption())
  .option('-t, --target <target>', 'the store (tenant) to export; default: the default store')
  .addOption(timeOption('--since <time>', 'only statements stored after this time'))
  .addOption(timeOption('--until <time>', 'only statements stored at or before this time'))
  .option('--agent <json>', 'only statements about this Agent (as GET /statements?agent=)')
  .option('--verb <iri>', 'only statements with this verb')
  .option('--activity <iri>', 'only statements about this activity')
  .option(
    '--violations <file>',
    'where the violations of statements stored under lax validation go, for a restore (default: beside the output, backup.ndjson.gz → backup.violations.ndjson.gz; with -o -: not written unless given)',
  )
  .option('--attachments [dir]', 'also write attachment contents, one file per SHA-2 (default: beside the output, backup.ndjson.gz → backup.attachments/)')
  .option('--documents [file]', 'also write State, Activity Profile and Agent Profile documents (default: backup.ndjson.gz → backup.documents.ndjson.gz)')
  .option('--after <position>', 'continue an interrupted export after this position (printed on Ctrl-C)')
  .option('--append', 'append to the output file (with --after)')
  .addOption(progressOption())
  .action((o: Parameters<typeof import('./export.ts').exportCommand>[0]) => monitored('export', async () => (await import('./export.ts')).exportCommand(o)));

program
  .command('import')
  .description('store statements from an export file (NDJSON or JSON array, .gz too) or from another LRS, as POST would')
  .helpOption('-h, --help', 'show help')
  .argument('[file]', 'the statements file (- for stdin)')
  .addOption(backendOption())
  .option('-t, --target <target>', 'the store (tenant) to import into')
  .option('--from-lrs <url>', "pull from another LRS: its xAPI base URL (where 'statements' lives)")
  .option('-u, --user <user>', 'user name for --from-lrs (HTTP Basic)')
  .option('-p, --password <password>', 'password for --from-lrs')
  .option('--token <token>', 'bearer token for --from-lrs')
  .option('--attachments [dir]', "attachment contents: a folder of files named by SHA-2 (default: the export's, backup.attachments/, when present); with --from-lrs: pull them too")
  .option('--documents [file]', "documents file to import (default: the export's, backup.documents.ndjson[.gz], when present)")
  .option(
    '--violations <file>',
    "the statements an export says were stored under lax validation, restored so whatever --validation says (default: the export's, backup.violations.ndjson[.gz], when present)",
  )
  .option('--rejects <file>', 'where refused statements are reported, one JSON line each (default: backup.rejects.ndjson beside the file)')
  .option('--batch-size <n>', 'statements per transaction', '1000')
  .option('--page-size <n>', 'statements per page asked of the other LRS', '500')
  .option('--skip <n>', 'skip the first N lines (resume; printed on Ctrl-C)')
  .option('--more <url>', 'with --from-lrs: start at this more link (resume; printed on Ctrl-C)')
  .option('--authority <json>', 'authority for imported statements that have none')
  .option('--validation <mode>', "strict or lax, as a credential's (docs/validation.md), for the statements the violations file does not name; default: LECTERN_XAPI_VALIDATION")
  .addOption(progressOption())
  .action((file: string | undefined, o: Parameters<typeof import('./import.ts').importCommand>[1]) =>
    monitored('import', async () => (await import('./import.ts')).importCommand(file, o), [o.password, o.token]),
  );

program
  .command('violations')
  .description('the rules a statement stored under lax validation broke (docs/validation.md)')
  .helpOption('-h, --help', 'show help')
  .argument('<statement-id>', "the statement's id")
  .addOption(backendOption())
  .option('-t, --target <target>', 'the store (tenant)')
  .option('--json', 'print JSON')
  .action((id: string, o: Parameters<typeof import('./violations.ts').violationsCommand>[1]) =>
    monitored('violations', async () => (await import('./violations.ts')).violationsCommand(id, o)),
  );

program
  .command('erase')
  .description("remove (or pseudonymize) one agent's statements, attachments and documents from a store")
  .helpOption('-h, --help', 'show help')
  .requiredOption('--agent <json>', 'the Agent, e.g. \'{"mbox":"mailto:ben@example.com"}\'')
  .addOption(backendOption())
  .option('-t, --target <target>', 'the store (tenant)')
  .option('--dry-run', 'print what would be removed; change nothing')
  .option('--pseudonymize', 'replace the agent by a keyed pseudonym (LECTERN_PSEUDONYMIZE_KEY) instead of erasing')
  .option('--list', 'also print the id of each statement and the key of each document concerned')
  .addOption(progressOption())
  .action((o: Parameters<typeof import('./erase.ts').eraseCommand>[0]) => monitored('erase', async () => (await import('./erase.ts')).eraseCommand(o)));

program
  .command('prune')
  .description('remove the statements stored before a time (and kept rejections as old) from every store, or one')
  .helpOption('-h, --help', 'show help')
  .addOption(timeOption('--before <time>', 'required: the statements stored before this time go'))
  .addOption(backendOption())
  .option('-t, --target <target>', 'the store (tenant); every store when absent')
  .option('--dry-run', 'print what would be removed; change nothing')
  .option('--json', 'print one JSON report per store')
  .option('--batch-size <n>', 'statements per delete transaction (default 200): smaller holds writers up for less')
  .addOption(progressOption())
  .action((o: Parameters<typeof import('./prune.ts').pruneCommand>[0]) => monitored('prune', async () => (await import('./prune.ts')).pruneCommand(o)));

const forwarding = program
  .command('forwarding')
  .description('statement forwarding (LECTERN_XAPI_FORWARDINGS): outbox figures and dead letters')
  .helpOption('-h, --help', 'show help');
forwarding
  .command('status')
  .description('queued, delivered, retried and dead-lettered statements per target')
  .helpOption('-h, --help', 'show help')
  .addOption(backendOption())
  .addOption(outboxTarget())
  .option('--json', 'print JSON')
  .action((o: Parameters<typeof import('./forwarding.ts').forwardingStatus>[0]) =>
    monitored('forwarding status', async () => (await import('./forwarding.ts')).forwardingStatus(o)),
  );
forwarding
  .command('retry')
  .description('put dead letters back into the queue (of every target, or of one)')
  .helpOption('-h, --help', 'show help')
  .addOption(backendOption())
  .addOption(outboxTarget())
  .option('--url <url>', 'only the dead letters of the forwarding target with this url')
  .action((o: Parameters<typeof import('./forwarding.ts').forwardingRetry>[0]) => monitored('forwarding retry', async () => (await import('./forwarding.ts')).forwardingRetry(o)));

const credentials = program
  .command('credentials')
  .description("credentials in the database (key and secret, used as HTTP Basic users beside LECTERN_AUTH_FILE's)")
  .helpOption('-h, --help', 'show help');
credentials
  .command('create')
  .description('create a credential: prints its key and a generated secret, once')
  .helpOption('-h, --help', 'show help')
  .option('-s, --scope <scope>', `a scope (repeatable): ${SCOPES.join(', ')}`, collect)
  .option('-t, --target <target>', 'the store (tenant) it works in')
  .option('-M, --agent-mbox <mbox>', 'authority agent: a mailto: IRI')
  .addOption(new Option('--agent-ifi-mbox <mbox>', 'alias of --agent-mbox').hideHelp())
  .option('-S, --agent-mbox-sha1sum <sha1>', 'authority agent: SHA-1 of a mailto: IRI')
  .addOption(new Option('--agent-ifi-mbox-sha1sum <sha1>', 'alias of --agent-mbox-sha1sum').hideHelp())
  .option('-O, --agent-openid <openid>', 'authority agent: an OpenID URI')
  .addOption(new Option('--agent-ifi-openid <openid>', 'alias of --agent-openid').hideHelp())
  .option('-A, --agent-account <name_homepage...>', 'authority agent: account NAME HOMEPAGE')
  .addOption(new Option('--agent-ifi-account <name_homepage...>', 'alias of --agent-account').hideHelp())
  .option('-N, --agent-name <name>', 'the agent name')
  .addOption(timeOption('--expires <time>', 'when it stops working'))
  .option('--label <text>', 'what it is for, shown by list')
  .option('--validation <mode>', "statement validation for it: strict or lax (default: the server's)")
  .option('--key <key>', 'a key of your choosing instead of a generated one')
  .option('--json', 'print JSON')
  .addOption(backendOption())
  .action((o: Record<string, unknown>) =>
    monitored('credentials create', async () => {
      for (const f of ['Mbox', 'MboxSha1sum', 'Openid', 'Account']) if (o[`agent${f}`] === undefined) o[`agent${f}`] = o[`agentIfi${f}`];
      await (await import('./credentials.ts')).createCommand(o);
    }),
  );
credentials
  .command('list')
  .description('list the credentials (never their secrets): key, target, scopes, agent, created, expires, last used, revoked, label')
  .helpOption('-h, --help', 'show help')
  .option('-t, --target <target>', 'only the credentials of this store')
  .option('--json', 'print JSON')
  .addOption(backendOption())
  .action((o: Parameters<typeof import('./credentials.ts').listCommand>[0]) => monitored('credentials list', async () => (await import('./credentials.ts')).listCommand(o)));
credentials
  .command('revoke')
  .description('revoke a credential: every server refuses it within LECTERN_AUTH_CREDENTIALS_REFRESH seconds')
  .helpOption('-h, --help', 'show help')
  .argument('<key>', 'the credential key')
  .option('--json', 'print JSON')
  .addOption(backendOption())
  .action((key: string, o: Parameters<typeof import('./credentials.ts').revokeCommand>[1]) =>
    monitored('credentials revoke', async () => (await import('./credentials.ts')).revokeCommand(key, o)),
  );
credentials
  .command('rotate')
  .description('give a credential a new secret (printed once); the old one works until the grace ends')
  .helpOption('-h, --help', 'show help')
  .argument('<key>', 'the credential key')
  .option('--grace <seconds>', 'seconds the old secret keeps working (default 0: it stops now)')
  .option('--json', 'print JSON')
  .addOption(backendOption())
  .action((key: string, o: Parameters<typeof import('./credentials.ts').rotateCommand>[1]) =>
    monitored('credentials rotate', async () => (await import('./credentials.ts')).rotateCommand(key, o)),
  );
const rejections = program
  .command('rejections')
  .description('writes the server refused (400, 409, 413), kept per store: list, show, replay, clear (docs/rejections.md)')
  .helpOption('-h, --help', 'show help');
type RejectionsModule = typeof import('./rejections.ts');
rejections
  .command('list')
  .description('the kept rejections, oldest first')
  .helpOption('-h, --help', 'show help')
  .addOption(backendOption())
  .option('-t, --target <target>', 'only this store (tenant); default: every store')
  .addOption(timeOption('--since <time>', 'only those refused at or after this time'))
  .option('--reason <type>', 'only those with a reason of this type, or of a type it begins up to a dot (value_error finds value_error.iri)')
  .option('--limit <n>', 'at most this many (default 1000)')
  .option('--json', 'print JSON')
  .action((o: Parameters<RejectionsModule['rejectionsList']>[0]) => monitored('rejections list', async () => (await import('./rejections.ts')).rejectionsList(o)));
rejections
  .command('show')
  .description('one kept rejection with its reasons and body, as JSON')
  .helpOption('-h, --help', 'show help')
  .argument('<id>', 'its id (lectern rejections list)')
  .addOption(backendOption())
  .action((id: string, o: Parameters<RejectionsModule['rejectionsShow']>[1]) => monitored('rejections show', async () => (await import('./rejections.ts')).rejectionsShow(id, o)));
rejections
  .command('replay')
  .description(
    'send kept bodies again through the path a new request takes, under their credential: accepted ones are stored and removed, refused ones stay with their new reasons',
  )
  .helpOption('-h, --help', 'show help')
  .argument('[ids...]', 'the rejections to replay')
  .option('--all', 'every kept rejection (of the store given by -t)')
  .option('-t, --target <target>', 'with --all: only this store')
  .option('--validation <mode>', "strict or lax: validate under this mode instead of the credential's")
  .option(
    '--override-writer',
    "replay too those whose writer no longer holds the grant it wrote with (revoked, expired, changed or removed; a token's subject): without it they are skipped; recorded in the audit",
  )
  .option('--json', 'print JSON')
  .addOption(backendOption())
  .action((ids: string[], o: Parameters<RejectionsModule['rejectionsReplay']>[1]) =>
    monitored('rejections replay', async () => (await import('./rejections.ts')).rejectionsReplay(ids, o)),
  );
rejections
  .command('clear')
  .description('remove the kept rejections (of every store, or of one)')
  .helpOption('-h, --help', 'show help')
  .option('-t, --target <target>', 'only this store (tenant)')
  .addOption(backendOption())
  .action((o: Parameters<RejectionsModule['rejectionsClear']>[0]) => monitored('rejections clear', async () => (await import('./rejections.ts')).rejectionsClear(o)));

/**
 * `-h` is help on every command; Ralph's `runserver -h HOST` (a value after it) still names the
 * host, as `-H HOST` does.
 */
function ralphHost(argv: string[]): string[] {
  if (argv[2] !== 'runserver') return argv;
  return argv.map((a, i) => (a === '-h' && i + 1 < argv.length && !argv[i + 1].startsWith('-') ? '--host' : a));
}

try {
  await program.parseAsync(ralphHost(process.argv));
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
