/**
 * GET /admin/api/overview through HTTP on every backend: the counts kept as statements are written
 * (batch POST, single POST, PUT, a repeated PUT not counted twice, a voiding statement counted
 * under its verb) and taken off by erasure and prune; the days (the injected clock moves the
 * server's "now", and on SQLite `stored` too); ingest minutes, the last statement, the
 * rejections of the last day; roles (a store administrator sees only its store, 404 for
 * another's; xAPI scopes 403); forwarding and every store's totals for the operator only. Its cost
 * does not grow with the distinct verbs a plain writer sends (hardening round 2, item 5): after
 * 5,000 of them a store's day holds at most VERBS_PER_DAY verb rows and one "other" row (read from
 * the database), and the answer (and the console's page) has the top verbs and "other".
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { ManualClock } from '../../src/clock.ts';
import { OTHER_VERB, VERBS_PER_DAY } from '../../src/store/overview.ts';
import { signIn } from '../console/sign-in.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { runCli } from '../lifecycle/helpers.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const B_ADMIN: TestUser = { username: 'b-admin', password: 'b-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:b-admin@example.com' }, target: 'b' };
const DAY = 86_400_000;
const VERB = (name: string) => ({ id: `http://example.com/verbs/${name}`, display: { en: name } });
const CAL = { mbox: 'mailto:cal@example.com' };
// An unreachable target: forwarded statements wait in the outbox (a lag to show).
const FORWARDINGS = JSON.stringify([{ is_active: true, url: 'http://127.0.0.1:9/xAPI/statements', basic_username: 'u', basic_password: 'p', max_retries: 1000, timeout: 1 }]);

interface Overview {
  target: string;
  statements: number;
  lastStored: string | null;
  days: { date: string; statements: number }[];
  topVerbs: { verb: string; statements: number }[];
  otherVerbs: number;
  ingest: { perMinute: number; minutes: { minute: string; statements: number }[] };
  rejectionsLastDay: number;
  forwarding?: { queued: number; dead: number; lagMs: number | null; targets: { target: string; queued: number; lagMs: number | null }[] };
  stores?: { target: string; statements: number; recent: number }[];
}

async function overview(lrs: TestLrs, user: TestUser | null, target?: string): Promise<{ status: number; body: Overview & { detail?: unknown } }> {
  const res = await lrs.fetch(`/admin/api/overview${target === undefined ? '' : `?target=${encodeURIComponent(target)}`}`, { user, version: null });
  return { status: res.status, body: (await res.json()) as Overview };
}

async function ok(lrs: TestLrs, user: TestUser, target?: string): Promise<Overview> {
  const r = await overview(lrs, user, target);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

async function post(lrs: TestLrs, body: unknown, user: TestUser = ADMIN): Promise<string[]> {
  const res = await lrs.fetch('/xAPI/statements', jsonInit('POST', body, { user }));
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as string[];
}

async function storedMs(lrs: TestLrs, id: string): Promise<number> {
  const res = await lrs.fetch(`/xAPI/statements?statementId=${id}`);
  assert.equal(res.status, 200);
  return Date.parse(((await res.json()) as { stored: string }).stored);
}

const verbCounts = (o: Overview): Record<string, number> =>
  Object.fromEntries(o.topVerbs.map((v) => [v.verb.replace('http://example.com/verbs/', '').replace('http://adlnet.gov/expapi/verbs/', ''), v.statements]));

for (const backend of BACKENDS) {
  describe(`GET /admin/api/overview (${backend.name})`, () => {
    let lrs: TestLrs;
    const clock = new ManualClock(Date.now());
    /** The server's clock back to the wall clock's (PostgreSQL's `stored` is the database's). */
    const sync = () => clock.advance(Math.max(0, Date.now() - clock.now()));
    before(async () => {
      lrs = await startTestLrs(backend, {
        users: [ADMIN, TENANT_B, OPERATOR, B_ADMIN],
        clock,
        env: { LECTERN_XAPI_FORWARDINGS: FORWARDINGS, LECTERN_XAPI_FORWARDING_BACKOFF: '300000' },
      });
    });
    after(async () => lrs?.close());

    test('an empty store: zeros, 30 days ending today, no last statement', async () => {
      sync();
      const o = await ok(lrs, OPERATOR);
      assert.equal(o.target, '');
      assert.equal(o.statements, 0);
      assert.equal(o.lastStored, null);
      assert.equal(o.days.length, 30);
      assert.equal(o.days[29].date, new Date(clock.now()).toISOString().slice(0, 10));
      assert.ok(o.days.every((d) => d.statements === 0));
      assert.deepEqual(o.topVerbs, []);
      assert.equal(o.ingest.minutes.length, 15);
      assert.equal(o.rejectionsLastDay, 0);
    });

    test('counted as written: a batch, a single POST, a PUT (once, however often repeated), a voiding statement; rejections of the last day', async () => {
      await post(lrs, [statement({ verb: VERB('a') }), statement({ verb: VERB('a') }), statement({ verb: VERB('b') })]);
      await post(lrs, statement({ verb: VERB('a') }));
      const putId = randomUUID();
      for (let i = 0; i < 2; i++) {
        const res = await lrs.fetch(`/xAPI/statements?statementId=${putId}`, jsonInit('PUT', statement({ verb: VERB('c') })));
        assert.equal(res.status, 204, await res.clone().text());
      }
      const [voiding] = await post(
        lrs,
        statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided', display: { en: 'voided' } }, object: { objectType: 'StatementRef', id: putId } }),
      );
      // Another store's statements are not this one's.
      await post(lrs, [statement(), statement()], TENANT_B);
      // A refused write: a kept rejection.
      const bad = await lrs.fetch('/xAPI/statements', jsonInit('POST', { actor: CAL }));
      assert.equal(bad.status, 400);
      await lrs.lrs.rejections.flush();
      sync();

      const o = await ok(lrs, OPERATOR, '');
      assert.equal(o.statements, 6, 'voided ones count (all the rows kept, as /admin/api/stores counts)');
      assert.equal(
        o.days.reduce((n, d) => n + d.statements, 0),
        6,
        "all in the last 30 days (today's, or yesterday's just after midnight)",
      );
      assert.deepEqual(verbCounts(o), { a: 3, b: 1, c: 1, voided: 1 });
      assert.equal(o.topVerbs[0].verb, 'http://example.com/verbs/a', 'most first');
      assert.equal(o.lastStored, new Date(await storedMs(lrs, voiding)).toISOString());
      assert.equal(
        o.ingest.minutes.reduce((n, m) => n + m.statements, 0),
        6,
        'every statement in the last minutes',
      );
      assert.equal(o.rejectionsLastDay, 1);
      assert.ok(o.forwarding, 'the operator sees forwarding');
      assert.equal(o.forwarding.queued, 8, "both stores' statements wait for the unreachable target");
      assert.equal(typeof o.forwarding.lagMs, 'number');
      assert.deepEqual(
        o.stores?.map((s) => [s.target, s.statements, s.recent]),
        [
          ['', 6, 6],
          ['b', 2, 2],
        ],
      );

      const b = await ok(lrs, OPERATOR, 'b');
      assert.equal(b.statements, 2);
      assert.equal(b.rejectionsLastDay, 0);
    });

    test('roles: a store administrator sees its own store only (another is a 404), without forwarding or other stores; xAPI scopes 403; no credentials 401; a bad parameter 400', async () => {
      const mine = await ok(lrs, B_ADMIN);
      assert.equal(mine.target, 'b');
      assert.equal(mine.statements, 2);
      assert.equal(mine.forwarding, undefined);
      assert.equal(mine.stores, undefined);
      assert.equal((await ok(lrs, B_ADMIN, 'b')).statements, 2);
      for (const other of ['', 'c']) {
        const r = await overview(lrs, B_ADMIN, other);
        assert.equal(r.status, 404, other);
        assert.equal(typeof r.body.detail, 'string');
      }
      assert.equal((await overview(lrs, ADMIN)).status, 403);
      assert.equal((await overview(lrs, TENANT_B)).status, 403);
      assert.equal((await overview(lrs, null)).status, 401);
      const res = await lrs.fetch('/admin/api/overview?targte=b', { user: OPERATOR, version: null });
      assert.equal(res.status, 400);
      assert.deepEqual(((await res.json()) as { detail: { loc: string[] }[] }).detail[0].loc, ['query', 'targte']);
    });

    test('erasing a learner and pruning take their statements off the counts', async () => {
      await post(lrs, [statement({ actor: CAL, verb: VERB('a') }), statement({ actor: CAL, verb: VERB('d') })]);
      sync();
      assert.deepEqual(verbCounts(await ok(lrs, OPERATOR)), { a: 4, b: 1, c: 1, d: 1, voided: 1 });
      const erase = await lrs.fetch('/admin/api/erase', jsonInit('POST', { agent: CAL, dryRun: false }, { user: OPERATOR, version: null }));
      assert.equal(erase.status, 200, await erase.clone().text());
      let o = await ok(lrs, OPERATOR);
      assert.equal(o.statements, 6);
      assert.deepEqual(verbCounts(o), { a: 3, b: 1, c: 1, voided: 1 }, 'a verb no statement has left is not listed');

      // Prune what the default store holds up to now: its counts go to none; store b keeps its own.
      const [last] = await post(lrs, statement({ verb: VERB('e') }));
      const beforeIso = new Date((await storedMs(lrs, last)) + 1).toISOString();
      const r = await runCli(lrs, ['prune', '--before', beforeIso, '-t', '']);
      assert.equal(r.code, 0, r.stderr);
      o = await ok(lrs, OPERATOR);
      assert.equal(o.statements, 0);
      assert.ok(o.days.every((d) => d.statements === 0));
      assert.deepEqual(o.topVerbs, []);
      assert.equal(o.lastStored, null);
      assert.equal((await ok(lrs, OPERATOR, 'b')).statements, 2);
    });

    test("days: a day later the counts are yesterday's; statements stored then count on their own day", async () => {
      await post(lrs, [statement(), statement()], TENANT_B);
      sync();
      clock.advance(DAY);
      // `stored` is the wall clock's (the store's own clock; test/store/overview-counts.test.ts moves it on SQLite).
      await post(lrs, statement(), TENANT_B);
      const o = await ok(lrs, B_ADMIN);
      assert.equal(o.statements, 5);
      assert.equal(o.days[29].statements, 0, "nothing stored on the server's new day");
      assert.equal(
        o.days.slice(0, 29).reduce((n, d) => n + d.statements, 0),
        5,
      );
      assert.equal(
        o.ingest.minutes.reduce((n, m) => n + m.statements, 0),
        0,
        'a day later, nothing arrived in the last minutes',
      );
      assert.equal(o.days[29].date, new Date(clock.now()).toISOString().slice(0, 10));
      assert.equal(o.rejectionsLastDay, 0);
    });
  });
}

