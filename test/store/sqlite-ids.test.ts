/**
 * SQLite keeps statement ids in four levels (migrations 10, 18 and 19): new ids in
 * statement_ids_new, merged into statement_ids_mid, that into statement_ids_upper, and that into
 * statement_ids, as idLevelsDue says. Through HTTP, a statement is the same statement in any level:
 * found by id, a conflict when posted again with other content, accepted again unchanged, voided,
 * reached by a StatementRef, erased (its id then free); and in the file, each id is in exactly one
 * level. The writer's filter of the merged levels (upper and large; ./ids.ts) never hides an id
 * there: not one merged by another server on the same file, nor one a server read when it built
 * its filter.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { ID_LEVELS, IdFilter, idLevelsDue, StatementIds } from '../../src/store/sqlite/ids.ts';
import { jsonInit, sqliteBackend, sqliteThreadBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { runCli } from '../lifecycle/helpers.ts';

const VOIDED = 'http://adlnet.gov/expapi/verbs/voided';
const RARE = 'http://example.com/verbs/rare';
const agent = (name: string) => ({ objectType: 'Agent', name, mbox: `mailto:${name}@example.com` });

/** Runs f on the test server's SQLite file, opened apart from the server. */
function onFile<T>(t: TestLrs, f: (db: DatabaseSync) => T): T {
  const db = new DatabaseSync(t.env.LECTERN_SQLITE_PATH);
  try {
    return f(db);
  } finally {
    db.close();
  }
}
/** Which levels hold a statement id. */
const levelsOf = (t: TestLrs, sid: string): string[] =>
  onFile(t, (db) => ID_LEVELS.filter((table) => db.prepare(`SELECT 1 FROM ${table} WHERE id = ?`).get(Buffer.from(sid.replaceAll('-', ''), 'hex'))));
