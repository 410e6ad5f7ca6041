/**
 * `lectern prune --before TIME` and LECTERN_RETENTION_DAYS on every backend: the statements stored
 * before the time gone with their link rows, outbox items and the attachment data only they
 * carried; later ones, statements referring to pruned ones, shared attachments and documents kept;
 * -t one store; --dry-run; an interrupted run finished by a re-run; the server's background pass;
 * on PostgreSQL, a prune's reads in proportion to what it removes, not to the store.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, jsonInit, postgresBackend, startTestLrs, statement, TENANT_B, type TestLrs } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { allStatements, ANN, attachmentOf, countRows, countSql, danglingRows, multipartPost, post, putDocument, runCli, startCli } from './helpers.ts';

const DAY = 86_400_000;
// An unreachable target: forwarded statements wait in the outbox.
const FORWARDINGS = JSON.stringify([{ is_active: true, url: 'http://127.0.0.1:9/xAPI/statements', basic_username: 'u', basic_password: 'p', max_retries: 1000, timeout: 1 }]);

const outboxOf = (lrs: TestLrs, ids: string[]) =>
  countSql(
    lrs,
    lrs.config.backend === 'sqlite'
      ? `SELECT count(*) AS n FROM forward_outbox o JOIN statements s ON s.seq = o.seq WHERE json_extract(s."full", '$.id') IN (${ids.map((i) => `'${i}'`).join(',')})`
      : `SELECT count(*) AS n FROM forward_outbox o JOIN statements s ON s.seq = o.seq WHERE s.id::text IN (${ids.map((i) => `'${i}'`).join(',')})`,
  );

async function getById(lrs: TestLrs, id: string): Promise<number> {
  const res = await lrs.fetch(`/xAPI/statements?statementId=${id}`);
  await res.arrayBuffer();
  return res.status;
}

async function storedMs(lrs: TestLrs, id: string): Promise<number> {
  const res = await lrs.fetch(`/xAPI/statements?statementId=${id}`);
  assert.equal(res.status, 200);
  return Date.parse(((await res.json()) as { stored: string }).stored);
}

/** Waits (at most a millisecond) until the wall clock is past `ms`, so the next statement is stored later. */
async function pastMs(ms: number): Promise<void> {
  while (Date.now() <= ms) await new Promise((r) => setImmediate(r));
}

interface Seeded {
  old: string[];
  onlyOld: string;
  shared: string;
  target: string;
  kept: string[];
  refToPruned: string;
  oldInB: string;
  keptInB: string;
  beforeIso: string;
}

/** Old statements (one with its own attachment, one sharing one, a target), then, stored later, new ones (one referring to the target). */
async function seedOldAndNew(lrs: TestLrs): Promise<Seeded> {
  const onlyOld = 'only the old statement carried this';
  const shared = 'carried by an old and a new statement';
  const res1 = await lrs.fetch(
    '/xAPI/statements',
    multipartPost([statement({ actor: ANN, attachments: [attachmentOf(onlyOld, 'text/plain')] })], [{ data: onlyOld, contentType: 'text/plain' }]),
  );
  assert.equal(res1.status, 200, await res1.clone().text());
  const [a] = (await res1.json()) as string[];
  const res2 = await lrs.fetch(
    '/xAPI/statements',
    multipartPost([statement({ actor: ANN, attachments: [attachmentOf(shared, 'text/plain')] })], [{ data: shared, contentType: 'text/plain' }]),
  );
  assert.equal(res2.status, 200);
  const [b] = (await res2.json()) as string[];
  const plain = await post(lrs, [statement(), statement({ verb: { id: 'http://example.com/verbs/old' } })]);
  const target = plain[1];
  const resB = await lrs.fetch('/xAPI/statements', jsonInit('POST', statement(), { user: TENANT_B }));
  assert.equal(resB.status, 200);
  const [oldInB] = (await resB.json()) as string[];
  // A refused write: a kept rejection as old as the old statements.
  const bad = await lrs.fetch('/xAPI/statements', jsonInit('POST', { actor: ANN }));
  assert.equal(bad.status, 400);
  await lrs.lrs.rejections.flush();
  await pastMs(Math.max(await storedMs(lrs, target), await storedMs(lrs, a)));

  const res3 = await lrs.fetch(
    '/xAPI/statements',
    multipartPost([statement({ actor: ANN, attachments: [attachmentOf(shared, 'text/plain')] })], [{ data: shared, contentType: 'text/plain' }]),
  );
  assert.equal(res3.status, 200);
  const [c] = (await res3.json()) as string[];
  const [refToPruned] = await post(lrs, statement({ object: { objectType: 'StatementRef', id: target } }));
  const [d] = await post(lrs, statement({ verb: { id: 'http://example.com/verbs/new' } }));
  const resB2 = await lrs.fetch('/xAPI/statements', jsonInit('POST', statement(), { user: TENANT_B }));
  const [keptInB] = (await resB2.json()) as string[];
  const act = encodeURIComponent('http://example.com/activities/explosives-training');
  await putDocument(lrs, `/xAPI/activities/state?activityId=${act}&agent=${encodeURIComponent(JSON.stringify(ANN))}&stateId=s`, '{"page":3}', 'application/json');
  await putDocument(lrs, `/xAPI/activities/profile?activityId=${act}&profileId=p`, 'text', 'text/plain');
  return { old: [a, b, ...plain], onlyOld, shared, target, kept: [c, refToPruned, d], refToPruned, oldInB, keptInB, beforeIso: new Date(await storedMs(lrs, c)).toISOString() };
}

