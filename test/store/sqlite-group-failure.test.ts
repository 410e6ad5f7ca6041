/**
 * SQLite's group commit writes the requests of a group without a SAVEPOINT each: a request the
 * insert rules reject has written nothing. A request that fails while writing (an SQLite error,
 * injected here by a trigger) must still fail alone: the group is rolled back and written again
 * with a savepoint per request, so the other requests of the group are stored, the failing one
 * leaves no statement, link row or definition, and later writes use valid key ids. Through HTTP,
 * such a request answers 500 with a JSON body and stores none of its batch.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { InsertOutcome } from '../../src/store/types.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import { jsonInit, sqliteBackend, startTestLrs, statement as lrsStatement, type TestLrs } from '../helpers/lrs.ts';
import type { Statement } from '../../src/xapi/types.ts';

const AUTHORITY = { mbox: 'mailto:auth@example.com' };
const FAIL = 'http://example.com/activities/fail-on-write';

describe('SQLite: a request failing mid-write in a group', () => {
  let dir: string;
  let path: string;
  let store: SqliteStore;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lectern-group-failure-'));
    path = join(dir, 'x.sqlite');
    store = new SqliteStore({ path, synchronous: 'NORMAL' });
    await store.migrate();
    // An activity link row for FAIL aborts its INSERT: after the statement row was written.
    const db = new DatabaseSync(path);
    db.exec(
      'CREATE TRIGGER fail_on_write BEFORE INSERT ON statement_activities ' +
        `WHEN NEW.activity = (SELECT id FROM keys WHERE key = '${FAIL}') BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`,
    );
    db.close();
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const made = (activity: string, definition?: string): Statement =>
    ({
      id: randomUUID(),
      actor: { mbox: `mailto:${randomUUID()}@example.com` },
      verb: { id: 'http://example.com/verbs/did' },
      object: { id: activity, ...(definition && { definition: { name: { en: definition } } }) },
    }) as Statement;
  const insert = (statements: Statement[]) => store.insertStatements('', prepareBatch(statements, AUTHORITY, '1.0.3', { define: true }), []);
  const count = (sql: string): number => {
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      return Number((db.prepare(sql).get() as { n: number }).n);
    } finally {
      db.close();
    }
  };

  test('the other requests of the group are stored; the failing one leaves nothing', async () => {
    const before = count('SELECT count(*) AS n FROM statements');
    const first = [made('http://example.com/activities/a', 'kept a')];
    // Its first statement is written before the second one's link row fails.
    const failing = [made('http://example.com/activities/b', 'not kept'), made(FAIL)];
    const last = [made('http://example.com/activities/c')];
    // Issued together: one group.
    const [a, b, c] = await Promise.allSettled([insert(first), insert(failing), insert(last)]);
    assert.equal((a as PromiseFulfilledResult<InsertOutcome>).value?.inserted, 1);
    assert.equal(b.status, 'rejected');
    assert.match(String((b as PromiseRejectedResult).reason), /injected write failure/);
    assert.equal((c as PromiseFulfilledResult<InsertOutcome>).value?.inserted, 1);
    assert.equal(count('SELECT count(*) AS n FROM statements'), before + 2);
    assert.equal(await store.getStatement('', failing[0].id!, false), undefined);
    assert.ok(await store.getStatement('', first[0].id!, false));
    assert.ok(await store.getStatement('', last[0].id!, false));
    assert.deepEqual((await store.getActivityDefinitions('', ['http://example.com/activities/a'])).get('http://example.com/activities/a'), { name: { en: 'kept a' } });
    assert.equal((await store.getActivityDefinitions('', ['http://example.com/activities/b'])).get('http://example.com/activities/b'), undefined);
    // No link row points at a statement that is not there.
    assert.equal(count('SELECT count(*) AS n FROM statement_agents a WHERE NOT EXISTS (SELECT 1 FROM statements s WHERE s.seq = a.seq)'), 0);
  });

  test('later groups write on valid key ids, and a rule-rejected request in a group still fails alone', async () => {
    const again = made('http://example.com/activities/b', 'kept b');
    const taken = made('http://example.com/activities/d');
    await insert([taken]);
    const conflicting = [{ ...taken, verb: { id: 'http://example.com/verbs/other' } } as Statement];
    const [x, y] = await Promise.allSettled([insert([again]), insert(conflicting)]);
    assert.equal((x as PromiseFulfilledResult<InsertOutcome>).value?.inserted, 1);
    assert.equal(y.status, 'rejected');
    assert.deepEqual((await store.getActivityDefinitions('', ['http://example.com/activities/b'])).get('http://example.com/activities/b'), { name: { en: 'kept b' } });
    const page = await store.queryStatements('', {
      limit: 10,
      maxBytes: 4 * 1024 * 1024,
      ascending: true,
      format: 'exact',
      attachments: false,
      filter: { activity: 'http://example.com/activities/b', relatedActivities: false, relatedAgents: false },
    });
    assert.deepEqual(
      page.rows.map((r) => (JSON.parse(r.json) as Statement).id),
      [again.id],
    );
  });
});

describe('SQLite: a request failing mid-write, through HTTP', () => {
  let t: TestLrs;
  before(async () => {
    t = await startTestLrs(sqliteBackend);
    const db = new DatabaseSync(t.env.LECTERN_SQLITE_PATH);
    db.exec(
      'CREATE TRIGGER fail_on_write BEFORE INSERT ON statement_activities ' +
        `WHEN NEW.activity = (SELECT id FROM keys WHERE key = '${FAIL}') BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`,
    );
    db.close();
  });
  after(async () => t?.close());

  test('a server error with a JSON body; none of the batch is stored; the next request is', async () => {
    const first = lrsStatement({ id: randomUUID() });
    const failing = lrsStatement({ id: randomUUID(), object: { objectType: 'Activity', id: FAIL } });
    const res = await t.fetch('/xAPI/statements', jsonInit('POST', [first, failing]));
    assert.equal(res.status, 500);
    assert.equal(typeof ((await res.json()) as { error?: unknown; detail?: unknown }).detail, 'string');
    assert.equal((await t.fetch(`/xAPI/statements?statementId=${first.id}`)).status, 404);
    const next = lrsStatement({ id: randomUUID() });
    assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', next))).status, 200);
    assert.equal((await t.fetch(`/xAPI/statements?statementId=${next.id}`)).status, 200);
  });
});