/** The seq the next statement takes: jumping it makes the merges it passes due. */
const nextSeq = (t: TestLrs, seq: number) => onFile(t, (db) => db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'statements'").run(seq - 1));

for (const backend of [sqliteBackend, sqliteThreadBackend]) {
  describe(`SQLite statement ids in four levels [${backend.name}]`, () => {
    let t: TestLrs;
    const bodies = new Map<string, Record<string, unknown>>();
    /** Merged into the large level: a, b (its verb rare), c (voided later), d; into the upper one: e, f; into the middle one: g, h; recent: i. */
    const id = { a: randomUUID(), b: randomUUID(), c: randomUUID(), d: randomUUID(), e: randomUUID(), f: randomUUID(), g: randomUUID(), h: randomUUID(), i: randomUUID() };
    const first = idLevelsDue(0).upper + 1;
    const due = idLevelsDue(first);

    const file = <T>(f: (db: DatabaseSync) => T): T => onFile(t, f);
    const level = (sid: string) => levelsOf(t, sid);
    const put = (sid: string, body: Record<string, unknown>) => t.fetch(`/xAPI/statements?statementId=${sid}`, jsonInit('PUT', body));
    const store = async (sid: string, overrides: Record<string, unknown> = {}) => {
      const body = statement({ id: sid, actor: agent('ann'), ...overrides });
      bodies.set(sid, body);
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', body));
      assert.equal(res.status, 200, await res.text());
    };
    const get = (query: string) => t.fetch(`/xAPI/statements?${query}`);

    before(async () => {
      t = await startTestLrs(backend);
      await store(id.a);
      await store(id.b, { verb: { id: RARE } });
      await store(id.c);
      // The next statement's seq is past every threshold (no merge yet: 0), so its transaction
      // ends with the three merges.
      nextSeq(t, first);
      await store(id.d);
      await store(id.e);
      // Past the middle threshold: the recent ids go down two levels.
      nextSeq(t, first + due.middle);
      await store(id.f);
      await store(id.g);
      // Past the recent threshold only: they go to the middle level.
      nextSeq(t, first + due.middle + due.recent);
      await store(id.h);
      await store(id.i);
    });
    after(async () => t?.close());

    test('each merge moved the ids before it one level down; later ids wait in the recent one', () => {
      for (const sid of [id.a, id.b, id.c, id.d]) assert.deepEqual(level(sid), ['statement_ids'], sid);
      for (const sid of [id.e, id.f]) assert.deepEqual(level(sid), ['statement_ids_upper'], sid);
      for (const sid of [id.g, id.h]) assert.deepEqual(level(sid), ['statement_ids_mid'], sid);
      assert.deepEqual(level(id.i), ['statement_ids_new']);
      const m = file((db) => db.prepare('SELECT through, upper_through, big_through FROM id_merge').get() as Record<string, number>);
      assert.deepEqual([m.through, m.upper_through, m.big_through].map(Number), [first + due.middle + due.recent, first + due.middle, first]);
    });

    test('statements on both sides of the merge are found by id, and posting one again is a conflict or a no-op', async () => {
      for (const sid of [id.a, id.e, id.g, id.i]) {
        const res = await get(`statementId=${sid}`);
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as { id: string }).id, sid);
        assert.equal((await put(sid, bodies.get(sid)!)).status, 204, 'the same statement again');
        const other = await put(sid, { ...bodies.get(sid)!, verb: { id: 'http://example.com/verbs/other' } });
        assert.equal(other.status, 409, 'other content under a stored id');
        assert.match(JSON.stringify(await other.json()), new RegExp(sid));
      }
      const n = file((db) => (db.prepare('SELECT count(*) AS n FROM statements').get() as { n: number }).n);
      assert.equal(Number(n), 9);
    });

    test('a merged statement is voided, and a StatementRef to one reaches it', async () => {
      await store(randomUUID(), { actor: agent('admin'), verb: { id: VOIDED }, object: { objectType: 'StatementRef', id: id.c } });
      assert.equal((await get(`statementId=${id.c}`)).status, 404);
      assert.equal((await get(`voidedStatementId=${id.c}`)).status, 200);
      const ref = randomUUID();
      await store(ref, { verb: { id: 'http://example.com/verbs/commented' }, object: { objectType: 'StatementRef', id: id.b } });
      const res = await get(`verb=${encodeURIComponent(RARE)}`);
      assert.equal(res.status, 200);
      assert.deepEqual(
        ((await res.json()) as { statements: { id: string }[] }).statements.map((s) => s.id),
        [ref, id.b],
      );
    });

    test('erasure removes a statement from whichever level holds its id, and the id can be used again', async () => {
      const r = await runCli(t, ['erase', '--agent', JSON.stringify(agent('ann'))]);
      assert.equal(r.code, 0, r.stderr);
      for (const sid of [id.a, id.e, id.g, id.i]) {
        assert.deepEqual(level(sid), [], sid);
        assert.equal((await get(`statementId=${sid}`)).status, 404);
      }
      await store(id.a, { actor: agent('bo') });
      assert.deepEqual(level(id.a), ['statement_ids_new']);
      assert.equal((await get(`statementId=${id.a}`)).status, 200);
    });
  });
}

