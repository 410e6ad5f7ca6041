/**
 * The store's own write path (insertStatements: group commit, insert rules, dictionaries, link
 * rows, reach) without HTTP, on SQLite in this thread and on the writer thread, and on PostgreSQL (a durable throwaway cluster): `callers`
 * concurrent callers each storing batches of `per` prepared statements into a fresh file. What a
 * refactoring of src/store/ must not slow down (issue 28).
 *
 *   node bench/store-write.ts [statements=20000] [per=100] [callers=4] [sqlite|postgres|all]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/store.ts';
import { SqliteStore } from '../src/store/sqlite/store.ts';
import { ThreadedSqliteStore } from '../src/store/sqlite/thread.ts';
import type { Store } from '../src/store/types.ts';
import { prepareStatement } from '../src/xapi/statement.ts';
import type { Actor, Statement } from '../src/xapi/types.ts';
import { statement } from './generate.ts';
import { startPostgres } from './harness.ts';

const N = Number(process.argv[2] ?? 20_000),
  PER = Number(process.argv[3] ?? 100),
  CALLERS = Number(process.argv[4] ?? 4);
const authority: Actor = { objectType: 'Agent', mbox: 'mailto:bench@example.com' };
const batches = Array.from({ length: Math.ceil(N / PER) }, (_, b) =>
  Array.from({ length: Math.min(PER, N - b * PER) }, (_, i) => prepareStatement(statement(20261123, b * PER + i) as unknown as Statement, authority, '1.0.3')),
);

async function run(label: string, open: (path: string) => Store): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-store-write-'));
  const store = open(join(dir, 'lectern.sqlite'));
  await store.migrate();
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (next < batches.length) await store.insertStatements('', batches[next++], []);
    }),
  );
  const s = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  // CPU of this process (every thread): steadier than the rate on a shared machine.
  console.log(
    `${label.padEnd(16)} ${Math.round(N / s)
      .toLocaleString('en')
      .padStart(8)} statements/s  ${((cpu.user + cpu.system) / N).toFixed(1).padStart(6)} µs CPU/statement`,
  );
}

const which = process.argv[5] ?? 'sqlite';
if (which !== 'postgres') {
  await run('sqlite', (path) => new SqliteStore({ path }));
  await run('sqlite-thread', (path) => new ThreadedSqliteStore({ path }));
}
if (which !== 'sqlite') {
  const cluster = await startPostgres();
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    let n = 0;
    await run('postgres', () => {
      const db = `store_write_${n++}`;
      const url = cluster.url.replace(/\/[^/?]*(\?|$)/, `/${db}$1`);
      const store = new PostgresStore({ url, poolSize: 10, statementTimeoutMs: 0, connectTimeoutMs: 10_000, connectRetries: 0, connectBackoffMs: 100 });
      return Object.assign(store, {
        migrate: async () => {
          await admin.query(`CREATE DATABASE ${db}`);
          await PostgresStore.prototype.migrate.call(store);
        },
      });
    });
    await admin.end();
  } finally {
    cluster.destroy();
  }
}
