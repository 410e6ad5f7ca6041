/** Opens a backend, its schema migrated. Only that backend's driver is loaded. */
import type { PostgresOptions } from './postgres/store.ts';
import type { SqliteOptions } from './sqlite/connection.ts';
import type { ThreadedSqliteOptions } from './sqlite/thread.ts';
import type { Store } from './types.ts';

/**
 * What a backend needs, each with its own tuning defaults (an option left out takes the
 * backend's). SQLite writes on a thread of its own with `writerThread` (never for `:memory:`: one
 * in-memory database cannot be shared by two threads' connections).
 */
export type StoreOptions =
  | ({ backend: 'sqlite'; writerThread?: false } & SqliteOptions)
  | ({ backend: 'sqlite'; writerThread: true } & ThreadedSqliteOptions)
  | ({ backend: 'postgres' } & PostgresOptions);

export async function openStore(options: StoreOptions): Promise<Store> {
  switch (options.backend) {
    case 'sqlite': {
      const { backend: _, writerThread, ...opts } = options;
      const store =
        writerThread && opts.path !== ':memory:'
          ? new (await import('./sqlite/thread.ts')).ThreadedSqliteStore(opts as ThreadedSqliteOptions)
          : new (await import('./sqlite/store.ts')).SqliteStore(opts as SqliteOptions);
      await store.migrate();
      return store;
    }
    default: {
      const { PostgresStore } = await import('./postgres/store.ts');
      const { backend: _, ...opts } = options satisfies { backend: 'postgres' };
      const store = new PostgresStore(opts);
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