for (const backend of BACKENDS) {
  describe(`lectern prune (${backend.name})`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend, { env: { LECTERN_XAPI_FORWARDINGS: FORWARDINGS, LECTERN_XAPI_FORWARDING_BACKOFF: '300000' } });
    });
    after(async () => lrs?.close());

    test('--dry-run counts; -t prunes one store; then every store: old statements, their outbox items and their own attachments gone, the rest kept', async () => {
      const s = await seedOldAndNew(lrs);
      const docs = await countRows(lrs, 'documents');
      assert.equal(await countRows(lrs, 'attachments'), 2);
      assert.ok((await outboxOf(lrs, s.old)) > 0, 'old statements wait in the outbox');

      const dry = await runCli(lrs, ['prune', '--before', s.beforeIso, '--dry-run', '--json']);
      assert.equal(dry.code, 0, dry.stderr);
      const dryReports = dry.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      const byStore = new Map(dryReports.map((r) => [r.target, r]));
      assert.equal(byStore.get('').statements, 4);
      assert.equal(byStore.get('').rejections, 1);
      assert.equal(byStore.get('b').statements, 1);
      for (const id of [...s.old, ...s.kept]) assert.equal(await getById(lrs, id), 200);

      const onlyB = await runCli(lrs, ['prune', '--before', s.beforeIso, '-t', 'b']);
      assert.equal(onlyB.code, 0, onlyB.stderr);
      assert.match(onlyB.stdout, /store "b": removed 1 statements stored before/);
      assert.equal(await getById(lrs, s.old[0]), 200, 'the default store is not pruned by -t b');
      const inB = await lrs.fetch(`/xAPI/statements?statementId=${s.oldInB}`, { user: TENANT_B });
      assert.equal(inB.status, 404);
      assert.equal((await lrs.fetch(`/xAPI/statements?statementId=${s.keptInB}`, { user: TENANT_B })).status, 200);

      const r = await runCli(lrs, ['prune', '--before', s.beforeIso, '--json']);
      assert.equal(r.code, 0, r.stderr);
      const report = r.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .find((x) => x.target === '');
      assert.deepEqual(
        { statements: report.statements, attachments: report.attachments, rejections: report.rejections, complete: report.complete },
        { statements: 4, attachments: 1, rejections: 1, complete: true },
      );
      for (const id of s.old) assert.equal(await getById(lrs, id), 404, id);
      for (const id of s.kept) assert.equal(await getById(lrs, id), 200, id);
      const served = (await allStatements(lrs)).map((x) => x.id);
      assert.deepEqual(
        served.filter((id) => s.old.includes(id as string)),
        [],
      );
      for (const id of s.kept) assert.ok(served.includes(id));
      // The StatementRef to a pruned statement stays, its target simply gone.
      const ref = await lrs.fetch(`/xAPI/statements?statementId=${s.refToPruned}`);
      assert.equal(((await ref.json()) as { object: { id: string } }).object.id, s.target);
      assert.equal(await countRows(lrs, 'attachments'), 1, 'the shared attachment stays');
      assert.equal(await countRows(lrs, 'documents'), docs);
      assert.equal(await outboxOf(lrs, s.kept), 3, 'later statements still queued');
      assert.equal(await countSql(lrs, 'SELECT count(*) AS n FROM forward_outbox o WHERE NOT EXISTS (SELECT 1 FROM statements s WHERE s.seq = o.seq)'), 0);
      assert.deepEqual(await danglingRows(lrs), { agents: 0, activities: 0, links: 0, attachments: 0, carriers: 0, ...(lrs.config.backend === 'sqlite' ? { ids: 0 } : {}) });
      const again = await runCli(lrs, ['prune', '--before', s.beforeIso, '--json']);
      assert.equal(
        again.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l))
          .find((x) => x.target === '').statements,
        0,
      );
    });

    test('Ctrl-C stops after the batch in hand; the same command finishes; the store stays consistent', async () => {
      const ids = await post(
        lrs,
        Array.from({ length: 300 }, (_, i) => statement({ verb: { id: `http://example.com/verbs/bulk/${i}` } })),
      );
      await pastMs(await storedMs(lrs, ids[299]));
      const [later] = await post(lrs, statement());
      const beforeIso = new Date(await storedMs(lrs, later)).toISOString();
      const run = startCli(lrs, ['prune', '--before', beforeIso, '-t', '', '--batch-size', '2', '--progress-interval', '0'], {
        onStderr: (text, child) => {
          // Once past the three statements the first test kept.
          const done = Math.max(0, ...[...text.matchAll(/prune default store: ([\d,]+) statements/g)].map((m) => Number(m[1].replace(/,/g, ''))));
          if (done >= 10 && !child.killed) child.kill('SIGINT');
        },
      });
      const stopped = await run.done;
      assert.equal(stopped.code, 130, stopped.stdout + stopped.stderr);
      assert.match(stopped.stdout, /interrupted before the end: run the same command again/);
      const left = (await Promise.all(ids.map((id) => getById(lrs, id)))).filter((st) => st === 200).length;
      assert.ok(left > 0 && left < 300, `left ${left}: ${stopped.stdout} ${stopped.stderr.slice(-300)}`);
      assert.deepEqual(await danglingRows(lrs), { agents: 0, activities: 0, links: 0, attachments: 0, carriers: 0, ...(lrs.config.backend === 'sqlite' ? { ids: 0 } : {}) });
      const r = await runCli(lrs, ['prune', '--before', beforeIso, '-t', '']);
      assert.equal(r.code, 0, r.stderr);
      for (const id of ids) assert.equal(await getById(lrs, id), 404);
      assert.equal(await getById(lrs, later), 200);
    });

    test('a malformed --before: exit 2 and a clear message', async () => {
      for (const bad of ['yesterday', '2025-13-01T00:00:00Z', '']) {
        const r = await runCli(lrs, ['prune', '--before', bad]);
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, /--before must be a date, 2026-12-01 \(that day's start in UTC\), or a date-time with its offset/);
      }
      const r = await runCli(lrs, ['prune']);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /--before is required/);
    });
  });

  describe(`LECTERN_RETENTION_DAYS (${backend.name})`, () => {
    let lrs: TestLrs;
    const clock = new ManualClock(Date.now());
    before(async () => {
      lrs = await startTestLrs(backend, { env: { LECTERN_RETENTION_DAYS: '2' }, clock });
    });
    after(async () => lrs?.close());

    test('the server prunes what is older than the setting, measured by its clock', async () => {
      const [old] = await post(lrs, statement());
      assert.ok(lrs.lrs.retention);
      // A day later: nothing is older than two days.
      clock.advance(Date.now() - clock.now() + DAY);
      await lrs.lrs.retention.run();
      assert.equal(await getById(lrs, old), 200);
      // Two days and a millisecond after now: the statement is older than two days.
      await pastMs(await storedMs(lrs, old));
      clock.advance(Date.now() - clock.now() + 2 * DAY + 1);
      const reports = await lrs.lrs.retention.run();
      assert.equal(reports?.find((r) => r.target === '')?.statements, 1);
      assert.equal(await getById(lrs, old), 404);
      const [fresh] = await post(lrs, statement());
      assert.equal(await getById(lrs, fresh), 200);
    });

    if (backend.name === 'postgres') {
      test('one process at a time: while one holds the advisory lock, another skips its pass', async () => {
        const second = await startTestLrs(backend, { shareWith: lrs, clock });
        try {
          const skipped = await lrs.lrs.store.exclusively('retention', () => second.lrs.retention!.run());
          assert.equal(skipped, undefined);
          assert.ok(Array.isArray(await second.lrs.retention!.run()), 'the lock is free again');
        } finally {
          await second.close();
        }
      });
    }
  });
}

