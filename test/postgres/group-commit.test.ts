/**
 * Group commit on PostgreSQL decides the next group before the tenant lock, while the previous
 * group writes. Here the previous group is parked (a trigger waits on a lock this test holds)
 * after its read, so the requests behind it are decided on a snapshot that misses its rows; each
 * must still get the answer it would get had the groups run one after the other — also when the
 * parked group then fails.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { jsonInit, postgresBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';

const SLOW = { id: 'http://example.com/verbs/slow' };

describe('PostgreSQL group commit', { skip: postgresSkipped() }, () => {
  let lrs: TestLrs;
  let db: pg.Client;
  before(async () => {
    lrs = await startTestLrs(postgresBackend);
    db = new pg.Client({ connectionString: lrs.env.LECTERN_POSTGRES_URL });
    await db.connect();
  });
  after(async () => {
    await db?.end();
    await lrs?.close();
  });

  const post = (body: unknown) => lrs.fetch('/xAPI/statements', jsonInit('POST', body));
  /** Until some session waits for an advisory lock matching `sql` (a parked request, or one behind it). */
  const waiting = async (sql: string) => {
    for (;;) {
      if ((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND ${sql}`)).rows[0].n) return;
      await new Promise((r) => setTimeout(r, 5));
    }
  };

  test('requests decided while an earlier group writes: conflicts, no-ops, voiding and definitions as if in turn', async () => {
    await db.query(`CREATE OR REPLACE FUNCTION park_slow() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.verb = (SELECT id FROM keys WHERE key = 'http://example.com/verbs/slow') THEN PERFORM pg_advisory_xact_lock(778, 1); END IF; RETURN NEW; END $$`);
    await db.query('CREATE TRIGGER park_slow BEFORE INSERT ON statements FOR EACH ROW EXECUTE FUNCTION park_slow()');
    const activity = `http://example.com/activities/${randomUUID()}`;
    const x = randomUUID();
    const target = randomUUID();
    const first = statement({ id: x, verb: SLOW });
    await db.query('SELECT pg_advisory_lock(778, 1)');
    try {
      const a = post([first, statement({ id: target }), statement({ object: { id: activity, definition: { name: { 'en-US': 'one' } } } })]);
      await waiting('classid = 778');
      const freshB = randomUUID();
      const b = post([statement({ id: freshB }), statement({ id: x, verb: { id: 'http://example.com/verbs/other' } })]);
      const c = post([first]);
      const d = post([statement({ object: { id: activity, definition: { name: { fr: 'un' } } } })]);
      const voiding = randomUUID();
      const e = post([statement({ id: voiding, verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: target } })]);
      // Some group behind the parked one has read and decided, and waits for the tenant lock.
      await waiting('classid = 1279590402');
      await db.query('SELECT pg_advisory_unlock(778, 1)');
      const statuses = await Promise.all([a, b, c, d, e].map(async (r) => (await r).status));
      assert.deepEqual(statuses, [200, 409, 200, 200, 200]);
      const stored = await db.query<{ id: string }>('SELECT id::text AS id FROM statements WHERE id = ANY($1::uuid[])', [[x, freshB, voiding, target]]);
      assert.deepEqual(stored.rows.map((r) => r.id).sort(), [x, voiding, target].sort(), 'the 409 request stored nothing; the others are stored once');
      assert.equal((await lrs.fetch(`/xAPI/statements?statementId=${target}`)).status, 404, 'voided by a request decided before its target was visible');
      assert.equal((await lrs.fetch(`/xAPI/statements?voidedStatementId=${target}`)).status, 200);
      const got = (await (await lrs.fetch(`/xAPI/activities?activityId=${encodeURIComponent(activity)}`)).json()) as { definition: { name: Record<string, string> } };
      assert.deepEqual(got.definition.name, { 'en-US': 'one', fr: 'un' }, 'both requests merged into the kept definition');
      const backwards = await db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM (SELECT stored_ms, lag(stored_ms) OVER (PARTITION BY tenant ORDER BY seq) AS prev FROM statements) s WHERE stored_ms < prev',
      );
      assert.equal(backwards.rows[0].n, 0, 'stored never goes backwards in seq order');
    } finally {
      await db.query('SELECT pg_advisory_unlock_all()');
      await db.query('DROP TRIGGER IF EXISTS park_slow ON statements');
    }
  });

  test('a group that merged its definitions into those of the group writing before it, which then fails, is decided again', async () => {
    // The parked group fails once released: what the next group merged into is never stored.
    await db.query(`CREATE OR REPLACE FUNCTION park_fail() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.verb = (SELECT id FROM keys WHERE key = 'http://example.com/verbs/slow') THEN
        PERFORM pg_advisory_xact_lock(778, 2); RAISE EXCEPTION 'injected write failure'; END IF; RETURN NEW; END $$`);
    await db.query('CREATE TRIGGER park_fail BEFORE INSERT ON statements FOR EACH ROW EXECUTE FUNCTION park_fail()');
    const activity = `http://example.com/activities/${randomUUID()}`;
    const failing = randomUUID();
    const next = randomUUID();
    await db.query('SELECT pg_advisory_lock(778, 2)');
    try {
      const a = post([statement({ id: failing, verb: SLOW, object: { id: activity, definition: { name: { 'en-US': 'lost' }, description: { 'en-US': 'lost too' } } } })]);
      await waiting('classid = 778 AND objid = 2');
      const b = post([statement({ id: next, object: { id: activity, definition: { name: { fr: 'gardé' } } } })]);
      // b has read and decided on a's definition, and waits for the tenant lock that a holds.
      await waiting('classid = 1279590402');
      await db.query('SELECT pg_advisory_unlock(778, 2)');
      const [ra, rb] = await Promise.all([a, b]);
      assert.equal(ra.status, 500, await ra.clone().text());
      assert.equal(rb.status, 200, await rb.clone().text());
      assert.equal((await lrs.fetch(`/xAPI/statements?statementId=${failing}`)).status, 404, 'the failed request stored nothing');
      assert.equal((await lrs.fetch(`/xAPI/statements?statementId=${next}`)).status, 200);
      const got = (await (await lrs.fetch(`/xAPI/activities?activityId=${encodeURIComponent(activity)}`)).json()) as { definition: Record<string, unknown> };
      assert.deepEqual(got.definition, { name: { fr: 'gardé' } }, "only the stored request's definition, none of the failed one's");
    } finally {
      await db.query('SELECT pg_advisory_unlock_all()');
      await db.query('DROP TRIGGER IF EXISTS park_fail ON statements');
    }
  });
});