const WRITER: TestUser = { username: 'writer', password: 'writer-pass', scopes: ['statements/write'], agent: { mbox: 'mailto:writer@example.com' }, target: 'v' };
const V_ADMIN: TestUser = { username: 'v-admin', password: 'v-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:v-admin@example.com' }, target: 'v' };
const JUNK = { mbox: 'mailto:junk@example.com' };

/** Store `v`'s count rows per day, read from the database: how many, and how many of them are "other". */
async function countRowsOfV(lrs: TestLrs): Promise<{ rows: number; others: number }[]> {
  const text =
    `SELECT c.day, count(*) AS rows, sum(CASE WHEN c.verb = ${OTHER_VERB} THEN 1 ELSE 0 END) AS others ` +
    `FROM statement_counts c JOIN tenants t ON t.id = c.tenant WHERE t.name = 'v' GROUP BY c.day`;
  let found: Record<string, unknown>[];
  if (lrs.env.LECTERN_RUNSERVER_BACKEND === 'postgres') {
    const c = new pg.Client({ connectionString: lrs.env.LECTERN_POSTGRES_URL });
    await c.connect();
    found = (await c.query(text)).rows as Record<string, unknown>[];
    await c.end();
  } else {
    const db = new DatabaseSync(lrs.env.LECTERN_SQLITE_PATH, { readOnly: true });
    found = db.prepare(text).all() as Record<string, unknown>[];
    db.close();
  }
  return found.map((r) => ({ rows: Number(r.rows), others: Number(r.others) }));
}

