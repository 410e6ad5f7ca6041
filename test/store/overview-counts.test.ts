/**
 * The Overview's counts at the store (src/store/overview.ts): on SQLite, whose `stored` follows
 * the store's clock, statements written on several days count on their own day; on every
 * backend, the migration that adds the counts (SQLite 16, PostgreSQL 17) backfills them from the
 * statements already stored — a store at the previous version (the tables dropped, the migration
 * forgotten) with statements on several days and in two stores, migrated again. A (store, day)
 * holds at most VERBS_PER_DAY verb rows and one "other" row, whatever the distinct verbs sent
 * (folded to the heaviest when full; a deletion takes a verb's statements off its row as far as it
 * holds them, the rest off "other"), and the migration that bounds them (SQLite 22, PostgreSQL
 * 23) folds the rows stored before.
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
import { dayOf, DAY_MS, FOLD_TO, OTHER_VERB, VERBS_PER_DAY } from '../../src/store/overview.ts';
import { PostgresStore } from '../../src/store/postgres/store.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/types.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';
import { createDatabase, dropDatabase, postgresSkipped } from '../helpers/postgres.ts';

const ADMIN: Actor = { objectType: 'Agent', mbox: 'mailto:admin@example.com' };
const made = (verb: string): Statement =>
  ({ id: randomUUID(), actor: ADMIN, verb: { id: `http://example.com/verbs/${verb}` }, object: { id: 'http://example.com/o' } }) as Statement;
const CAL: Actor = { objectType: 'Agent', mbox: 'mailto:cal@example.com' };
/** Writes one statement per verb (one group); answers their ids. */
async function write(store: Store, tenant: string, verbs: string[], actor = ADMIN): Promise<string[]> {
  const statements = verbs.map((v) => ({ ...made(v), actor }));
  await store.insertStatements(tenant, prepareBatch(statements, actor, '1.0.3'), []);
  return statements.map((s) => s.id!);
}

interface Opened {
  store: Store;
  /** Runs SQL on the database directly (the store closed or not). */
  sql(text: string): Promise<void>;
  /** Reads the database directly. */
  rows(text: string): Promise<Record<string, unknown>[]>;
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
    async rows(text) {
      const db = new DatabaseSync(path);
      const found = db.prepare(text).all() as Record<string, unknown>[];
      db.close();
      return found;
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
    async rows(text) {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      const r = await c.query(text);
      await c.end();
      return r.rows as Record<string, unknown>[];
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
    assert.deepEqual(perDay(o.days, clock.now()), [
      [2, 2],
      [1, 4],
      [0, 1],
    ]);
    assert.deepEqual(
      o.topVerbs.map((v) => [v.verb.slice(-1), v.statements]),
      [
        ['a', 3],
        ['b', 2],
        ['c', 2],
      ],
    );
    assert.equal(o.lastStoredMs, clock.now());
    assert.deepEqual(await store.storeTotals(dayOf(clock.now()) - 1), [
      { target: '', statements: 7, recent: 5 },
      { target: 'other', statements: 1, recent: 1 },
    ]);
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
      assert.deepEqual(perDay(o.days, nowMs), [
        [3, 2],
        [1, 1],
        [0, 2],
      ]);
      assert.deepEqual(
        o.topVerbs.map((v) => [v.verb.slice(-1), v.statements]),
        [
          ['a', 2],
          ['b', 2],
          ['c', 1],
        ],
      );
      assert.deepEqual(o.minutes, [], 'the minutes count arrivals from the migration on');
      assert.equal((await store.storeOverview('t2', query(nowMs))).statements, 1);
      // Counting goes on from the backfilled counts.
      await write(store, '', ['c']);
      const later = await store.storeOverview('', query(nowMs));
      assert.equal(later.statements, 6);
      assert.deepEqual(
        later.topVerbs.map((v) => [v.verb.slice(-1), v.statements]),
        [
          ['a', 2],
          ['b', 2],
          ['c', 2],
        ],
      );
    });
  });
}

/** The count rows of each (store, day), read from the database: its verb rows, and the "other" row's count. */
async function countRows(opened: Opened, store: string): Promise<[verbs: number, other: number][]> {
  const found = await opened.rows(
    `SELECT c.day, sum(CASE WHEN c.verb = ${OTHER_VERB} THEN 0 ELSE 1 END) AS verbs, sum(CASE WHEN c.verb = ${OTHER_VERB} THEN c.n ELSE 0 END) AS other ` +
      `FROM statement_counts c JOIN tenants t ON t.id = c.tenant WHERE t.name = '${store}' GROUP BY c.day ORDER BY c.day`,
  );
  return found.map((r) => [Number(r.verbs), Number(r.other)]);
}

/** The migration that bounds a day's verbs, on each backend. */
const foldVersion: Record<string, number> = { sqlite: 22, postgres: 23 };
const names = (prefix: string, n: number, from = 0) => Array.from({ length: n }, (_, i) => `${prefix}${String(from + i).padStart(4, '0')}`);

