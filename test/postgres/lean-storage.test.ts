/**
 * Lean storage on PostgreSQL (migration 7): a version-6 database holding rows written by the old
 * SQL (text tenant, verb, agent and activity keys) is upgraded in place and answers every filter,
 * GET by id, voiding, `more` paging and erasure as before; `lectern erase` leaves no key of the
 * person in the `keys` dictionary of its tenant, and another tenant's identical key alone.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import pg from 'pg';
import { MIGRATIONS } from '../../src/store/postgres/migrations.ts';
import { actorKeys } from '../../src/xapi/agents.ts';
import { prepareStatement, stamp } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';
import { jsonInit, postgresBackend, startTestLrs, statement, TENANT_B, type TestLrs } from '../helpers/lrs.ts';
import { runCli } from '../lifecycle/helpers.ts';
import { postgresSkipped } from '../helpers/postgres.ts';

const BEN = { objectType: 'Agent', name: 'Ben', mbox: 'mailto:ben@example.com' };
const ANN = { objectType: 'Agent', name: 'Ann', mbox: 'mailto:ann@example.com' };
const CARL = { objectType: 'Agent', mbox: 'mailto:carl@example.com' };
const BEN_KEY = 'mbox:mailto:ben@example.com';
const PASSED = { id: 'http://adlnet.gov/expapi/verbs/passed' };
const FAILED = { id: 'http://adlnet.gov/expapi/verbs/failed' };
const enc = encodeURIComponent;

async function ids(t: TestLrs, query: string): Promise<string[]> {
  const res = await t.fetch(`/xAPI/statements?${query}`);
  assert.equal(res.status, 200, query);
  return ((await res.json()) as { statements: { id: string }[] }).statements.map((s) => s.id);
}

/** The tenants whose dictionary holds `key`. */
async function tenantsWithKey(db: pg.Client, key: string): Promise<string[]> {
  const r = await db.query<{ name: string }>('SELECT t.name FROM keys k JOIN tenants t ON t.id = k.tenant WHERE k.key = $1 ORDER BY 1', [key]);
  return r.rows.map((row) => row.name);
}

