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
import type { Store } from '../../src/store/types.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const postgres = storeBackends.find((b) => b.name === 'postgres');

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
        Array.from({ length: 250 }, () => ({ id: randomUUID(), actor: { mbox: `mailto:${randomUUID()}@example.com` }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } }) as Statement);
      for (let i = 0; i < 4; i++) await store.insertStatements('', prepareBatch(batch(), { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
      // The ANALYZE runs in the background: wait for it (autovacuum would take a minute or more).
      for (let i = 0; i < 400 && (await analyzes()) <= before; i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok((await analyzes()) > before, 'the statement tables were analyzed');
    } finally {
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
