/** The configured store: LECTERN_* settings (src/config.ts) mapped to the backend's options. */
import type { Clock } from '../clock.ts';
import { checkStoreSettings, type Config, sqliteWriterThread } from '../config.ts';
import { activeTargets } from '../forwarding/config.ts';
import type { Logger } from '../log.ts';
import { openStore, type Store } from '../store/index.ts';
import { StoreUnreachableError } from '../store/types.ts';

/**
 * `clock`: what an in-process SQLite store reads `stored` from (not the writer thread's: it runs on
 * its own); `connectWaitMs`: a one-shot command's wait for a PostgreSQL that cannot be reached, at
 * most (runserver waits as LECTERN_POSTGRES_CONNECT_RETRIES and _BACKOFF say).
 */
export async function openConfiguredStore(config: Config, logger?: Logger, clock?: Clock, connectWaitMs?: number): Promise<Store> {
  checkStoreSettings(config);
  const forwardTargets = activeTargets(config.xapiForwardings);
  if (config.backend === 'postgres') {
    return openStore({
      backend: 'postgres',
      url: config.postgresUrl,
      poolSize: config.postgresPoolSize,
      statementTimeoutMs: config.postgresStatementTimeout,
      connectTimeoutMs: config.postgresConnectTimeout,
      connectRetries: config.postgresConnectRetries,
      connectBackoffMs: config.postgresConnectBackoff,
      connectWaitMs,
      urlName: 'LECTERN_POSTGRES_URL',
      readUrls: config.postgresReadUrls,
      replicaMaxLagMs: config.postgresReplicaMaxLag,
      logger,
      forwardTargets,
    }).catch((err: unknown) => {
      // The store knows its options, not the settings that chose them: name those here.
      if (err instanceof StoreUnreachableError) {
        const waits = `LECTERN_POSTGRES_CONNECT_RETRIES (${config.postgresConnectRetries}) and LECTERN_POSTGRES_CONNECT_BACKOFF (${config.postgresConnectBackoff} ms, doubling up to 30 s)`;
        err.message +=
          connectWaitMs === undefined
            ? `; ${waits} set how long start-up waits, LECTERN_POSTGRES_CONNECT_TIMEOUT (${config.postgresConnectTimeout} ms) each attempt`
            : `; is it running? a command waits at most ${connectWaitMs / 1000} s, each attempt up to LECTERN_POSTGRES_CONNECT_TIMEOUT (${config.postgresConnectTimeout} ms); runserver waits as ${waits} say`;
      }
      throw err;
    });
  }
  const writerThread = sqliteWriterThread(config);
  const common = {
    path: config.sqlitePath,
    synchronous: config.sqliteSynchronous,
    readers: config.sqliteReaders,
    walAutocheckpoint: config.sqliteWalAutocheckpoint,
    cacheMiB: config.sqliteCacheSize,
    forwardTargets,
    logger,
  };
  return writerThread ? openStore({ backend: 'sqlite', writerThread, ...common }) : openStore({ backend: 'sqlite', writerThread, ...common, clock });
}
