/**
 * SQLite keeps the link tables and the registration index in seq buckets (SEQ_BUCKET_BITS in
 * src/store/sql.ts). Statements whose seqs straddle bucket boundaries, with an empty bucket
 * between, are found by every filter that reads those indexes, in order, paged across the
 * boundaries either way; combined filters, StatementRef targeting and `since` too.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { SEQ_BUCKET_BITS } from '../../src/store/sql.ts';
import { jsonInit, sqliteBackend, sqliteThreadBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';

const BUCKET = 2 ** SEQ_BUCKET_BITS;
const COURSE = 'http://example.com/courses/buckets';
const QUIZ = 'http://example.com/courses/buckets/quiz';
const PASSED = 'http://adlnet.gov/expapi/verbs/passed';
const ATTEMPTED = 'http://adlnet.gov/expapi/verbs/attempted';
const REG = randomUUID();
const agent = (name: string) => ({ objectType: 'Agent', name, mbox: `mailto:${name}@example.com` });

interface Posted {
  id: string;
  actor: string;
  verb: string;
  object: string;
  registration: boolean;
  /** The id of the statement a StatementRef targets. */
  ref?: string;
}

for (const backend of [sqliteBackend, sqliteThreadBackend]) {
  describe(`SQLite seq buckets [${backend.name}]`, () => {
    let t: TestLrs;
    const posted: Posted[] = [];
    const post = async (p: Omit<Posted, 'id'>) => {
      const id = randomUUID();
      const body = statement({
        id,
        actor: agent(p.actor),
        verb: { id: p.verb },
        object: p.ref ? { objectType: 'StatementRef', id: p.ref } : { objectType: 'Activity', id: p.object },
        context: { ...(p.registration && { registration: REG }), contextActivities: { parent: [{ id: COURSE }] } },
      });
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', body));
      assert.equal(res.status, 200, await res.text());
      posted.push({ id, ...p });
    };
    /** The next statement's seq becomes `seq + 1` (SQLite's AUTOINCREMENT counter, moved by another connection). */
    const jumpTo = (seq: number) => {
      const db = new DatabaseSync(t.env.LECTERN_SQLITE_PATH);
      try {
        db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'statements'").run(seq);
      } finally {
        db.close();
      }
    };
    const shape = (i: number): Omit<Posted, 'id'> => ({
      actor: i % 3 === 0 ? 'bob' : 'alice',
      verb: i % 2 === 0 ? PASSED : ATTEMPTED,
      object: i % 4 === 1 ? QUIZ : COURSE,
      registration: i % 5 !== 2,
    });

    before(async () => {
      t = await startTestLrs(backend);
      await post(shape(0)); // bucket 0
      jumpTo(BUCKET - 4); // 3 statements in bucket 0, 4 in bucket 1
      for (let i = 1; i <= 7; i++) await post(shape(i));
      jumpTo(3 * BUCKET - 3); // bucket 2 stays empty; 2 in bucket 2, then bucket 3
      for (let i = 8; i <= 12; i++) await post(shape(i));
      // StatementRefs in bucket 3 that reach statements of buckets 0 and 1 (by alice, with the quiz).
      await post({ actor: 'carol', verb: 'http://adlnet.gov/expapi/verbs/commented', object: '', registration: false, ref: posted[1].id });
      await post({ actor: 'carol', verb: 'http://adlnet.gov/expapi/verbs/commented', object: '', registration: false, ref: posted[0].id });
    });
    after(async () => t?.close());

    /** Every id of the query's pages (limit 2), following `more` to the end. */
    const all = async (query: string): Promise<string[]> => {
      const ids: string[] = [];
      let next: string | undefined = `/xAPI/statements?${query}&limit=2&format=ids`;
      while (next) {
        const res = await t.fetch(next);
        assert.equal(res.status, 200, await res.clone().text());
        const body = (await res.json()) as { statements: { id: string }[]; more: string };
        ids.push(...body.statements.map((s) => s.id));
        next = body.more || undefined;
      }
      return ids;
    };
    /** The ids of the posted statements matching `match` (directly, or through the StatementRef's target), newest first. */
    const expected = (match: (p: Posted) => boolean): string[] => {
      const byId = new Map(posted.map((p) => [p.id, p]));
      return posted
        .filter((p) => match(p) || (p.ref !== undefined && match(byId.get(p.ref)!)))
        .map((p) => p.id)
        .reverse();
    };

    test('the seqs straddle the bucket boundaries, and each link row is in its seq bucket', () => {
      const db = new DatabaseSync(t.env.LECTERN_SQLITE_PATH, { readOnly: true });
      try {
        const seqs = (db.prepare('SELECT seq FROM statements ORDER BY seq').all() as { seq: number }[]).map((r) => Number(r.seq));
        assert.deepEqual(new Set(seqs.map((s) => Math.floor(s / BUCKET))), new Set([0, 1, 2, 3]));
        for (const table of ['statement_agents', 'statement_activities']) {
          const wrong = db.prepare(`SELECT count(*) AS n FROM ${table} WHERE bucket <> seq >> ${SEQ_BUCKET_BITS}`).get() as { n: number };
          assert.equal(Number(wrong.n), 0, table);
        }
      } finally {
        db.close();
      }
    });

    const cases: [string, string, (p: Posted) => boolean][] = [
      ['agent', `agent=${encodeURIComponent(JSON.stringify(agent('alice')))}`, (p) => p.actor === 'alice'],
      ['activity', `activity=${encodeURIComponent(QUIZ)}`, (p) => p.object === QUIZ],
      ['related activities', `activity=${encodeURIComponent(COURSE)}&related_activities=true`, (p) => !p.ref],
      ['registration', `registration=${REG}`, (p) => p.registration],
      ['verb + registration', `verb=${encodeURIComponent(PASSED)}&registration=${REG}`, (p) => p.verb === PASSED && p.registration],
      [
        'agent + verb + activity',
        `agent=${encodeURIComponent(JSON.stringify(agent('alice')))}&verb=${encodeURIComponent(ATTEMPTED)}&activity=${encodeURIComponent(QUIZ)}`,
        (p) => p.actor === 'alice' && p.verb === ATTEMPTED && p.object === QUIZ,
      ],
    ];
    for (const [name, query, match] of cases) {
      test(`${name}: every match across the buckets, paged either way`, async () => {
        const want = expected(match);
        assert.ok(want.length >= 3, `${name} matches too little to page`);
        assert.deepEqual(await all(query), want);
        assert.deepEqual(await all(`${query}&ascending=true`), [...want].reverse());
      });
    }

    test('since: a window starting in a later bucket', async () => {
      const res = await t.fetch(`/xAPI/statements?statementId=${posted[7].id}`);
      const { stored } = (await res.json()) as { stored: string };
      const ids = await all(`agent=${encodeURIComponent(JSON.stringify(agent('alice')))}&since=${encodeURIComponent(stored)}`);
      const storedOf = async (id: string) => (await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json()).stored as string;
      for (const id of ids) assert.ok((await storedOf(id)) > stored);
      assert.ok(ids.every((id) => expected((p) => p.actor === 'alice').includes(id)));
    });
  });
}
