/**
 * Statement JSON compressed in its row on PostgreSQL (migration 9): every way a statement row is
 * written (insert, voiding, pseudonymisation) leaves `full` compressed and served byte for byte as
 * before, and a database written before migration 9 is compressed in place when a server starts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { jsonInit, postgresBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { runCli } from '../lifecycle/helpers.ts';

const BEN = { objectType: 'Agent', name: 'Ben', mbox: 'mailto:ben@example.com' };
const KEY = 'a-pseudonymisation-key-of-test';

/** A statement of ≈ 1.3 KB, the size the rows are compressed for (below ≈ 2 KB PostgreSQL would not). */
const typical = (i: number, actor: unknown = { mbox: `mailto:learner${i}@example.com`, name: `Learner ${i}` }) =>
  statement({
    actor,
    verb: { id: 'http://adlnet.gov/expapi/verbs/answered', display: { 'en-US': 'answered' } },
    object: {
      id: `http://courses.example.com/c/1/m/2/q/${i}`,
      definition: {
        name: { 'en-US': `Question ${i}` },
        description: { 'en-US': 'Which of these is a learning record store?' },
        type: 'http://adlnet.gov/expapi/activities/cmi.interaction',
        interactionType: 'choice',
        correctResponsesPattern: ['lrs'],
        choices: ['lrs', 'lms', 'cms', 'crm'].map((id) => ({ id, description: { 'en-US': id.toUpperCase() } })),
      },
    },
    result: { score: { scaled: 0.5, raw: 5, min: 0, max: 10 }, success: i % 2 === 0, completion: true, response: 'lrs', duration: 'PT1M2S' },
    context: {
      registration: '0f5d1d9c-6b55-4c61-9a2f-9c1d2f0e8a11',
      contextActivities: { parent: [{ id: 'http://courses.example.com/c/1/m/2' }], grouping: [{ id: 'http://courses.example.com/c/1' }] },
      extensions: { 'http://example.com/extensions/attempt': i },
    },
  });

interface Row {
  id: string;
  method: string | null;
  stored: number;
  text: number;
}

/** Each statement row's compression method and stored size of `full` against its text's. */
async function rows(db: pg.Client): Promise<Row[]> {
  const r = await db.query<{ id: string; method: string | null; stored: number; text: number }>(
    'SELECT id::text AS id, pg_column_compression("full") AS method, pg_column_size("full") AS stored, octet_length("full"::text) AS text FROM statements ORDER BY seq',
  );
  return r.rows;
}

describe('PostgreSQL: statement JSON compressed in its row', { skip: postgresSkipped() }, () => {
  let t: TestLrs;
  let db: pg.Client;
  before(async () => {
    t = await startTestLrs(postgresBackend, { env: { LECTERN_PSEUDONYMIZE_KEY: KEY } });
    db = new pg.Client({ connectionString: t.env.LECTERN_POSTGRES_URL });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await t.close();
  });

  test('inserted, voided and pseudonymised rows are compressed; every statement is served as it was stored', async () => {
    const posted = (await (await t.fetch('/xAPI/statements', jsonInit('POST', [typical(1, BEN), typical(2), typical(3, BEN)]))).json()) as string[];
    const [one] = (await (await t.fetch('/xAPI/statements', jsonInit('POST', typical(4)))).json()) as string[];
    const served = async (id: string) => (await t.fetch(`/xAPI/statements?statementId=${id}`)).text();
    const before = new Map<string, string>();
    for (const id of [...posted, one]) before.set(id, await served(id));

    for (const r of await rows(db)) {
      assert.equal(r.method, 'lz4', `statement ${r.id} is compressed`);
      assert.ok(r.stored < r.text * 0.8, `statement ${r.id}: ${r.stored} bytes stored for ${r.text} of JSON`);
    }

    // Voiding rewrites the target's row (its voided flag): it stays compressed.
    const voiding = statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: posted[1] } });
    assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', voiding))).status, 200);
    assert.equal(await (await t.fetch(`/xAPI/statements?voidedStatementId=${posted[1]}`)).text(), before.get(posted[1]));

    // Pseudonymisation writes a new `full` into Ben's rows.
    const erased = await runCli(t, ['erase', '--agent', JSON.stringify({ mbox: BEN.mbox }), '--pseudonymize']);
    assert.equal(erased.code, 0, erased.stderr);
    const all = await rows(db);
    assert.equal(all.length, 5);
    for (const r of all) assert.equal(r.method, 'lz4', `statement ${r.id} is compressed after voiding and pseudonymisation`);
    const rewritten = JSON.parse(await served(posted[0])) as { actor: { mbox?: string } };
    assert.notEqual(rewritten.actor.mbox, BEN.mbox, 'the pseudonymised row is the new text');
    assert.equal(await served(one), before.get(one), 'a row nobody rewrote is served byte for byte');
    const page = (await (await t.fetch('/xAPI/statements?limit=10')).json()) as { statements: { id: string }[] };
    assert.deepEqual(
      page.statements.map((s) => s.id),
      [all[4].id, one, posted[2], posted[0]],
    );
  });

  test('a database written before migration 9 is compressed in place at start-up, and serves the same bytes', async () => {
    const ids = (await (await t.fetch('/xAPI/statements', jsonInit('POST', [typical(5), typical(6)]))).json()) as string[];
    const served = async (id: string) => (await t.fetch(`/xAPI/statements?statementId=${id}`)).text();
    const before = new Map<string, string>();
    for (const id of ids) before.set(id, await served(id));
    await t.lrs.close();

    // The schema of migration 8: no pad, `full` stored as PostgreSQL stores a short value (the
    // rewrite of `full` below, under 2 KB without the pad, is stored uncompressed).
    await db.query('DELETE FROM schema_migrations WHERE version = 9');
    await db.query('ALTER TABLE statements DROP COLUMN toast_pad, RESET (toast_tuple_target), ALTER COLUMN "full" SET STORAGE EXTENDED, ALTER COLUMN "full" SET COMPRESSION pglz');
    await db.query('UPDATE statements SET "full" = "full"::text::json');
    const old = await rows(db);
    assert.ok(
      old.every((r) => r.method === null),
      'the rows of the old schema are not compressed',
    );

    await t.restart();
    const now = await rows(db);
    assert.deepEqual(
      now.map((r) => r.id),
      old.map((r) => r.id),
    );
    for (const r of now) assert.equal(r.method, 'lz4', `statement ${r.id} is compressed by the migration`);
    for (const id of ids) assert.equal(await served(id), before.get(id));
    const [added] = (await (await t.fetch('/xAPI/statements', jsonInit('POST', typical(7)))).json()) as string[];
    assert.equal((await rows(db)).find((r) => r.id === added)?.method, 'lz4', 'a statement stored after the migration is compressed');
  });
});
