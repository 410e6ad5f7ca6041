/** `lectern runserver`: validate settings, open the database, serve until SIGINT/SIGTERM. */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { startLrs } from '../app.ts';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { createLogger } from '../log.ts';

export interface RunserverOptions {
  backend?: string;
  host?: string;
  port?: string;
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

export async function runserver(opts: RunserverOptions): Promise<void> {
  const config = loadConfig(undefined, {
    ...(opts.backend !== undefined && { backend: { value: opts.backend, source: '--backend' } }),
    ...(opts.host !== undefined && { host: { value: opts.host, source: '--host' } }),
    ...(opts.port !== undefined && { port: { value: opts.port, source: '--port' } }),
  });
  checkSqlitePath(config);
  const logger = createLogger(config.logLevel);
  let lrs;
  try {
    lrs = await startLrs(config, logger);
  } catch (err) {
    throw new ConfigError(`cannot start the ${config.backend} LRS: ${(err as Error).message}`);
  }
  logger.info({ url: lrs.url, backend: config.backend }, `Lectern LRS listening on ${lrs.url}`);
  const stop = (signal: string) => {
    logger.info({ signal }, 'shutting down: finishing in-flight requests');
    lrs.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