for (const backend of [sqliteBackend, sqliteThreadBackend]) {
  describe(`SQLite: the writer's filter of the merged id levels [${backend.name}]`, () => {
    let one: TestLrs;
    let two: TestLrs;
    const bodies = new Map<string, Record<string, unknown>>();
    const id = { a: randomUUID(), b: randomUUID(), c: randomUUID() };
    const store = async (t: TestLrs, sid: string) => {
      const body = statement({ id: sid, actor: agent('ann') });
      bodies.set(sid, body);
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', body));
      assert.equal(res.status, 200, await res.text());
    };
    const put = (t: TestLrs, sid: string, other: boolean) =>
      t.fetch(`/xAPI/statements?statementId=${sid}`, jsonInit('PUT', other ? { ...bodies.get(sid)!, verb: { id: 'http://example.com/verbs/other' } } : bodies.get(sid)!));

    before(async () => {
      one = await startTestLrs(backend);
      await store(one, id.a);
      // a merged into the large level by the first server (its filter takes it at the merge into the upper one).
      const first = idLevelsDue(0).upper + 1;
      nextSeq(one, first);
      await store(one, id.b);
      two = await startTestLrs(backend, { shareWith: one });
      // The second server's first write starts its filter; c is merged down to the large level by it.
      nextSeq(one, first + idLevelsDue(first).upper + 1);
      await store(two, id.c);
    });
    after(async () => {
      await two?.close();
      await one?.close();
    });

    test('an id another server merged is still a conflict', async () => {
      assert.equal((await put(one, id.c, true)).status, 409);
      assert.equal((await put(one, id.c, false)).status, 204);
      assert.equal((await put(one, id.a, true)).status, 409);
    });

    test('a server that read the merged levels into its filter finds every id there', async () => {
      await store(two, randomUUID()); // its build went on after each write; it holds a, b and c
      for (const sid of [id.a, id.b, id.c]) {
        assert.equal((await put(two, sid, true)).status, 409, sid);
        assert.equal((await put(two, sid, false)).status, 204, sid);
      }
    });
  });
}

test('the id filter never misses an id added, and is wrong about few others', () => {
  const filter = new IdFilter(0);
  const bytes = () => Buffer.from(randomUUID().replaceAll('-', ''), 'hex');
  // Past its first part (made for 2^20 ids) into a second.
  const added = Array.from({ length: 1_500_000 }, (_, i) => ({ tenant: i % 3, id: bytes() }));
  for (const a of added) filter.add(a.tenant, a.id);
  assert.ok(added.every((a) => filter.mayHave(a.tenant, a.id)));
  // Time-based ids share most of their bytes: they must not all look alike to it.
  const timeBased = (i: number) => Buffer.from(`${(0x1ec9f000 + i).toString(16).padStart(8, '0')}4e2a11ef8b6f0242ac120002`, 'hex');
  for (let i = 0; i < 100_000; i++) filter.add(1, timeBased(i));
  for (let i = 0; i < 100_000; i++) assert.ok(filter.mayHave(1, timeBased(i)));
  let wrong = 0;
  for (let i = 0; i < 100_000; i++) if (filter.mayHave(1, bytes()) || filter.mayHave(2, timeBased(i)) || filter.mayHave(1, timeBased(100_000 + i))) wrong++;
  assert.ok(wrong < 100_000 * 0.06, `${wrong} of 100,000 unknown ids looked known`);
});

test('the filter is built from the merged levels a step at a time, every id of every tenant in them', () => {
  const db = new DatabaseSync(':memory:');
  const level = (name: string) => `CREATE TABLE ${name} (tenant INTEGER NOT NULL, id BLOB NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tenant, id)) WITHOUT ROWID;`;
  db.exec(`CREATE TABLE statements (seq INTEGER PRIMARY KEY AUTOINCREMENT);
    ${level('statement_ids')} ${level('statement_ids_upper')}
    CREATE TABLE id_merge (one INTEGER PRIMARY KEY, through INTEGER NOT NULL, upper_through INTEGER NOT NULL, big_through INTEGER NOT NULL);
    INSERT INTO id_merge VALUES (1, 25000, 25000, 15000);`);
  const ids = Array.from({ length: 25_000 }, (_, i) => ({ tenant: (i % 2) + 1, id: Buffer.from(randomUUID().replaceAll('-', ''), 'hex') }));
  const large = db.prepare('INSERT INTO statement_ids VALUES (?, ?, ?)');
  const upper = db.prepare('INSERT INTO statement_ids_upper VALUES (?, ?, ?)');
  ids.forEach((r, i) => (i < 15_000 ? large : upper).run(r.tenant, r.id, i + 1));
  const levels = new StatementIds((sql) => db.prepare(sql));
  levels.check();
  assert.ok(levels.building);
  let steps = 1;
  while (levels.buildStep()) steps++;
  assert.equal(steps, 3, 'three steps of 10,000 ids');
  assert.ok(!levels.building);
  assert.ok(ids.every((r) => levels.mergedMayHave(r.tenant, r.id)));
  assert.ok(!ids.every((r) => levels.mergedMayHave(3 - r.tenant, r.id)), 'the tenant is part of what it holds');
  // Another connection merged into the upper level: lookups read the merged levels again until a new build ends.
  db.exec('UPDATE id_merge SET upper_through = 30000');
  levels.check();
  assert.ok(levels.building && levels.mergedMayHave(1, Buffer.alloc(16)));
});

