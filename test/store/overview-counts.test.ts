/**
 * The Overview's counts at the store (src/store/overview.ts): on SQLite, whose `stored` follows
 * the store's clock, statements written on several days count on their own day; on every
 * backend, the migration that adds the counts (SQLite 16, PostgreSQL 17) backfills them from the
 * statements already stored — a store at the previous version (the tables dropped, the migration
 * forgotten) with statements on several days and in two stores, migrated again.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { ManualClock } from '../../src/clock.ts';
import { dayOf, DAY_MS } from '../../src/store/overview.ts';
import { PostgresStore } from '../../src/store/postgres/store.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/types.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';
import { createDatabase, dropDatabase, postgresSkipped } from '../helpers/postgres.ts';

const ADMIN: Actor = { objectType: 'Agent', mbox: 'mailto:admin@example.com' };
const made = (verb: string): Statement => ({ id: randomUUID(), actor: ADMIN, verb: { id: `http://example.com/verbs/${verb}` }, object: { id: 'http://example.com/o' } }) as Statement;
const write = (store: Store, tenant: string, verbs: string[]) => store.insertStatements(tenant, prepareBatch(verbs.map(made), ADMIN, '1.0.3'), []);

interface Opened {
  store: Store;
  /** Runs SQL on the database directly (the store closed or not). */
  sql(text: string): Promise<void>;
  reopen(): Promise<Store>;
  dispose(): Promise<void>;
}

async function openSqlite(clock?: ManualClock): Promise<Opened> {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-overview-'));
  const path = join(dir, 'x.sqlite');
  const open = async () => {
    const s = new SqliteStore({ path, synchronous: 'NORMAL', clock });
    await s.migrate();
    return s;
  };
  return {
    store: await open(),
    async sql(text) {
      const db = new DatabaseSync(path);
      db.exec(text);
      db.close();
    },
    reopen: open,
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function openPostgres(): Promise<Opened> {
  const url = await createDatabase();
  const open = async () => {
    const s = new PostgresStore({ url, poolSize: 2, statementTimeoutMs: 0, connectTimeoutMs: 5000, connectRetries: 0, connectBackoffMs: 0 });
    await s.waitForServer();
    await s.migrate();
    return s;
  };
  return {
    store: await open(),
    async sql(text) {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(text);
      await c.end();
    },
    reopen: open,
    dispose: () => dropDatabase(url),
  };
}

const query = (nowMs: number) => ({ sinceDay: dayOf(nowMs) - 29, sinceMinute: Math.floor(nowMs / 60_000) - 14, topVerbs: 10, rejectionsSinceMs: nowMs - DAY_MS });
const perDay = (days: { day: number; statements: number }[], nowMs: number) => days.map((d) => [dayOf(nowMs) - d.day, d.statements]);

describe('Overview counts on SQLite: a statement counts on the UTC day of its `stored`', () => {
  let opened: Opened | undefined;
  after(async () => {
    await opened?.store.close();
    await opened?.dispose();
  });

  test('statements written on three days, one of them twice', async () => {
    const clock = new ManualClock(Date.now() - 2 * DAY_MS);
    opened = await openSqlite(clock);
    const { store } = opened;
    await write(store, '', ['a', 'a']);
    clock.advance(DAY_MS);
    await write(store, '', ['b']);
    await write(store, '', ['a', 'b', 'c']);
    clock.advance(DAY_MS);
    await write(store, '', ['c']);
    await write(store, 'other', ['a']);
    const o = await store.storeOverview('', query(clock.now()));
    assert.equal(o.statements, 7);
    assert.deepEqual(perDay(o.days, clock.now()), [[2, 2], [1, 4], [0, 1]]);
    assert.deepEqual(o.topVerbs.map((v) => [v.verb.slice(-1), v.statements]), [['a', 3], ['b', 2], ['c', 2]]);
    assert.equal(o.lastStoredMs, clock.now());
    assert.deepEqual(await store.storeTotals(dayOf(clock.now()) - 1), [{ target: '', statements: 7, recent: 5 }, { target: 'other', statements: 1, recent: 1 }]);
  });
});

const backends: [string, () => Promise<Opened>, number][] = [['sqlite', () => openSqlite(), 16]];
if (!postgresSkipped()) backends.push(['postgres', openPostgres, 17]);

for (const [name, open, version] of backends) {
  describe(`the Overview counts' migration backfills them [${name}]`, () => {
    let opened: Opened | undefined;
    after(async () => {
      await opened?.store.close();
      await opened?.dispose();
    });

    test('a store at the previous version, with statements on several days and in two stores, migrated', async () => {
      opened = await open();
      let store = opened.store;
      await write(store, '', ['a', 'a', 'b']);
      await write(store, '', ['b', 'c']);
      await write(store, 't2', ['a']);
      const nowMs = Date.now();
      await store.close();
      // The previous version: no counts; the first statements stored 3 days ago, the next one yesterday.
      await opened.sql(`DROP TABLE statement_counts; DROP TABLE statement_minutes; DELETE FROM schema_migrations WHERE version = ${version};
UPDATE statements SET stored_ms = stored_ms - ${3 * DAY_MS} WHERE seq IN (SELECT seq FROM statements ORDER BY seq LIMIT 2);
UPDATE statements SET stored_ms = stored_ms - ${DAY_MS} WHERE seq = (SELECT seq FROM statements ORDER BY seq LIMIT 1 OFFSET 2)`);
      opened.store = store = await opened.reopen();
      const o = await store.storeOverview('', query(nowMs));
      assert.equal(o.statements, 5);
      assert.deepEqual(perDay(o.days, nowMs), [[3, 2], [1, 1], [0, 2]]);
      assert.deepEqual(o.topVerbs.map((v) => [v.verb.slice(-1), v.statements]), [['a', 2], ['b', 2], ['c', 1]]);
      assert.deepEqual(o.minutes, [], 'the minutes count arrivals from the migration on');
      assert.equal((await store.storeOverview('t2', query(nowMs))).statements, 1);
      // Counting goes on from the backfilled counts.
      await write(store, '', ['c']);
      const later = await store.storeOverview('', query(nowMs));
      assert.equal(later.statements, 6);
      assert.deepEqual(later.topVerbs.map((v) => [v.verb.slice(-1), v.statements]), [['a', 2], ['b', 2], ['c', 2]]);
    });
  });
}