describe('LECTERN_RETENTION_DAYS off by default', () => {
  test('no background prune', async () => {
    const lrs = await startTestLrs();
    try {
      assert.equal(lrs.lrs.retention, undefined);
    } finally {
      await lrs.close();
    }
  });
});

const MEASURED = ['statements', 'statement_agents', 'statement_activities', 'keys'];

/**
 * Buffers read (hit or not) from the statement tables and their indexes, by table, once no other
 * session is connected to the database. A session reports its reads to the statistics in batches
 * (PostgreSQL 15: at most once a second, an idle one up to 10 s later) but always as it ends: the
 * server's sessions, stopped before the prune, and the prune's own, ended with its process, have
 * then reported all they read, and no one else reads these tables (autovacuum is off on them).
 */
async function statementBlocks(lrs: TestLrs): Promise<Record<string, number>> {
  const c = new pg.Client({ connectionString: lrs.config.postgresUrl });
  await c.connect();
  try {
    for (let i = 0; ; i++) {
      const others = await c.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()");
      if (!others.rowCount) break;
      assert.ok(i < 1000, `sessions still open on the database: ${others.rowCount}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await c.query('SELECT pg_stat_clear_snapshot()');
    const r = await c.query<{ relname: string; n: string }>(
      'SELECT relname, (coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0) + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0))::bigint AS n FROM pg_statio_user_tables WHERE relname = ANY($1)',
      [MEASURED],
    );
    return Object.fromEntries(r.rows.map((row) => [row.relname, Number(row.n)]));
  } finally {
    await c.end();
  }
}

const total = (blocks: Record<string, number>): number => Object.values(blocks).reduce((a, b) => a + b, 0);

describe('lectern prune reads in proportion to what it removes (postgres)', { skip: postgresSkipped() }, () => {
  let lrs: TestLrs;
  before(async () => {
    lrs = await startTestLrs(postgresBackend);
  });
  after(async () => lrs?.close());

  test('one authority and one verb in every statement, each old statement its own learner: no walk of their statements per key', async () => {
    const c = new pg.Client({ connectionString: lrs.config.postgresUrl });
    await c.connect();
    // Only the prune's reads are counted: no autovacuum pass over these tables meanwhile.
    for (const t of MEASURED) await c.query(`ALTER TABLE ${t} SET (autovacuum_enabled = off)`);
    const old = await post(
      lrs,
      Array.from({ length: 200 }, (_, i) => statement({ actor: { mbox: `mailto:learner-${i}@example.com` } })),
    );
    await pastMs(await storedMs(lrs, old[199]));
    const [first] = await post(lrs, statement());
    for (let i = 0; i < 16; i++)
      await post(
        lrs,
        Array.from({ length: 500 }, () => statement()),
      );
    // The statistics autovacuum would have: one authority, one verb (after the server's own ANALYZE, which this one waits for).
    await c.query('ANALYZE');
    await c.end();
    const beforeIso = new Date(await storedMs(lrs, first)).toISOString();
    // Only the prune's reads are counted: the server stopped, its sessions' reads reported (they
    // came up to 170,000 buffers of statements some seconds later, in a prune's count when the
    // machine was loaded).
    await lrs.lrs.close();
    const before = await statementBlocks(lrs);
    const r = await runCli(lrs, ['prune', '--before', beforeIso, '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout.trim().split('\n')[0]).statements, 200);
    const after = await statementBlocks(lrs);
    await lrs.restart();
    const byTable = MEASURED.map((t) => `${t} ${(after[t] ?? 0) - (before[t] ?? 0)}`).join(', ');
    const blocks = (after.statements ?? 0) - (before.statements ?? 0);
    // The statements table and its indexes: each removed statement is found and deleted, and its
    // learner's key checked unused, by a few probes of a few pages each (≈ 12 buffers a statement
    // here); before, the key checks walked the authority's 8,000 entries and their rows (≈ 1,000
    // a statement). The link tables are left out: at this size the planner may merge-join them
    // whole, which is cheap here.
    assert.ok(total(after) > total(before), "the prune's reads are reported");
    assert.ok(blocks < 200 * 100, `${blocks} buffers of statements for 200 statements (${byTable})`);
    for (const id of old.slice(0, 3)) assert.equal(await getById(lrs, id), 404);
    assert.equal(await getById(lrs, first), 200);
    assert.deepEqual(await danglingRows(lrs), { agents: 0, activities: 0, links: 0, attachments: 0, carriers: 0 });
  });
});

const VACUUMED = ['statements', 'statement_agents', 'statement_activities'];

describe('after a prune, autovacuum reclaims the space (postgres)', { skip: postgresSkipped() }, () => {
  let lrs: TestLrs;
  before(async () => {
    lrs = await startTestLrs(postgresBackend);
  });
  after(async () => lrs?.close());

  test("pruning a tenth leaves every statement table past its autovacuum threshold (PostgreSQL's default waits for a fifth)", async () => {
    const old = await post(
      lrs,
      Array.from({ length: 150 }, () => statement()),
    );
    await pastMs(await storedMs(lrs, old[149]));
    const [first] = await post(lrs, statement());
    for (let i = 0; i < 3; i++)
      await post(
        lrs,
        Array.from({ length: 450 }, () => statement()),
      );
    const c = new pg.Client({ connectionString: lrs.config.postgresUrl });
    await c.connect();
    try {
      // The row counts autovacuum's threshold is taken from.
      await c.query(`ANALYZE ${VACUUMED.join(', ')}`);
      const vacuums = async () =>
        (
          await c.query<{ relname: string; dead: string; tuples: number; scale: string; vacuums: string }>(
            `SELECT s.relname, s.n_dead_tup AS dead, c.reltuples AS tuples, s.autovacuum_count AS vacuums,
             coalesce((SELECT split_part(o, '=', 2) FROM unnest(c.reloptions) o WHERE o LIKE 'autovacuum_vacuum_scale_factor=%'), current_setting('autovacuum_vacuum_scale_factor')) AS scale
           FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = ANY($1) ORDER BY s.relname`,
            [VACUUMED],
          )
        ).rows;
      const before = new Map((await vacuums()).map((r) => [r.relname, Number(r.vacuums)]));
      const r = await runCli(lrs, ['prune', '--before', new Date(await storedMs(lrs, first)).toISOString(), '--json']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout.trim().split('\n')[0]).statements, 150);
      // The prune's session reports its deletions as it ends, just after the command's exit.
      for (let i = 0; ; i++) {
        await c.query('SELECT pg_stat_clear_snapshot()');
        const rows = await vacuums();
        const due = rows.map((t) => ({ ...t, due: Number(t.vacuums) > before.get(t.relname)! || Number(t.dead) > 50 + Number(t.scale) * t.tuples }));
        if (due.every((t) => t.due)) break;
        assert.ok(i < 500, `not due for autovacuum: ${JSON.stringify(due.filter((t) => !t.due))}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await c.end();
    }
  });
});
