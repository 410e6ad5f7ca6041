/** The configured store: LECTERN_* settings (src/config.ts) mapped to the backend's options. */
import type { Clock } from '../clock.ts';
import { checkStoreSettings, type Config, sqliteWriterThread } from '../config.ts';
import { activeTargets } from '../forwarding/config.ts';
import type { Logger } from '../log.ts';
import { openStore, type Store } from '../store/index.ts';
import { StoreUnreachableError } from '../store/types.ts';

/** `clock`: what an in-process SQLite store reads `stored` from (not the writer thread's: it runs on its own). */
export async function openConfiguredStore(config: Config, logger?: Logger, clock?: Clock): Promise<Store> {
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
      readUrls: config.postgresReadUrls,
      replicaMaxLagMs: config.postgresReplicaMaxLag,
      logger,
      forwardTargets,
    }).catch((err: unknown) => {
      // The store knows its options, not the settings that chose them: name those here.
      if (err instanceof StoreUnreachableError) {
        err.message += `; LECTERN_POSTGRES_CONNECT_RETRIES (${config.postgresConnectRetries}) and LECTERN_POSTGRES_CONNECT_BACKOFF (${config.postgresConnectBackoff} ms, doubling up to 30 s) set how long start-up waits, LECTERN_POSTGRES_CONNECT_TIMEOUT (${config.postgresConnectTimeout} ms) each attempt`;
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
