/**
 * PostgreSQL Consistent-Through: requests that ask at the same time share one query (it scans
 * pg_locks and pg_stat_activity), and the answer stays a true bound: a call made after a write
 * was acknowledged runs its own query and covers that write. Also the store's upkeep around it:
 * planner statistics that follow a fast-growing store, and connections that never leave an error
 * event unheard.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, mock, test } from 'node:test';
import pg from 'pg';
import { ManualClock } from '../../src/clock.ts';
import type { Store } from '../../src/store/types.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const postgres = storeBackends.find((b) => b.name === 'postgres');

/** `n` new statements, each with its own actor and activity, in batches of 250. */
async function insertNew(store: Store, n: number): Promise<void> {
  for (let left = n; left > 0; left -= 250) {
    const batch = Array.from(
      { length: Math.min(250, left) },
      () =>
        ({
          id: randomUUID(),
          actor: { mbox: `mailto:${randomUUID()}@example.com` },
          verb: { id: 'http://example.com/v' },
          object: { id: `http://example.com/a/${randomUUID()}` },
        }) as Statement,
    );
    await store.insertStatements('', prepareBatch(batch, { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
  }
}

describe('PostgreSQL consistent-through', { skip: postgres ? false : 'PostgreSQL skipped' }, () => {
  let store: Store;
  let dispose: () => Promise<void>;
  before(async () => {
    ({ store, dispose } = await postgres!.open());
  });
  after(async () => {
    await store?.close();
    await dispose?.();
  });

  const throughQueries = () => {
    const original = pg.Client.prototype.query as (...a: unknown[]) => unknown;
    let n = 0;
    const spy = mock.method(pg.Client.prototype, 'query', function (this: pg.Client, ...args: unknown[]) {
      const q = args[0] as { name?: string } | string;
      if (typeof q === 'object' && q?.name === 'consistent_through') n++;
      return original.apply(this, args);
    });
    return { count: () => n, restore: () => spy.mock.restore() };
  };

  test('calls made together share one query; each later call asks again', async () => {
    const spy = throughQueries();
    try {
      const together = await Promise.all(Array.from({ length: 20 }, () => store.consistentThrough('')));
      assert.equal(spy.count(), 1, 'one query for twenty concurrent calls');
      assert.equal(new Set(together.map((d) => d.getTime())).size, 1);
      await store.consistentThrough('');
      await store.consistentThrough('other-tenant');
      assert.equal(spy.count(), 3, 'a call after the shared one settled, and another tenant, query again');
    } finally {
      spy.restore();
    }
  });

  test('a call made after a write was acknowledged covers it', async () => {
    const s = { id: randomUUID(), actor: { mbox: 'mailto:t@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } } as Statement;
    await store.insertStatements('', prepareBatch([s], { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
    const stored = await store.getStatement('', s.id!, false);
    assert.ok(stored);
    // A little later than the write's clock (through is one millisecond before the query's now).
    await new Promise((r) => setTimeout(r, 5));
    const through = await store.consistentThrough('');
    assert.ok(through.getTime() >= stored.storedMs, `through ${through.toISOString()} covers stored ${new Date(stored.storedMs).toISOString()}`);
  });
});

describe('PostgreSQL planner statistics keep up with a growing store', { skip: postgres ? false : 'PostgreSQL skipped' }, () => {
  test('after a thousand statements the statement tables are analyzed, without waiting for autovacuum', async () => {
    const { store, dispose } = await postgres!.open();
    const url = (store as unknown as { opts: { url: string } }).opts.url;
    const analyzes = async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        const r = await c.query<{ n: string }>("SELECT analyze_count AS n FROM pg_stat_user_tables WHERE relname = 'statement_agents'");
        return Number(r.rows[0].n);
      } finally {
        await c.end();
      }
    };
    try {
      const before = await analyzes();
      const batch = () =>
        Array.from(
          { length: 250 },
          () =>
            ({
              id: randomUUID(),
              actor: { mbox: `mailto:${randomUUID()}@example.com` },
              verb: { id: 'http://example.com/v' },
              object: { id: 'http://example.com/a' },
            }) as Statement,
        );
      for (let i = 0; i < 4; i++) await store.insertStatements('', prepareBatch(batch(), { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
      // The ANALYZE runs in the background: wait for it (autovacuum would take a minute or more).
      for (let i = 0; i < 400 && (await analyzes()) <= before; i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok((await analyzes()) > before, 'the statement tables were analyzed');
    } finally {
      await store.close();
      await dispose();
    }
  });

  test('a VACUUM holding the tables is neither waited for nor cancelled: the ANALYZE gives way and runs later', async () => {
    const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
    const { store, dispose } = await postgres!.open({ clock });
    const url = (store as unknown as { opts: { url: string } }).opts.url;
    const admin = new pg.Client({ connectionString: url });
    const vacuum = new pg.Client({ connectionString: url });
    await admin.connect();
    await vacuum.connect();
    // Each ANALYZE the store sends, and whether it has settled.
    const original = pg.Client.prototype.query as (...a: unknown[]) => unknown;
    const sent: Promise<unknown>[] = [];
    const spy = mock.method(pg.Client.prototype, 'query', function (this: pg.Client, ...args: unknown[]) {
      const out = original.apply(this, args);
      if (this !== admin && typeof args[0] === 'string' && args[0].startsWith('ANALYZE') && out instanceof Promise) sent.push(out.catch(() => undefined));
      return out;
    });
    const analyzes = async () => Number((await admin.query<{ n: string }>("SELECT analyze_count AS n FROM pg_stat_user_tables WHERE relname = 'statement_agents'")).rows[0].n);
    const insert = (n: number) => insertNew(store, n);
    try {
      const before = await analyzes();
      // The lock a VACUUM (or autovacuum) holds on the table for its whole run.
      await vacuum.query('BEGIN');
      await vacuum.query('LOCK TABLE statement_agents IN SHARE UPDATE EXCLUSIVE MODE');
      await insert(1000);
      for (let i = 0; i < 400 && sent.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
      assert.equal(sent.length, 1, 'the ANALYZE was tried');
      await Promise.all(sent); // settles while the lock is still held: it gave way
      await insert(1000);
      assert.equal(sent.length, 1, 'not tried again at once');
      await vacuum.query('COMMIT');
      assert.equal(await analyzes(), before, 'nothing was analyzed meanwhile');
      clock.advance(31_000);
      await insert(10);
      for (let i = 0; i < 400 && (await analyzes()) <= before; i++) await new Promise((r) => setTimeout(r, 50));
      assert.equal(sent.length, 2, 'tried again once the wait was over');
      assert.ok((await analyzes()) > before, 'and the statement tables were analyzed');
    } finally {
      spy.mock.restore();
      await vacuum.end();
      await admin.end();
      await store.close();
      await dispose();
    }
  });
});

describe('PostgreSQL autovacuum keeps the newest statements readable from the indexes alone', { skip: postgres ? false : 'PostgreSQL skipped' }, () => {
  test("a statement table is due for a vacuum once 1 % of its rows are new (PostgreSQL's default waits for a fifth)", async () => {
    const { store, dispose } = await postgres!.open();
    const url = (store as unknown as { opts: { url: string } }).opts.url;
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const tables = ['statements', 'statement_agents', 'statement_activities'];
    const insert = (n: number) => insertNew(store, n);
    try {
      await insert(3000);
      // Once the sessions have reported those inserts (an idle one within PostgreSQL's 10 s idle
      // stats interval), a vacuum counts the rows (reltuples) and starts the count of new ones again.
      for (let i = 0; ; i++) {
        await c.query('SELECT pg_stat_clear_snapshot()');
        const r = await c.query<{ n: string }>("SELECT n_tup_ins AS n FROM pg_stat_user_tables WHERE relname = 'statements'");
        if (Number(r.rows[0].n) >= 3000) break;
        assert.ok(i < 1000, 'the inserts were reported');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await c.query(`VACUUM ${tables.join(', ')}`);
      await insert(1100);
      const state = async () =>
        (
          await c.query<{ relname: string; inserted: string; tuples: number; scale: string; threshold: string }>(
            `SELECT s.relname, s.n_ins_since_vacuum AS inserted, c.reltuples AS tuples,
             coalesce((SELECT split_part(o, '=', 2) FROM unnest(c.reloptions) o WHERE o LIKE 'autovacuum_vacuum_insert_scale_factor=%'), current_setting('autovacuum_vacuum_insert_scale_factor')) AS scale,
             current_setting('autovacuum_vacuum_insert_threshold') AS threshold
           FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = ANY($1) ORDER BY s.relname`,
            [tables],
          )
        ).rows.map((r) => ({ table: r.relname, inserted: Number(r.inserted), limit: (scale: number) => Number(r.threshold) + scale * r.tuples, scale: Number(r.scale) }));
      for (let i = 0; ; i++) {
        await c.query('SELECT pg_stat_clear_snapshot()');
        const rows = await state();
        const notDue = rows.filter((t) => t.inserted <= t.limit(t.scale));
        if (rows.length === tables.length && notDue.length === 0) {
          const statements = rows.find((t) => t.table === 'statements')!;
          assert.ok(statements.inserted <= statements.limit(0.2), "with PostgreSQL's default the statements table would not be due yet");
          break;
        }
        assert.ok(i < 1000, `not due for autovacuum: ${JSON.stringify(notDue)}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await c.end();
      await store.close();
      await dispose();
    }
  });
});

describe('PostgreSQL connections', { skip: postgres ? false : 'PostgreSQL skipped' }, () => {
  test('an error on a checked-out connection with no query in flight does not crash the process', async () => {
    const { store, dispose } = await postgres!.open();
    const pool = (store as unknown as { pool: pg.Pool }).pool;
    const client = await pool.connect();
    try {
      // What pg does when the server ends the session (57P01) between two queries of a transaction.
      const fatal = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
      assert.doesNotThrow(() => client.emit('error', fatal), 'an unheard error event would throw (and crash the server)');
    } finally {
      client.release(true);
      await store.close();
      await dispose();
    }
  });
});
