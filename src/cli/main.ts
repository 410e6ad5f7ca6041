#!/usr/bin/env node
/** The `lectern` command line. */
import { Command, Option } from 'commander';
import { CredentialsFileError } from '../auth/credentials.ts';
import { ConfigError } from '../config.ts';
import { LECTERN_VERSION } from '../version.ts';
import { authCommand, CliError } from './auth.ts';
import { eraseCommand } from './erase.ts';
import { exportCommand } from './export.ts';
import { importCommand } from './import.ts';
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
  .option('-s, --scope <scope>', 'a scope (repeatable): all, all/read, statements/read, statements/read/mine, statements/write, state/read, state/write, define, profile/read, profile/write', collect)
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

const backendOption = () => new Option('-b, --backend <backend>', 'storage backend: sqlite or postgres (LECTERN_RUNSERVER_BACKEND; other settings as for runserver)');
const progressOption = () => new Option('--progress-interval <seconds>', 'seconds between progress lines when stderr is not a terminal').default('10');

program
  .command('export')
  .description("write a store's statements as NDJSON in stored order (and optionally attachments and documents)")
  .helpOption('--help', 'show help')
  .requiredOption('-o, --output <file>', 'the statements file (- for stdout; .gz compresses)')
  .addOption(backendOption())
  .option('-t, --target <target>', 'the store (tenant) to export; default: the default store')
  .option('--since <timestamp>', 'only statements stored after this instant')
  .option('--until <timestamp>', 'only statements stored at or before this instant')
  .option('--agent <json>', 'only statements about this Agent (as GET /statements?agent=)')
  .option('--verb <iri>', 'only statements with this verb')
  .option('--activity <iri>', 'only statements about this activity')
  .option('--attachments [dir]', 'also write attachment contents, one file per SHA-2 (default: beside the output, backup.ndjson.gz → backup.attachments/)')
  .option('--documents [file]', 'also write State, Activity Profile and Agent Profile documents (default: backup.ndjson.gz → backup.documents.ndjson.gz)')
  .option('--after <position>', 'continue an interrupted export after this position (printed on Ctrl-C)')
  .option('--append', 'append to the output file (with --after)')
  .addOption(progressOption())
  .action(exportCommand);

program
  .command('import')
  .description('store statements from an export file (NDJSON or JSON array, .gz too) or from another LRS, as POST would')
  .helpOption('--help', 'show help')
  .argument('[file]', 'the statements file (- for stdin)')
  .addOption(backendOption())
  .option('-t, --target <target>', 'the store (tenant) to import into')
  .option('--from-lrs <url>', "pull from another LRS: its xAPI base URL (where 'statements' lives)")
  .option('-u, --user <user>', 'user name for --from-lrs (HTTP Basic)')
  .option('-p, --password <password>', 'password for --from-lrs')
  .option('--token <token>', 'bearer token for --from-lrs')
  .option('--attachments [dir]', 'attachment contents: a folder of files named by SHA-2 (default: the export\'s, backup.attachments/, when present); with --from-lrs: pull them too')
  .option('--documents [file]', 'documents file to import (default: the export\'s, backup.documents.ndjson[.gz], when present)')
  .option('--rejects <file>', 'where refused statements are reported, one JSON line each (default: backup.rejects.ndjson beside the file)')
  .option('--batch-size <n>', 'statements per transaction', '1000')
  .option('--page-size <n>', 'statements per page asked of the other LRS', '500')
  .option('--skip <n>', 'skip the first N lines (resume; printed on Ctrl-C)')
  .option('--more <url>', 'with --from-lrs: start at this more link (resume; printed on Ctrl-C)')
  .option('--authority <json>', 'authority for imported statements that have none')
  .addOption(progressOption())
  .action(importCommand);

program
  .command('erase')
  .description("remove (or pseudonymize) one agent's statements, attachments and documents from a store")
  .helpOption('--help', 'show help')
  .requiredOption('--agent <json>', 'the Agent, e.g. \'{"mbox":"mailto:ben@example.com"}\'')
  .addOption(backendOption())
  .option('-t, --target <target>', 'the store (tenant)')
  .option('--dry-run', 'print what would be removed; change nothing')
  .option('--pseudonymize', 'replace the agent by a keyed pseudonym (LECTERN_PSEUDONYMIZE_KEY) instead of erasing')
  .option('--list', 'also print the id of each statement and the key of each document concerned')
  .addOption(progressOption())
  .action(eraseCommand);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof ConfigError || err instanceof CliError || err instanceof CredentialsFileError) {
    process.stderr.write(`lectern: error: ${err.message}\n`);
    process.exit(2);
  }
  throw err;
}
