/**
 * Store-level tests on every backend: a fresh migrated store (SQLite file, or a PostgreSQL database
 * on the throwaway cluster) and its disposal.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PostgresStore } from '../../src/store/postgres/store.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/types.ts';
import { createDatabase, dropDatabase, postgresSkipped } from './postgres.ts';

export interface StoreBackend {
  name: string;
  /** `forwardTargets`: forwarding target urls whose outbox rows the store writes. */
  open(opts?: { forwardTargets?: string[] }): Promise<{ store: Store; dispose(): Promise<void> }>;
}

export const storeBackends: StoreBackend[] = [
  {
    name: 'sqlite',
    async open(opts = {}) {
      const dir = mkdtempSync(join(tmpdir(), 'lectern-store-'));
      const store = new SqliteStore({ path: join(dir, 'x.sqlite'), synchronous: 'NORMAL', ...opts });
      await store.migrate();
      return { store, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
];
if (!postgresSkipped()) {
  storeBackends.push({
    name: 'postgres',
    async open(opts = {}) {
      const url = await createDatabase();
      const store = new PostgresStore({ url, poolSize: 2, statementTimeoutMs: 0, connectTimeoutMs: 5000, connectRetries: 0, connectBackoffMs: 0, ...opts });
      await store.waitForServer();
      await store.migrate();
      return { store, dispose: () => dropDatabase(url) };
    },
  });
}
