/**
 * What `lectern export`, `import`, `erase` and the admin commands share: the store opened with
 * runserver's settings (for an admin action, with the CLI's actor), the names of an export's files (src/ops/archive.ts: their content), the files or stdin/stdout
 * they are read from and written to (`.gz` compressed).
 */
import { once } from 'node:events';
import { createReadStream, createWriteStream, existsSync, type ReadStream, statSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { createGunzip, createGzip } from 'node:zlib';
import { systemClock } from '../clock.ts';
import { environment, loadConfig, unknownSettings, type Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { type AdminActor, type AdminContext, cliActor } from '../ops/admin/roles.ts';
import { openConfiguredStore } from '../ops/open-store.ts';
import type { Store } from '../store/index.ts';
import type { ValidationIssue } from '../errors.ts';
import type { Actor } from '../xapi/types.ts';
import { validateAgentParam } from '../xapi/validate.ts';
import { CliError } from './errors.ts';

/**
 * How long a command waits for a PostgreSQL that cannot be reached (a refused connection, no
 * answer): a person or a script is waiting, unlike runserver at boot, whose database may still be starting.
 */
const COMMAND_CONNECT_WAIT_MS = 5000;

/** The settings runserver uses, `--backend` overriding LECTERN_RUNSERVER_BACKEND; logs go to stderr. */
export async function openCliStore(backend: string | undefined): Promise<{ config: Config; store: Store }> {
  const env = environment();
  const config = loadConfig(env, backend === undefined ? {} : { backend: { value: backend, source: '--backend' } });
  // Warnings only: stdout may be the export itself, and progress is shown on stderr.
  const logger = createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, process.stderr);
  for (const u of unknownSettings(env)) logger.warn({ variable: u.variable, closest: u.closest }, u.message);
  try {
    return { config, store: await openConfiguredStore(config, logger, undefined, COMMAND_CONNECT_WAIT_MS) };
  } catch (err) {
    throw new CliError(`cannot open the ${config.backend} store: ${(err as Error).message}`);
  }
}

/**
 * Runs an admin action's command on the store of runserver's settings, as the CLI's actor (the OS
 * user on this host, an operator: it holds the database's settings), closing the store after.
 */
export async function withAdmin<T>(backend: string | undefined, fn: (ctx: AdminContext, by: AdminActor) => Promise<T>): Promise<T> {
  const { config, store } = await openCliStore(backend);
  try {
    return await fn({ store, config, clock: systemClock }, cliActor());
  } finally {
    await store.close();
  }
}

/** An Agent (or identified Group) option given as JSON, validated as the `agent` query parameter is. */
export function parseAgentOption(raw: string, option: string): Actor {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new CliError(`${option} must be an Agent as JSON, e.g. '{"mbox":"mailto:ben@example.com"}'`);
  }
  const issues: ValidationIssue[] = [];
  const actor = validateAgentParam(value, [option], issues);
  if (issues.length || !actor) throw new CliError(issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; '));
  return actor;
}

/**
 * The sibling paths of an export: `backup.ndjson.gz` → `backup.violations.ndjson.gz`,
 * `backup.attachments/` and `backup.documents.ndjson.gz` (compressed when the statements are); an
 * import's `backup.rejects.ndjson`.
 */
export function siblings(file: string): { violations: string; attachments: string; documents: string; rejects: string } {
  const gz = file.endsWith('.gz') ? '.gz' : '';
  const base = file.replace(/\.gz$/, '').replace(/\.(ndjson|jsonl|json)$/, '');
  return { violations: `${base}.violations.ndjson${gz}`, attachments: `${base}.attachments`, documents: `${base}.documents.ndjson${gz}`, rejects: `${base}.rejects.ndjson` };
}

/** A writer with backpressure; `.gz` files are gzip compressed; '-' is stdout. */
export class OutputFile {
  private readonly sink: Writable;
  private readonly file: Writable | undefined;
  private closed = false;
  readonly path: string;

  constructor(path: string, opts: { append?: boolean } = {}) {
    this.path = path;
    this.file = path === '-' ? undefined : createWriteStream(path, { flags: opts.append ? 'a' : 'w' });
    // A reader that stops early (`| head`): end quietly with the shell's SIGPIPE status.
    if (!this.file) process.stdout.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' ? process.exit(141) : undefined));
    const target = this.file ?? process.stdout;
    if (path.endsWith('.gz')) {
      const gz = createGzip();
      gz.pipe(target);
      this.sink = gz;
    } else {
      this.sink = target;
    }
  }

  async write(text: string): Promise<void> {
    if (!this.sink.write(text)) await once(this.sink, 'drain');
  }

  /** Ends the stream (the gzip trailer included) and waits until it is on disk; again: nothing. */
  async close(): Promise<void> {
    if (this.sink === process.stdout || this.closed) return;
    this.closed = true;
    const done = this.file ? once(this.file, 'close') : Promise.resolve();
    this.sink.end();
    await done;
  }
}

/** A readable of a file's content (gunzipped for `.gz`), its size, and how many bytes were read. */
export function openInput(path: string): { stream: Readable; size?: number; bytesRead(): number } {
  let raw: Readable;
  let file: ReadStream | undefined;
  if (path === '-') {
    raw = process.stdin;
  } else {
    if (!existsSync(path)) throw new CliError(`${path} does not exist`);
    raw = file = createReadStream(path);
  }
  // No 'data' listener here: it would start the flow before the reader is there, losing data.
  const stream = path.endsWith('.gz') ? raw.pipe(createGunzip()) : raw;
  if (stream !== raw) raw.on('error', (err) => stream.destroy(err));
  return { stream, size: file ? statSync(path).size : undefined, bytesRead: () => file?.bytesRead ?? 0 };
}