describe('SQLite migration 19: a store of three id levels gets the upper one', () => {
  test('ids in the middle level stay found, and move down at the next merges', async () => {
    const t = await startTestLrs(sqliteBackend);
    try {
      const id = { a: randomUUID(), b: randomUUID(), c: randomUUID(), d: randomUUID(), e: randomUUID(), f: randomUUID() };
      const bodies = new Map<string, Record<string, unknown>>();
      const file = <T>(f: (db: DatabaseSync) => T): T => onFile(t, f);
      const level = (sid: string) => levelsOf(t, sid);
      const store = async (sid: string) => {
        const body = statement({ id: sid, actor: agent('ann') });
        bodies.set(sid, body);
        assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', body))).status, 200);
      };
      const first = idLevelsDue(0).upper + 1;
      const due = idLevelsDue(first);
      await store(id.a);
      nextSeq(t, first);
      await store(id.b); // a, b: large
      await store(id.c);
      nextSeq(t, first + due.middle);
      await store(id.d); // c, d: upper
      await store(id.e); // recent
      // Back to migration 18's layout: what the upper level holds was the middle level's.
      await t.lrs.close();
      file((db) =>
        db.exec(`INSERT INTO statement_ids_mid SELECT tenant, id, seq FROM statement_ids_upper;
          DROP VIEW statement_seqs; DROP TABLE statement_ids_upper;
          CREATE VIEW statement_seqs AS SELECT tenant, id, seq FROM statement_ids_new UNION ALL SELECT tenant, id, seq FROM statement_ids_mid UNION ALL SELECT tenant, id, seq FROM statement_ids;
          ALTER TABLE id_merge DROP COLUMN upper_through;
          DELETE FROM schema_migrations WHERE version = 19;`),
      );
      await t.restart();
      assert.deepEqual(level(id.c), ['statement_ids_mid']);
      const m = file((db) => db.prepare('SELECT upper_through, big_through FROM id_merge').get() as Record<string, number>);
      assert.deepEqual([m.upper_through, m.big_through].map(Number), [first, first], 'the upper level starts empty');
      const found = async () => {
        for (const sid of Object.values(id).filter((s) => bodies.has(s))) {
          assert.equal((await t.fetch(`/xAPI/statements?statementId=${sid}`)).status, 200, sid);
          assert.equal((await t.fetch(`/xAPI/statements?statementId=${sid}`, jsonInit('PUT', bodies.get(sid)!))).status, 204, sid);
          const other = await t.fetch(`/xAPI/statements?statementId=${sid}`, jsonInit('PUT', { ...bodies.get(sid)!, verb: { id: 'http://example.com/verbs/other' } }));
          assert.equal(other.status, 409, sid);
        }
      };
      await found();
      // The next merge that is due takes the middle level (its old ids with the new) into the upper one.
      nextSeq(t, first + due.middle + due.recent);
      await store(id.f);
      for (const sid of [id.c, id.d, id.e, id.f]) assert.deepEqual(level(sid), ['statement_ids_upper'], sid);
      assert.deepEqual(level(id.a), ['statement_ids']);
      await found();
    } finally {
      await t.close();
    }
  });
});
