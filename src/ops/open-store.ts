/** The configured store: LECTERN_* settings (src/config.ts) mapped to the backend's options. */
import { type Config, sqliteWriterThread } from '../config.ts';
import { activeTargets } from '../forwarding/config.ts';
import type { Logger } from '../log.ts';
import { openStore, type Store } from '../store/index.ts';

export function openConfiguredStore(config: Config, logger?: Logger): Promise<Store> {
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
      logger,
      forwardTargets,
    });
  }
  return openStore({
    backend: 'sqlite',
    writerThread: sqliteWriterThread(config),
    path: config.sqlitePath,
    synchronous: config.sqliteSynchronous,
    readers: config.sqliteReaders,
    walAutocheckpoint: config.sqliteWalAutocheckpoint,
    cacheMiB: config.sqliteCacheSize,
    forwardTargets,
    logger,
  });
}