for (const [name, open, _version] of backends) {
  describe(`a day's verbs bounded by VERBS_PER_DAY, the rest in "other" [${name}]`, () => {
    let opened: Opened | undefined;
    after(async () => {
      await opened?.store.close();
      await opened?.dispose();
    });

    test('a day full of verbs folds to the heaviest; a deletion takes a verb off its row, the rest off "other"; exact totals', async () => {
      opened = await open();
      const { store } = opened;
      const nowMs = Date.now();
      // VERBS_PER_DAY verbs of two statements each: the day is full, nothing folded yet.
      const twice = names('v', VERBS_PER_DAY);
      await write(store, '', [...twice, ...twice]);
      assert.deepEqual(await countRows(opened, ''), [[VERBS_PER_DAY, 0]]);
      // One more verb (Cal's): the day folds to the FOLD_TO heaviest, the older key first among equals.
      const calIds = await write(store, '', ['late'], CAL);
      assert.deepEqual(await countRows(opened, ''), [[FOLD_TO, 2 * (VERBS_PER_DAY - FOLD_TO) + 1]]);
      let o = await store.storeOverview('', query(nowMs));
      assert.equal(o.statements, 2 * VERBS_PER_DAY + 1);
      assert.deepEqual(
        o.topVerbs.slice(0, 2).map((v) => [v.verb.split('/').pop(), v.statements]),
        [
          ['v0000', 2],
          ['v0001', 2],
        ],
      );
      assert.equal(o.otherVerbs, 2 * VERBS_PER_DAY + 1 - 10 * 2, 'every statement not of the ten listed');
      // Cal's verb again: it gets a row now (there is room), its first statement staying in "other".
      calIds.push(...(await write(store, '', ['late'], CAL)));
      assert.deepEqual(await countRows(opened, ''), [[FOLD_TO + 1, 2 * (VERBS_PER_DAY - FOLD_TO) + 1]]);
      // Deleting Cal's two takes one off its row (all it holds: the row goes) and the other off "other".
      assert.equal((await store.deleteStatements('', calIds)).statements, 2);
      assert.deepEqual(await countRows(opened, ''), [[FOLD_TO, 2 * (VERBS_PER_DAY - FOLD_TO)]]);
      o = await store.storeOverview('', query(nowMs));
      assert.equal(o.statements, 2 * VERBS_PER_DAY);
      assert.equal(o.otherVerbs, 2 * VERBS_PER_DAY - 10 * 2);
    });

    test('a group of more new verbs than there is room for: its heaviest get rows, the rest go to "other"', async () => {
      const { store } = opened!;
      await write(store, 'g', [...names('w', 3 * VERBS_PER_DAY), 'heavy', 'heavy', 'heavy', 'next', 'next']);
      assert.deepEqual(await countRows(opened!, 'g'), [[FOLD_TO, 3 * VERBS_PER_DAY + 5 - FOLD_TO - 3]], 'heavy (3), next (2) and 48 others keep a row');
      const o = await store.storeOverview('g', query(Date.now()));
      assert.deepEqual(
        o.topVerbs.slice(0, 2).map((v) => [v.verb.split('/').pop(), v.statements]),
        [
          ['heavy', 3],
          ['next', 2],
        ],
      );
      assert.equal(o.statements, 3 * VERBS_PER_DAY + 5);
      assert.equal(o.topVerbs.reduce((n, v) => n + v.statements, 0) + o.otherVerbs, o.statements);
    });

    test(`the migration (${foldVersion[name]}) folds the days stored before into their ${VERBS_PER_DAY} heaviest verbs and "other"`, async () => {
      const { store } = opened!;
      await write(store, 'm', [...names('m', VERBS_PER_DAY + 30), 'top', 'top']);
      await store.close();
      // As before the bound: a row per verb of the day, counted from the statements.
      await opened!.sql(`DELETE FROM statement_counts; DELETE FROM schema_migrations WHERE version = ${foldVersion[name]};
INSERT INTO statement_counts (tenant, day, verb, n) SELECT tenant, stored_ms / 86400000, verb, count(*) FROM statements GROUP BY 1, 2, 3`);
      assert.deepEqual(await countRows(opened!, 'm'), [[VERBS_PER_DAY + 31, 0]]);
      opened!.store = await opened!.reopen();
      assert.deepEqual(await countRows(opened!, 'm'), [[VERBS_PER_DAY, 31]], 'top (2) and 99 others keep a row');
      assert.deepEqual(await countRows(opened!, 'g'), [[VERBS_PER_DAY, 3 * VERBS_PER_DAY + 5 - VERBS_PER_DAY - 3]]);
      assert.deepEqual(await countRows(opened!, ''), [[VERBS_PER_DAY, 0]], 'a day within the bound is left as it was');
      const o = await opened!.store.storeOverview('m', query(Date.now()));
      assert.deepEqual(
        o.topVerbs.slice(0, 2).map((v) => [v.verb.split('/').pop(), v.statements]),
        [
          ['top', 2],
          ['m0000', 1],
        ],
      );
      assert.equal(o.statements, VERBS_PER_DAY + 32);
      assert.equal(o.otherVerbs, VERBS_PER_DAY + 32 - 2 - 9);
    });
  });
}