for (const backend of BACKENDS) {
  describe(`the Overview bounded whatever the verbs a writer sends (${backend.name})`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend, { users: [WRITER, V_ADMIN], env: { LECTERN_CONSOLE_SECRET: 'a-console-secret-of-at-least-32-characters' } });
    });
    after(async () => lrs?.close());

    test('5,000 distinct verbs: a day keeps at most VERBS_PER_DAY verb rows and one "other"; the answer has the top verbs and "other"', async () => {
      await post(lrs, [...Array.from({ length: 30 }, () => statement({ verb: VERB('heavy') })), ...Array.from({ length: 20 }, () => statement({ verb: VERB('second') }))], WRITER);
      for (let batch = 0; batch < 10; batch++) {
        await post(
          lrs,
          Array.from({ length: 500 }, (_, i) => statement({ actor: JUNK, verb: VERB(`junk-${batch * 500 + i}`) })),
          WRITER,
        );
        if (batch === 4)
          await post(
            lrs,
            Array.from({ length: 5 }, () => statement({ verb: VERB('heavy') })),
            WRITER,
          );
      }
      const days = await countRowsOfV(lrs);
      assert.ok(days.length >= 1);
      for (const d of days) {
        assert.ok(d.rows <= VERBS_PER_DAY + 1, `${d.rows} count rows in a day`);
        assert.ok(d.others <= 1);
      }

      const o = await ok(lrs, V_ADMIN);
      assert.equal(o.statements, 5055);
      assert.deepEqual(
        o.topVerbs.slice(0, 2).map((v) => [v.verb, v.statements]),
        [
          [VERB('heavy').id, 35],
          [VERB('second').id, 20],
        ],
      );
      assert.equal(o.topVerbs.length, 10);
      assert.ok(o.otherVerbs > 0);
      assert.equal(o.topVerbs.reduce((n, v) => n + v.statements, 0) + o.otherVerbs, 5055, 'the top verbs and "other" count every statement');

      const s = await signIn(lrs, V_ADMIN);
      const page = await (await fetch(`${lrs.url}/console/overview`, { headers: { cookie: s.cookie } })).text();
      assert.match(page, new RegExp(`<tr><td>Other verbs</td><td>${o.otherVerbs.toLocaleString('en')}</td></tr>`));
      assert.match(page, /verbs\/heavy(<\/a>|<\/code>)<\/td><td>35</);
    });
  });
}
