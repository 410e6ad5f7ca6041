/**
 * `lectern runserver`: validate settings, open the database, serve until SIGINT/SIGTERM; with
 * LECTERN_RUNSERVER_WORKERS > 1, as that many node:cluster worker processes on one port.
 */
import cluster, { type Worker } from 'node:cluster';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { type RunningLrs, startLrs } from '../app.ts';
import { parseCredentials } from '../auth/credentials.ts';
import { authBackends, ConfigError, environment, loadConfig, unknownSettings, type Config } from '../config.ts';
import { createLogger, type Logger } from '../log.ts';
import { answerWorkerScrapes } from '../monitoring/cluster.ts';
import type { Monitoring } from '../monitoring/sentry.ts';

export interface RunserverOptions {
  backend?: string;
  host?: string;
  port?: string;
  workers?: string;
}

/** Fails early, in one line, on a database path that cannot be created or written. */
function checkSqlitePath(config: Config): void {
  if (config.backend !== 'sqlite') return;
  const path = resolve(config.sqlitePath);
  let dir = existsSync(path) ? path : dirname(path);
  while (!existsSync(dir)) dir = dirname(dir);
  if (dir !== path && !statSync(dir).isDirectory()) {
    throw new ConfigError(`LECTERN_SQLITE_PATH ${path} cannot be created: ${dir} is not a folder`);
  }
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    throw new ConfigError(`LECTERN_SQLITE_PATH ${path} is not writable (${dir} does not allow writing)`);
  }
}

/**
 * A credentials file that does not load stops start-up (CredentialsFileError: one line naming the
 * file and the entry) rather than serving 401 to everyone; once running, the server keeps the last
 * good content of a file edited badly (src/auth/basic.ts).
 */
function checkCredentialsFile(config: Config): void {
  if (!authBackends(config).includes('basic')) return;
  const path = resolve(config.authFile);
  // An empty file is a first run (firstRunHint), like a missing one.
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
  if (text.trim() !== '') parseCredentials(text, path);
}

/**
 * First run: with no user in the credentials file every request gets 401, so say how to create
 * one, in a line the user can paste. (A server using OpenID Connect alone needs no file: no hint then.)
 */
export function firstRunHint(config: Config, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!authBackends(config).includes('basic')) return undefined;
  const path = resolve(config.authFile);
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    // missing or unreadable: no user either way
  }
  if (text.trim() !== '') {
    try {
      const users: unknown = JSON.parse(text);
      if (!Array.isArray(users) || users.length > 0) return undefined;
    } catch {
      return undefined;
    }
  }
  // Run through `npm start`: the same folder's `npm run lectern`; otherwise the installed command.
  const lectern = env.npm_lifecycle_event ? 'npm run lectern --' : 'lectern';
  const file = env.LECTERN_AUTH_FILE ? `LECTERN_AUTH_FILE=${JSON.stringify(config.authFile)} ` : '';
  return (
    `no user in the credentials file ${path}: every request will get 401 until you create one, e.g. the operator (every xAPI scope, and the console's admin pages of every store): ` +
    `${file}${lectern} auth --username admin --scope all --scope admin --agent-mbox mailto:admin@example.com -w`
  );
}

/** What chose the address a failed listen asked for, and which option or setting chooses another. */
function listenHint(err: unknown, opts: RunserverOptions, env: Record<string, string | undefined>): string {
  const code = (err as { code?: unknown }).code;
  const from = (option: string, setting: string, given: string | undefined) =>
    given !== undefined ? option : env[setting] !== undefined ? setting : `the default (${setting} unset)`;
  if (code === 'EADDRINUSE') {
    return `: another process listens on that port (chosen by ${from('-p/--port', 'LECTERN_RUNSERVER_PORT', opts.port)}); choose another with -p/--port or LECTERN_RUNSERVER_PORT (0 picks a free one)`;
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return `: no such address on this machine (chosen by ${from('--host', 'LECTERN_RUNSERVER_HOST', opts.host)}); choose another with --host or LECTERN_RUNSERVER_HOST`;
  }
  return '';
}

