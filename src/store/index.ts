/** Opens the configured backend, its schema migrated. Only that backend's driver is loaded. */
import { type Config, sqliteWriterThread } from '../config.ts';
import { activeTargets } from '../forwarding/config.ts';
import type { Logger } from '../log.ts';
import type { Store } from './types.ts';

export async function openStore(config: Config, logger?: Logger): Promise<Store> {
  switch (config.backend) {
    case 'sqlite': {
      const opts = {
        path: config.sqlitePath,
        synchronous: config.sqliteSynchronous,
        readers: config.sqliteReaders,
        walAutocheckpoint: config.sqliteWalAutocheckpoint,
        cacheMiB: config.sqliteCacheSize,
        forwardTargets: activeTargets(config.xapiForwardings),
        logger,
      };
      const store = sqliteWriterThread(config) ? new (await import('./sqlite/thread.ts')).ThreadedSqliteStore(opts) : new (await import('./sqlite/store.ts')).SqliteStore(opts);
      await store.migrate();
      return store;
    }
    case 'postgres': {
      const { PostgresStore } = await import('./postgres/store.ts');
      const store = new PostgresStore({
        url: config.postgresUrl,
        poolSize: config.postgresPoolSize,
        statementTimeoutMs: config.postgresStatementTimeout,
        connectTimeoutMs: config.postgresConnectTimeout,
        connectRetries: config.postgresConnectRetries,
        connectBackoffMs: config.postgresConnectBackoff,
        logger,
        forwardTargets: activeTargets(config.xapiForwardings),
      });
      try {
        await store.waitForServer();
        await store.migrate();
      } catch (err) {
        await store.close();
        throw err;
      }
      return store;
    }
  }
}

export type { Store } from './types.ts';
