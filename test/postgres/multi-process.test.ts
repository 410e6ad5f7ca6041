/**
 * Several Lectern servers on one PostgreSQL database, as N processes behind a load balancer:
 * concurrent writers of one statement id, overlapping batches, one document updated from both
 * sides with ETags, keyset paging and consistent-through while both servers write, and start-ups
 * racing on migrations. Each server has its own pool, so the database sees separate sessions just
 * as it would from separate processes.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startLrs } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { jsonInit, postgresBackend, startTestLrs, statement, TENANT_B, type TestLrs } from '../helpers/lrs.ts';
import { createDatabase, dropDatabase, postgresSkipped } from '../helpers/postgres.ts';

const VERB_A = { id: 'http://example.com/verbs/a' };
const VERB_B = { id: 'http://example.com/verbs/b' };

describe('two servers on one PostgreSQL database', { skip: postgresSkipped() }, () => {
  let a: TestLrs;
  let b: TestLrs;
  let db: pg.Client;
  before(async () => {
    a = await startTestLrs(postgresBackend);
    b = await startTestLrs(postgresBackend, { shareWith: a });
    db = new pg.Client({ connectionString: a.env.LECTERN_POSTGRES_URL });
    await db.connect();
  });
  after(async () => {
    await db?.end();
    await b?.close();
    await a?.close();
  });

  const put = (t: TestLrs, id: string, body: unknown) => t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', body));
  const post = (t: TestLrs, body: unknown) => t.fetch('/xAPI/statements', jsonInit('POST', body));
  const rowsFor = async (ids: string[]) =>
    (await db.query<{ id: string; verb: string }>('SELECT s.id::text AS id, k.key AS verb FROM statements s JOIN keys k ON k.id = s.verb WHERE s.id = ANY($1::uuid[])', [ids]))
      .rows;

  /** Every statement row has its index rows, and no index row exists twice. */
  async function assertIndexesWhole() {
    const orphans = await db.query(
      'SELECT count(*)::int AS n FROM statements s WHERE NOT EXISTS (SELECT 1 FROM statement_agents x WHERE x.seq = s.seq) ' +
        'OR (s.ref_id IS NULL AND NOT EXISTS (SELECT 1 FROM statement_activities x WHERE x.seq = s.seq))',
    );
    assert.equal(orphans.rows[0].n, 0, 'statements without their index rows');
    const dups = await db.query('SELECT count(*)::int AS n FROM (SELECT seq, agent FROM statement_agents GROUP BY 1, 2 HAVING count(*) > 1) d');
    assert.equal(dups.rows[0].n, 0);
  }

  test('concurrent PUTs of one id with the same content: every one 204, one row', async () => {
    const ids = Array.from({ length: 15 }, () => randomUUID());
    const s = statement();
    const statuses = await Promise.all(ids.flatMap((id) => [put(a, id, s), put(b, id, s), put(a, id, s), put(b, id, s)].map(async (r) => (await r).status)));
    assert.deepEqual(new Set(statuses), new Set([204]));
    const rows = await rowsFor(ids);
    assert.equal(rows.length, ids.length, 'exactly one row per id');
    await assertIndexesWhole();
  });

  test('concurrent PUTs of one id with different content: one 204, one 409, the winner stored', async () => {
    for (let i = 0; i < 15; i++) {
      const id = randomUUID();
      const [ra, rb] = await Promise.all([put(a, id, statement({ verb: VERB_A })), put(b, id, statement({ verb: VERB_B }))]);
      assert.deepEqual([ra.status, rb.status].sort(), [204, 409], `round ${i}`);
      const winner = ra.status === 204 ? VERB_A.id : VERB_B.id;
      assert.deepEqual(await rowsFor([id]), [{ id, verb: winner }]);
      const served = await (await b.fetch(`/xAPI/statements?statementId=${id}`)).json();
      assert.equal(served.verb.id, winner);
    }
  });

  test('overlapping POST batches: same content both 200 and each id once; different content one 409 that stores nothing', async () => {
    for (let round = 0; round < 5; round++) {
      const ids = Array.from({ length: 30 }, () => randomUUID());
      const batch = (from: number, to: number, verb = VERB_A) => ids.slice(from, to).map((id) => statement({ id, verb }));
      const [r1, r2] = await Promise.all([post(a, batch(0, 20)), post(b, batch(10, 30))]);
      assert.equal(r1.status, 200);
      assert.equal(r2.status, 200);
      assert.deepEqual(await r1.json(), ids.slice(0, 20));
      assert.equal((await rowsFor(ids)).length, 30);
    }
    for (let round = 0; round < 5; round++) {
      const ids = Array.from({ length: 30 }, () => randomUUID());
      const batch = (from: number, to: number, verb: { id: string }) => ids.slice(from, to).map((id) => statement({ id, verb }));
      const [r1, r2] = await Promise.all([post(a, batch(0, 20, VERB_A)), post(b, batch(10, 30, VERB_B))]);
      assert.deepEqual([r1.status, r2.status].sort(), [200, 409]);
      const rows = await rowsFor(ids);
      assert.equal(rows.length, 20, 'the losing batch stored none of its statements');
      const expected = r1.status === 200 ? ids.slice(0, 20) : ids.slice(10, 30);
      assert.deepEqual(rows.map((r) => r.id).sort(), [...expected].sort());
    }
    await assertIndexesWhole();
  });

  test('a document updated from both servers with the same ETag: one 204, the other 412; merges lose nothing', async () => {
    const scope = `activityId=${encodeURIComponent('http://example.com/act')}&agent=${encodeURIComponent(JSON.stringify({ mbox: 'mailto:doc@example.com' }))}`;
    const path = `/xAPI/activities/state?${scope}&stateId=s1`;
    const json = (body: unknown, headers: Record<string, string> = {}) => ({ ...jsonInit('PUT', body), headers: { 'content-type': 'application/json', ...headers } });
    assert.equal((await a.fetch(path, json({ n: 0 }))).status, 204);
    for (let i = 1; i <= 10; i++) {
      const etag = (await a.fetch(path)).headers.get('etag')!;
      const [ra, rb] = await Promise.all([a.fetch(path, json({ n: i, by: 'a' }, { 'if-match': etag })), b.fetch(path, json({ n: i, by: 'b' }, { 'if-match': etag }))]);
      assert.deepEqual([ra.status, rb.status].sort(), [204, 412], `round ${i}`);
      const doc = await (await b.fetch(path)).json();
      assert.deepEqual(doc, { n: i, by: ra.status === 204 ? 'a' : 'b' });
    }
    // POST merges from both sides at once: each read-merge-write sees the other's result.
    const merges = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).fetch(path, { ...json({ [`k${i}`]: i }), method: 'POST' })));
    assert.deepEqual(new Set(merges.map((r) => r.status)), new Set([204]));
    const doc = await (await a.fetch(path)).json();
    for (let i = 0; i < 20; i++) assert.equal(doc[`k${i}`], i, `merge ${i} was lost`);
  });

  test('while both servers write: paging across them misses nothing, and since/until up to consistent-through yields each statement once', async () => {
    // Its own tenant: the other tests' statements are not part of this count.
    const tenant = TENANT_B;
    const acked = new Set<string>();
    let writing = true;
    const writer = async (t: TestLrs, n: number) => {
      for (let i = 0; i < n; i++) {
        const batch = Array.from({ length: 5 }, () => statement({ id: randomUUID() }));
        const res = await t.fetch('/xAPI/statements', { ...jsonInit('POST', batch), user: tenant });
        assert.equal(res.status, 200);
        for (const id of (await res.json()) as string[]) acked.add(id);
      }
    };
    const get = async (t: TestLrs, path: string) => {
      const res = await t.fetch(path, { user: tenant });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { statements: { id: string }[]; more: string };
      return { body, through: res.headers.get('x-experience-api-consistent-through')! };
    };

    // Keyset paging across both servers: when a pass ends, everything acknowledged before its
    // last request is in it (a row committed later never lands behind the cursor).
    const pager = async () => {
      let passes = 0;
      while (writing || passes === 0) {
        const seen = new Set<string>();
        let path = '/xAPI/statements?ascending=true&limit=40';
        let i = 0;
        for (;;) {
          const ackedBefore = [...acked];
          const { body } = await get(i++ % 2 ? b : a, path);
          for (const s of body.statements) {
            assert.ok(!seen.has(s.id), 'a statement served twice in one pass');
            seen.add(s.id);
          }
          if (!body.more) {
            for (const id of ackedBefore) assert.ok(seen.has(id), `acknowledged statement ${id} skipped by paging`);
            break;
          }
          path = body.more;
        }
        passes++;
      }
      return passes;
    };

    // The since/until pattern: each round reads (previous through, current through]; together
    // the rounds must return every statement exactly once.
    const tailer = async () => {
      const got = new Map<string, number>();
      let since: string | undefined;
      let round = 0;
      const once = async () => {
        const { through } = await get(round % 2 ? a : b, '/xAPI/statements?limit=1');
        let path = `/xAPI/statements?ascending=true&limit=30&until=${encodeURIComponent(through)}${since ? `&since=${encodeURIComponent(since)}` : ''}`;
        let i = 0;
        for (;;) {
          const { body } = await get((round + i++) % 2 ? b : a, path);
          for (const s of body.statements) got.set(s.id, (got.get(s.id) ?? 0) + 1);
          if (!body.more) break;
          path = body.more;
        }
        since = through;
        round++;
      };
      while (writing) await once();
      await once();
      return got;
    };

    const writers = Promise.all([writer(a, 40), writer(b, 40), writer(a, 40), writer(b, 40)]).finally(() => {
      writing = false;
    });
    const [, passes, got] = await Promise.all([writers, pager(), tailer()]);
    assert.ok(passes >= 1);
    assert.equal(acked.size, 800);
    const missing = [...acked].filter((id) => !got.has(id));
    assert.deepEqual(missing, [], 'statements never returned by since/until rounds');
    assert.deepEqual(
      [...got].filter(([, n]) => n > 1),
      [],
      'statements returned twice',
    );
    assert.equal(got.size, acked.size);
  });

  test('an insert still in flight on one server holds back the other: later commits never land behind what readers saw', async () => {
    // A trigger parks the "slow" insert after it has its seq and stored, until this session lets go:
    // the window in which a commit from the other server could overtake it.
    await db.query(`CREATE OR REPLACE FUNCTION park_slow() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.verb = (SELECT id FROM keys WHERE key = 'http://example.com/verbs/slow') THEN PERFORM pg_advisory_xact_lock(777, 1); END IF; RETURN NEW; END $$`);
    await db.query('DROP TRIGGER IF EXISTS park_slow ON statements');
    await db.query('CREATE TRIGGER park_slow BEFORE INSERT ON statements FOR EACH ROW EXECUTE FUNCTION park_slow()');
    const activity = `http://example.com/activities/${randomUUID()}`;
    const list = async (t: TestLrs) => {
      const res = await t.fetch(`/xAPI/statements?activity=${encodeURIComponent(activity)}&ascending=true`);
      const body = (await res.json()) as { statements: { id: string; stored: string }[] };
      return { ids: body.statements.map((x) => x.id), statements: body.statements, through: res.headers.get('x-experience-api-consistent-through')! };
    };
    const waiting = async (sql: string) => {
      for (;;) {
        if ((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND ${sql}`)).rows[0].n) return;
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const slowId = randomUUID();
    const fastId = randomUUID();
    await db.query('SELECT pg_advisory_lock(777, 1)');
    try {
      const slow = put(a, slowId, statement({ verb: { id: 'http://example.com/verbs/slow' }, object: { id: activity } }));
      await waiting('classid = 777');
      const fast = put(b, fastId, statement({ object: { id: activity } }));
      // The fast insert either completes or waits for the slow one's tenant lock.
      await Promise.race([fast, waiting('classid <> 777')]);
      const during = await list(b);
      // A page with rows is held back too.
      const page = await b.fetch('/xAPI/statements?limit=2');
      const pageThrough = page.headers.get('x-experience-api-consistent-through')!;
      assert.equal(((await page.json()) as { statements: unknown[] }).statements.length, 2);
      await db.query('SELECT pg_advisory_unlock(777, 1)');
      assert.equal((await slow).status, 204);
      assert.equal((await fast).status, 204);
      const final = await list(a);
      assert.deepEqual(final.ids.slice(0, during.ids.length), during.ids, 'what a reader saw earlier is a prefix of what it sees later');
      assert.deepEqual(final.ids.sort(), [slowId, fastId].sort());
      const slowStored = Date.parse(final.statements.find((x) => x.id === slowId)!.stored);
      assert.ok(Date.parse(during.through) < slowStored, `consistent-through ${during.through} claimed a statement not yet visible (stored ${slowStored})`);
      assert.ok(Date.parse(pageThrough) < slowStored, `consistent-through ${pageThrough} of a page claimed a statement not yet visible (stored ${slowStored})`);
    } finally {
      await db.query('SELECT pg_advisory_unlock_all()');
      await db.query('DROP TRIGGER IF EXISTS park_slow ON statements');
    }
  });

  test('a burst of requests to one server (written in shared transactions) keeps each request all-or-nothing', async () => {
    const stored = randomUUID();
    assert.equal((await put(a, stored, statement({ verb: VERB_A }))).status, 204);
    const voided = randomUUID();
    const voiding = randomUUID();
    assert.equal((await put(a, voided, statement())).status, 204);
    assert.equal((await put(a, voiding, statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: voided } }))).status, 204);
    const fresh = () => statement({ id: randomUUID() });
    type Case = { body: Record<string, unknown>[]; expect: number[] };
    const cases: Case[] = [];
    for (let i = 0; i < 10; i++) cases.push({ body: [fresh(), fresh(), fresh()], expect: [200] });
    // A stored id with other content: 409, and the request's other statements are not stored.
    for (let i = 0; i < 5; i++) cases.push({ body: [fresh(), statement({ id: stored, verb: VERB_B }), fresh()], expect: [409] });
    // Voiding a voiding statement: 400.
    for (let i = 0; i < 3; i++) {
      cases.push({
        body: [fresh(), statement({ id: randomUUID(), verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: voiding } })],
        expect: [400],
      });
    }
    // Two requests of the burst sharing an id: same content both 200, different content one 409.
    const shared = randomUUID();
    cases.push({ body: [statement({ id: shared }), fresh()], expect: [200] }, { body: [fresh(), statement({ id: shared })], expect: [200] });
    const contested = randomUUID();
    cases.push(
      { body: [statement({ id: contested, verb: VERB_A }), fresh()], expect: [200, 409] },
      { body: [fresh(), statement({ id: contested, verb: VERB_B })], expect: [200, 409] },
    );
    // A voiding statement and its target in two requests of the burst.
    const target = randomUUID();
    cases.push(
      { body: [statement({ id: target })], expect: [200] },
      { body: [statement({ id: randomUUID(), verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: target } })], expect: [200] },
    );
    const responses = await Promise.all(cases.map((c) => post(a, c.body)));
    const statuses = responses.map((r) => r.status);
    cases.forEach((c, i) => assert.ok(c.expect.includes(statuses[i]), `request ${i}: ${statuses[i]}, expected ${c.expect.join(' or ')}`));
    const contestedStatuses = statuses.slice(-4, -2).sort();
    assert.deepEqual(contestedStatuses, [200, 409]);
    for (const [i, c] of cases.entries()) {
      const ids = c.body.map((x) => x.id as string).filter((id) => id !== stored && id !== shared && id !== contested);
      const rows = await rowsFor(ids);
      assert.equal(rows.length, statuses[i] === 200 ? ids.length : 0, `request ${i} (${statuses[i]}) stored ${rows.length} of ${ids.length}`);
    }
    assert.equal((await rowsFor([shared])).length, 1);
    assert.equal((await a.fetch(`/xAPI/statements?statementId=${target}`)).status, 404, 'voided within the burst');
    assert.equal((await a.fetch(`/xAPI/statements?voidedStatementId=${target}`)).status, 200);
    await assertIndexesWhole();
  });

  test('stored never goes backwards in seq order, whichever server stored the statement', async () => {
    const r = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM (SELECT stored_ms, lag(stored_ms) OVER (PARTITION BY tenant ORDER BY seq) AS prev FROM statements) x WHERE stored_ms < prev',
    );
    assert.equal(r.rows[0].n, 0);
  });
});

describe('start-up', { skip: postgresSkipped() }, () => {
  test('servers starting at once on a fresh database migrate it once, in turn', async () => {
    const url = await createDatabase();
    const config = loadConfig({
      LECTERN_RUNSERVER_BACKEND: 'postgres',
      LECTERN_POSTGRES_URL: url,
      LECTERN_POSTGRES_POOL_SIZE: '2',
      LECTERN_RUNSERVER_PORT: '0',
      LECTERN_LOG_LEVEL: 'silent',
      LECTERN_SHUTDOWN_TIMEOUT: '1',
    });
    const servers = await Promise.all(Array.from({ length: 4 }, () => startLrs(config, createLogger('silent'))));
    try {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      const versions = (await c.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version);
      await c.end();
      assert.deepEqual(versions, [...new Set(versions)]);
      assert.ok(versions.length >= 1);
      for (const s of servers) assert.equal((await fetch(`${s.url}/heartbeat`)).status, 200);
    } finally {
      await Promise.all(servers.map((s) => s.close()));
      await dropDatabase(url);
    }
  });

  test('a database that does not exist yet is created', async () => {
    const url = new URL(await createDatabase());
    await dropDatabase(url.toString());
    const config = loadConfig({ LECTERN_RUNSERVER_BACKEND: 'postgres', LECTERN_POSTGRES_URL: url.toString(), LECTERN_RUNSERVER_PORT: '0', LECTERN_LOG_LEVEL: 'silent' });
    const lrs = await startLrs(config, createLogger('silent'));
    try {
      assert.equal((await fetch(`${lrs.url}/heartbeat`)).status, 200);
    } finally {
      await lrs.close();
      await dropDatabase(url.toString());
    }
  });
});
