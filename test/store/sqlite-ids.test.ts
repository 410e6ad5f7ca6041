/**
 * SQLite keeps statement ids in two levels (migration 10): new ids in statement_ids_new, moved into
 * statement_ids in one merge once idMergeDue statements have arrived. Through HTTP, a statement
 * is the same statement on either side of a merge: found by id, a conflict when posted again with
 * other content, accepted again unchanged, voided, reached by a StatementRef, erased (its id then
 * free); and in the file, each id is in exactly one level.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { idMergeDue } from '../../src/store/sqlite/store.ts';
import { jsonInit, sqliteBackend, sqliteThreadBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { runCli } from '../lifecycle/helpers.ts';

const VOIDED = 'http://adlnet.gov/expapi/verbs/voided';
const RARE = 'http://example.com/verbs/rare';
const agent = (name: string) => ({ objectType: 'Agent', name, mbox: `mailto:${name}@example.com` });

for (const backend of [sqliteBackend, sqliteThreadBackend]) {
  describe(`SQLite statement ids in two levels [${backend.name}]`, () => {
    let t: TestLrs;
    const bodies = new Map<string, Record<string, unknown>>();
    /** Before the merge: a, b (its verb rare), c (voided later); after it: d, e. */
    const id = { a: randomUUID(), b: randomUUID(), c: randomUUID(), d: randomUUID(), e: randomUUID() };

    const file = <T>(f: (db: DatabaseSync) => T): T => {
      const db = new DatabaseSync(t.env.LECTERN_SQLITE_PATH);
      try {
        return f(db);
      } finally {
        db.close();
      }
    };
    const level = (sid: string): string[] =>
      file((db) =>
        ['statement_ids_new', 'statement_ids'].filter((table) => db.prepare(`SELECT 1 FROM ${table} WHERE id = ?`).get(Buffer.from(sid.replaceAll('-', ''), 'hex'))),
      );
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
      // The next statement's seq is idMergeDue(0) past the last merge (none yet: 0), so its
      // transaction ends with a merge.
      file((db) => db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'statements'").run(idMergeDue(0)));
      await store(id.d);
      await store(id.e);
    });
    after(async () => t?.close());

    test('the merge moved every earlier id into the large level; later ids wait in the new one', () => {
      for (const sid of [id.a, id.b, id.c, id.d]) assert.deepEqual(level(sid), ['statement_ids'], sid);
      assert.deepEqual(level(id.e), ['statement_ids_new']);
      assert.equal(Number(file((db) => (db.prepare('SELECT through FROM id_merge').get() as { through: number }).through)), idMergeDue(0) + 1);
    });

    test('statements on both sides of the merge are found by id, and posting one again is a conflict or a no-op', async () => {
      for (const sid of [id.a, id.e]) {
        const res = await get(`statementId=${sid}`);
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as { id: string }).id, sid);
        assert.equal((await put(sid, bodies.get(sid)!)).status, 204, 'the same statement again');
        const other = await put(sid, { ...bodies.get(sid)!, verb: { id: 'http://example.com/verbs/other' } });
        assert.equal(other.status, 409, 'other content under a stored id');
        assert.match(JSON.stringify(await other.json()), new RegExp(sid));
      }
      const n = file((db) => (db.prepare('SELECT count(*) AS n FROM statements').get() as { n: number }).n);
      assert.equal(Number(n), 5);
    });

    test('a merged statement is voided, and a StatementRef to one reaches it', async () => {
      await store(randomUUID(), { actor: agent('admin'), verb: { id: VOIDED }, object: { objectType: 'StatementRef', id: id.c } });
      assert.equal((await get(`statementId=${id.c}`)).status, 404);
      assert.equal((await get(`voidedStatementId=${id.c}`)).status, 200);
      const ref = randomUUID();
      await store(ref, { verb: { id: 'http://example.com/verbs/commented' }, object: { objectType: 'StatementRef', id: id.b } });
      const res = await get(`verb=${encodeURIComponent(RARE)}`);
      assert.equal(res.status, 200);
      assert.deepEqual(((await res.json()) as { statements: { id: string }[] }).statements.map((s) => s.id), [ref, id.b]);
    });

    test('erasure removes a statement from whichever level holds its id, and the id can be used again', async () => {
      const r = await runCli(t, ['erase', '--agent', JSON.stringify(agent('ann'))]);
      assert.equal(r.code, 0, r.stderr);
      for (const sid of [id.a, id.e]) {
        assert.deepEqual(level(sid), [], sid);
        assert.equal((await get(`statementId=${sid}`)).status, 404);
      }
      await store(id.a, { actor: agent('bo') });
      assert.deepEqual(level(id.a), ['statement_ids_new']);
      assert.equal((await get(`statementId=${id.a}`)).status, 200);
    });
  });
}