describe('PostgreSQL lean storage', { skip: postgresSkipped() }, () => {
  test('a version-6 database written by the old SQL is migrated in place: filters, GET by id, voiding, paging, erasure', async () => {
    const t = await startTestLrs(postgresBackend);
    const db = new pg.Client({ connectionString: t.env.LECTERN_POSTGRES_URL });
    try {
      // The authority the LRS stamps for the test user, as the old rows carry it.
      const [probe] = (await (await t.fetch('/xAPI/statements', jsonInit('POST', statement()))).json()) as string[];
      const authority = ((await (await t.fetch(`/xAPI/statements?statementId=${probe}`)).json()) as { authority: Actor }).authority;
      await t.lrs.close();

      // The schema of the previous release (migrations 1–6), empty.
      await db.connect();
      await db.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
      await db.query('CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
      for (const m of MIGRATIONS.filter((x) => x.version <= 6)) {
        await db.query(m.sql);
        await db.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      }
      // Rows as the old store wrote them (text keys; link rows from prepareStatement).
      const t0 = Date.now() - 3_600_000;
      let n = 0;
      const old: { id: string; seq: string; full: string; storedMs: number }[] = [];
      const write = async (tenant: string, s: Record<string, unknown>, voided = false) => {
        const p = prepareStatement({ id: randomUUID(), ...s } as unknown as Statement, authority, '1.0.3');
        const storedMs = t0 + 1000 * n++;
        const full = JSON.stringify(stamp(p, new Date(storedMs).toISOString()));
        const r = await db.query<{ seq: string }>(
          'INSERT INTO statements (seq, tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority_key, "full") ' +
            "VALUES (nextval('statements_seq'), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq",
          [tenant, p.id, storedMs, p.verb, p.registration, p.refId, p.voids ? 1 : 0, voided ? 1 : 0, actorKeys(authority)[0], full],
        );
        const seq = r.rows[0].seq;
        for (const a of p.agents) await db.query('INSERT INTO statement_agents (tenant, agent_key, seq, role) VALUES ($1, $2, $3, $4)', [tenant, a.key, seq, a.role]);
        for (const a of p.activities) {
          await db.query('INSERT INTO statement_activities (tenant, activity_id, seq, direct) VALUES ($1, $2, $3, $4)', [tenant, a.id, seq, a.direct ? 1 : 0]);
        }
        for (const d of p.definitions) {
          await db.query('INSERT INTO activities (tenant, id, definition) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [tenant, d.id, JSON.stringify(d.definition)]);
        }
        old.push({ id: p.id, seq, full, storedMs });
        return p.id;
      };
      const act1 = `http://example.com/activities/${randomUUID()}`;
      const act2 = `http://example.com/activities/${randomUUID()}`;
      const course = `http://example.com/courses/${randomUUID()}`;
      const registration = randomUUID();
      const a1 = await write('', {
        actor: BEN,
        verb: PASSED,
        object: { objectType: 'Activity', id: act1, definition: { name: { 'en-US': 'one' } } },
        context: { registration, instructor: ANN, contextActivities: { parent: [{ id: course }] } },
      });
      const more: string[] = [];
      for (let i = 0; i < 4; i++) more.push(await write('', { actor: BEN, verb: PASSED, object: { id: act2 } }));
      const b1 = await write('', { actor: ANN, verb: FAILED, object: { id: act2 } }, true);
      const v1 = await write('', { actor: ANN, verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: b1 } });
      const r1 = await write('', { actor: CARL, verb: { id: 'http://example.com/verbs/commented' }, object: { objectType: 'StatementRef', id: a1 } });
      // The same person and activity in another tenant.
      const inB = await write('b', { actor: BEN, verb: PASSED, object: { id: act1 } });
      await db.query("SELECT setval('statements_seq', (SELECT max(seq) FROM statements))");

      await t.restart();

      const [a2, a3, a4, a5] = more;
      assert.deepEqual(await ids(t, `agent=${enc(JSON.stringify(BEN))}`), [r1, a5, a4, a3, a2, a1], 'agent, with a StatementRef targeting');
      assert.deepEqual(await ids(t, `verb=${enc(PASSED.id)}`), [r1, a5, a4, a3, a2, a1]);
      assert.deepEqual(await ids(t, `verb=${enc(FAILED.id)}`), [v1], 'the voided match is not returned; its voiding statement is');
      assert.deepEqual(await ids(t, `activity=${enc(act1)}`), [r1, a1]);
      assert.deepEqual(await ids(t, `activity=${enc(course)}`), []);
      assert.deepEqual(await ids(t, `activity=${enc(course)}&related_activities=true`), [r1, a1]);
      assert.deepEqual(await ids(t, `registration=${registration}`), [r1, a1]);
      assert.deepEqual(await ids(t, `agent=${enc(JSON.stringify(ANN))}`), [v1]);
      assert.deepEqual(await ids(t, `agent=${enc(JSON.stringify(ANN))}&related_agents=true`), [r1, v1, a1]);
      assert.deepEqual(await ids(t, 'mine=true'), [r1, v1, a5, a4, a3, a2, a1]);
      const iso = (ms: number) => enc(new Date(ms).toISOString());
      const storedOf = (id: string) => old.find((o) => o.id === id)!.storedMs;
      assert.deepEqual(await ids(t, `since=${iso(storedOf(a2))}&until=${iso(storedOf(a4))}`), [a4, a3]);
      assert.deepEqual(await ids(t, `since=${iso(storedOf(a2))}&until=${iso(storedOf(a4))}&ascending=true`), [a3, a4]);
      assert.deepEqual(await ids(t, ''), [r1, v1, a5, a4, a3, a2, a1], 'the other tenant stays apart');
      assert.deepEqual(
        ((await (await t.fetch('/xAPI/statements', { user: TENANT_B })).json()) as { statements: { id: string }[] }).statements.map((s) => s.id),
        [inB],
      );

      // GET by id, voiding.
      const got = await t.fetch(`/xAPI/statements?statementId=${a1}`);
      assert.equal(got.status, 200);
      assert.deepEqual(await got.json(), JSON.parse(old[0].full));
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${b1}`)).status, 404);
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${b1}`)).status, 200);
      const activity = (await (await t.fetch(`/xAPI/activities?activityId=${enc(act1)}`)).json()) as { definition: unknown };
      assert.deepEqual(activity.definition, { name: { 'en-US': 'one' } });

      // `more` paging, 2 per page.
      const pages: string[][] = [];
      let next: string | undefined = `/xAPI/statements?verb=${enc(PASSED.id)}&limit=2`;
      while (next) {
        const body = (await (await t.fetch(next)).json()) as { statements: { id: string }[]; more: string };
        pages.push(body.statements.map((s) => s.id));
        next = body.more || undefined;
      }
      assert.deepEqual(
        pages.filter((p) => p.length),
        [
          [r1, a5],
          [a4, a3],
          [a2, a1],
        ],
      );

      // Stored as they were: seq kept (cursors, the outbox), the JSON byte for byte; one key row per key.
      for (const o of old) {
        const r = await db.query<{ seq: string; full: string }>('SELECT seq, "full"::text AS full FROM statements WHERE id = $1', [o.id]);
        assert.deepEqual(r.rows[0], { seq: o.seq, full: o.full });
      }
      assert.deepEqual(await tenantsWithKey(db, BEN_KEY), ['', 'b']);
      assert.deepEqual(await tenantsWithKey(db, PASSED.id), ['', 'b']);
      assert.equal((await db.query('SELECT count(*)::int AS n FROM schema_migrations WHERE version = 7')).rows[0].n, 1);

      // New statements join the old keys.
      const [fresh] = (await (await t.fetch('/xAPI/statements', jsonInit('POST', statement({ actor: BEN, verb: PASSED, object: { id: act1 } })))).json()) as string[];
      assert.deepEqual(await ids(t, `agent=${enc(JSON.stringify(BEN))}&activity=${enc(act1)}`), [fresh, r1, a1]);
      assert.deepEqual(await tenantsWithKey(db, BEN_KEY), ['', 'b']);

      // Erasure of the migrated rows.
      const erased = await runCli(t, ['erase', '--agent', JSON.stringify({ mbox: BEN.mbox })]);
      assert.equal(erased.code, 0, erased.stderr);
      assert.deepEqual(await ids(t, `agent=${enc(JSON.stringify(BEN))}`), []);
      assert.deepEqual(await ids(t, `agent=${enc(JSON.stringify(ANN))}&related_agents=true`), [v1]);
      assert.deepEqual(await tenantsWithKey(db, BEN_KEY), ['b'], "Ben's key is gone from this tenant's dictionary only");
      assert.deepEqual(await tenantsWithKey(db, 'mbox:mailto:ann@example.com'), [''], 'a key still in use stays');
    } finally {
      await db.end().catch(() => undefined);
      await t.close();
    }
  });

  test('lectern erase leaves no key of the person in its tenant; the same key of another tenant stays', async () => {
    const t = await startTestLrs(postgresBackend);
    const db = new pg.Client({ connectionString: t.env.LECTERN_POSTGRES_URL });
    try {
      await db.connect();
      const group = { objectType: 'Group', mbox: 'mailto:team@example.com', member: [BEN, ANN] };
      const posted = [
        statement({ actor: BEN }),
        statement({ actor: ANN, context: { instructor: BEN } }),
        statement({ actor: group }),
        statement({ actor: CARL, object: { objectType: 'SubStatement', actor: BEN, verb: PASSED, object: { id: 'http://example.com/a' } } }),
        statement({ actor: ANN }),
      ];
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', posted))).status, 200);
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ actor: BEN }), { user: TENANT_B }))).status, 200);
      assert.deepEqual(await tenantsWithKey(db, BEN_KEY), ['', 'b']);

      const r = await runCli(t, ['erase', '--agent', JSON.stringify({ mbox: BEN.mbox })]);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(await tenantsWithKey(db, BEN_KEY), ['b']);
      assert.equal((await db.query<{ n: number }>("SELECT count(*)::int AS n FROM keys WHERE key LIKE '%ben@example.com%'")).rows[0].n, 1);
      // Keys nothing refers to any more go with it (Carl's only statement was about Ben); keys
      // still referred to stay; Ben can be stored again.
      assert.deepEqual(await tenantsWithKey(db, 'mbox:mailto:carl@example.com'), []);
      assert.deepEqual(await tenantsWithKey(db, 'mbox:mailto:ann@example.com'), ['']);
      assert.deepEqual(await tenantsWithKey(db, PASSED.id), ['', 'b']);
      const [again] = (await (await t.fetch('/xAPI/statements', jsonInit('POST', statement({ actor: BEN })))).json()) as string[];
      assert.deepEqual(await ids(t, `agent=${enc(JSON.stringify(BEN))}`), [again]);
      assert.deepEqual(await tenantsWithKey(db, BEN_KEY), ['', 'b']);
    } finally {
      await db.end().catch(() => undefined);
      await t.close();
    }
  });
});
