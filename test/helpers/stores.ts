/**
 * Store-level tests on every backend: a fresh migrated store (SQLite file, or a PostgreSQL database
 * on the throwaway cluster) and its disposal.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../../src/clock.ts';
import { PostgresStore } from '../../src/store/postgres/store.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/types.ts';
import { createDatabase, dropDatabase, postgresSkipped } from './postgres.ts';

export interface StoreBackend {
  name: string;
  /**
   * Whether `stored` is the database's clock (PostgreSQL: every process agrees on it), so that
   * the `clock` option does not set it and distinct stored times still take real time.
   */
  storedByDatabase: boolean;
  /** `forwardTargets`: forwarding target urls whose outbox rows the store writes; `clock`: the store's clock. */
  open(opts?: { forwardTargets?: string[]; clock?: Clock }): Promise<{ store: Store; dispose(): Promise<void> }>;
}

/** Distinct `stored` milliseconds for what is written next: the manual clock moves on, or (database clock) a few milliseconds pass. */
export async function nextStoredMs(backend: StoreBackend, clock: { advance(ms: number): void }, ms = 3): Promise<void> {
  if (backend.storedByDatabase) await new Promise((r) => setTimeout(r, ms));
  else clock.advance(ms);
}

export const storeBackends: StoreBackend[] = [
  {
    name: 'sqlite',
    storedByDatabase: false,
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
    storedByDatabase: true,
    async open(opts = {}) {
      const url = await createDatabase();
      const store = new PostgresStore({ url, poolSize: 2, statementTimeoutMs: 0, connectTimeoutMs: 5000, connectRetries: 0, connectBackoffMs: 0, ...opts });
      await store.waitForServer();
      await store.migrate();
      return { store, dispose: () => dropDatabase(url) };
    },
  });
}