export async function runserver(opts: RunserverOptions, monitoring?: Monitoring): Promise<void> {
  const env = environment();
  const config = loadConfig(env, {
    ...(opts.backend !== undefined && { backend: { value: opts.backend, source: '--backend' } }),
    ...(opts.host !== undefined && { host: { value: opts.host, source: '--host' } }),
    ...(opts.port !== undefined && { port: { value: opts.port, source: '--port' } }),
    ...(opts.workers !== undefined && { workers: { value: opts.workers, source: '--workers' } }),
  });
  checkSqlitePath(config);
  checkCredentialsFile(config);
  if (config.workers > 1 && config.backend !== 'postgres') {
    // SQLite serialises writers on a file lock and this store's guarantees assume one process.
    throw new ConfigError(`LECTERN_RUNSERVER_WORKERS=${config.workers} needs the postgres backend; the ${config.backend} backend runs in one process`);
  }
  const logger = createLogger(config.logLevel);
  if (cluster.isPrimary) {
    for (const u of unknownSettings(env)) logger.warn({ variable: u.variable, closest: u.closest }, u.message);
    const hint = firstRunHint(config);
    if (hint) logger.warn({ file: resolve(config.authFile) }, hint);
  }
  if (config.workers > 1 && cluster.isPrimary) return supervise(config, logger);
  let lrs: RunningLrs;
  try {
    lrs = await startLrs(config, logger, monitoring, { worker: cluster.worker?.id });
  } catch (err) {
    throw new ConfigError(`cannot start the ${config.backend} LRS: ${(err as Error).message}${listenHint(err, opts, env)}`);
  }
  logger.info({ url: lrs.url, backend: config.backend }, `Lectern LRS listening on ${lrs.url}`);
  // Logs are written asynchronously: this line reaches stdout before the primary announces the workers.
  await new Promise<void>((done) => logger.flush(() => done()));
  process.send?.({ type: 'ready', url: lrs.url } satisfies ReadyMessage);
  let stopping: number | undefined;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping !== undefined) {
      // The same stop often arrives twice: sent to the process group (a terminal, systemd) and passed
      // on by the entry that runs Lectern under the npm Node (src/cli/main.ts). A later one insists.
      if (performance.now() - stopping < 1000) return;
      logger.warn({ signal }, 'stopping now, without waiting for in-flight requests');
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
    stopping = performance.now();
    logger.info({ signal }, 'shutting down: finishing in-flight requests');
    lrs.close().then(
      async () => {
        await monitoring?.flush();
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

interface ReadyMessage {
  type: 'ready';
  url: string;
}

const isReady = (m: unknown): m is ReadyMessage => typeof m === 'object' && m !== null && (m as ReadyMessage).type === 'ready';

/**
 * The cluster primary: forks the workers (each a full server sharing the listening socket) and
 * keeps them running. The first worker starts alone, so that migrations and an unreachable
 * database are dealt with, and reported, once; its failure is the command's failure (it has
 * already printed the one-line reason). Workers that die later are replaced.
 */
async function supervise(config: Config, logger: Logger): Promise<void> {
  let stopping = false;
  const started = (w: Worker) =>
    new Promise<string>((resolve, reject) => {
      const onMessage = (m: unknown) => {
        if (!isReady(m)) return;
        w.off('exit', onExit);
        resolve(m.url);
      };
      const onExit = (code: number | null) => {
        w.off('message', onMessage);
        reject(Object.assign(new Error(`worker exited with code ${code}`), { exitCode: code ?? 1 }));
      };
      w.on('message', onMessage);
      w.once('exit', onExit);
    });
  // The workers share one console session secret (LECTERN_CONSOLE_SECRET), generated here when
  // none is set: a session cookie one worker sealed is accepted by every other.
  const env = config.consoleSecret ? {} : { LECTERN_CONSOLE_SECRET: randomBytes(32).toString('base64url') };
  // Structured clone: the metrics the workers send carry NaN and ±Infinity, which JSON cannot.
  cluster.setupPrimary({ serialization: 'advanced' });
  const fork = () => cluster.fork(env);
  // A scrape of any worker answers for the workers serving (src/monitoring/cluster.ts).
  const serving = new Set<Worker>();
  cluster.on('message', (w, m) => isReady(m) && serving.add(w));
  cluster.on('exit', (w) => serving.delete(w));
  answerWorkerScrapes(() => serving);
  let url: string;
  try {
    url = await started(fork());
    await Promise.all(Array.from({ length: config.workers - 1 }, () => started(fork())));
  } catch (err) {
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM');
    process.exit((err as { exitCode?: number }).exitCode || 1);
  }
  logger.info({ url, backend: config.backend, workers: config.workers }, `Lectern LRS listening on ${url} with ${config.workers} worker processes`);
  cluster.on('exit', (w, code, signal) => {
    if (stopping) return;
    logger.error({ worker: w.process.pid, code, signal }, 'a worker process died; starting a replacement');
    setTimeout(() => stopping || fork(), 1000).unref();
  });
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down the worker processes');
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead());
    let failed = false;
    let left = workers.length;
    if (!left) process.exit(0);
    for (const w of workers) {
      w.once('exit', (code) => {
        failed ||= code !== 0;
        if (--left === 0) process.exit(failed ? 1 : 0);
      });
      w.process.kill('SIGTERM');
    }
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
