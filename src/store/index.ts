/** Opens the configured backend. */
import type { Config } from '../config.ts';
import { SqliteStore } from './sqlite/store.ts';
import type { Store } from './types.ts';

export async function openStore(config: Config): Promise<Store> {
  switch (config.backend) {
    case 'sqlite': {
      const store = new SqliteStore({ path: config.sqlitePath, synchronous: config.sqliteSynchronous });
      await store.migrate();
      return store;
    }
    case 'postgres':
      throw new Error('the postgres backend is not available yet');
  }
}

export type { Store } from './types.ts';
