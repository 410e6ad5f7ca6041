/**
 * The statements of bench/postgres-load.ts (same seeded generator, ≈1% StatementRefs) in an
 * SQLite file with Lectern's schema, then EXPLAIN QUERY PLAN and the database time of the page
 * query of each filter, built by src/store/sql.ts exactly as a request builds it.
 *
 *   BENCH_STATEMENTS=100000 BENCH_SQLITE=/tmp/plans.sqlite node bench/sqlite-plans.ts
 *
 * An existing file is reused (only the plans are made again), so the same data can be explained
 * before and after a change to the query. Rows are made by the LRS's own prepareStatement and
 * stamp, and inserted in a tight loop (no HTTP); since/until → seq as the store does it.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { SqliteStore } from '../src/store/sqlite/store.ts';
import { type SeqWindow, SQLITE, statementPageSql, storedSeqSql, uuidBytes, uuidText } from '../src/store/sql.ts';
import { actorKeys } from '../src/xapi/agents.ts';
import type { StatementFilter, StatementQuery } from '../src/xapi/query.ts';
import { stamp } from '../src/xapi/statement.ts';
import { course, DAY, makeStatement, MINE, N, question, START_MS } from './postgres-load.ts';

const PATH = process.env.BENCH_SQLITE ?? 'bench/results/plans.sqlite';
const OUT = process.env.BENCH_OUT ?? 'bench/results/sqlite-plans.out.md';
const STEP_MS = (365 * DAY) / N;

async function load(): Promise<void> {
  const store = new SqliteStore({ path: PATH, synchronous: 'NORMAL' });
  await store.migrate();
  await store.close();
  const db = new DatabaseSync(PATH);
  const st = db.prepare(
    'INSERT INTO statements (seq, tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority, full) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const ag = db.prepare('INSERT INTO statement_agents (tenant, agent, seq, role) VALUES (?, ?, ?, ?)');
  const ac = db.prepare('INSERT INTO statement_activities (tenant, activity, seq, direct) VALUES (?, ?, ?, ?)');
  // The dictionaries, as the store fills them (src/store/sqlite/store.ts).
  const tenantIds = new Map<string, number>();
  const tenantId = (name: string) => {
    let id = tenantIds.get(name);
    if (id === undefined) tenantIds.set(name, (id = Number(db.prepare('INSERT INTO tenants (name) VALUES (?)').run(name).lastInsertRowid)));
    return id;
  };
  const keyIds = new Map<string, number>();
  const addKey = db.prepare('INSERT INTO keys (tenant, key) VALUES (?, ?)');
  const keyId = (tenant: number, key: string) => {
    let id = keyIds.get(`${tenant} ${key}`);
    if (id === undefined) keyIds.set(`${tenant} ${key}`, (id = Number(addKey.run(tenant, key).lastInsertRowid)));
    return id;
  };
  const uuid = (u: string | null) => (u === null ? null : uuidBytes(u));
  const ids: string[] = new Array(N);
  const tenants: string[] = new Array(N);
  const voidAt = new Map<number, number>();
  const voidedSet = new Set<number>();
  const t0 = performance.now();
  db.exec('BEGIN');
  for (let i = 0; i < N; i++) {
    const { tenant, p, voided } = makeStatement(i, ids, tenants, voidAt, voidedSet);
    const seq = i + 1;
    const storedMs = Math.floor(START_MS + i * STEP_MS);
    const t = tenantId(tenant);
    const authority = p.statement.authority ? actorKeys(p.statement.authority)[0] : undefined;
    const full = JSON.stringify(stamp(p, new Date(storedMs).toISOString()));
    st.run(seq, t, uuidBytes(p.id), storedMs, keyId(t, p.verb), uuid(p.registration), uuid(p.refId), p.voids ? 1 : 0, voided ? 1 : 0, authority ? keyId(t, authority) : null, full);
    for (const a of p.agents) ag.run(t, keyId(t, a.key), seq, a.role);
    for (const a of p.activities) ac.run(t, keyId(t, a.id), seq, a.direct ? 1 : 0);
    if (seq % 50_000 === 0) {
      db.exec('COMMIT; BEGIN');
      process.stderr.write(`\r${seq.toLocaleString('en')} statements, ${Math.round(seq / ((performance.now() - t0) / 1000)).toLocaleString('en')}/s   `);
    }
  }
  db.exec('COMMIT');
  process.stderr.write('\n');
  db.close();
}

interface Case {
  title: string;
  query: Omit<Partial<StatementQuery>, 'filter'> & { filter?: Partial<StatementFilter> };
}

function main(): void {
  const db = new DatabaseSync(PATH);
  const one = (sql: string, ...params: (string | number)[]) => db.prepare(sql).get(...params) as Record<string, string | number | Uint8Array>;
  // The default tenant's id, as SqliteStore resolves it.
  const tid = Number(one("SELECT id FROM tenants WHERE name = ''").id);
  const count = one('SELECT count(*) AS n, sum(ref_id IS NOT NULL) AS refs FROM statements WHERE tenant = ?', tid);
  const targeted = one(
    'SELECT ak.key AS agent_key FROM statements r JOIN statements t ON t.tenant = r.tenant AND t.id = r.ref_id JOIN statement_agents a ON a.tenant = t.tenant AND a.seq = t.seq AND a.role = 1 ' +
      "JOIN keys ak ON ak.id = a.agent JOIN keys v ON v.id = r.verb WHERE r.tenant = ? AND v.key = 'http://example.com/verbs/commented' AND ak.key LIKE 'mbox:mailto:learner1%' ORDER BY r.seq DESC LIMIT 1",
    tid,
  );
  const reg = one('SELECT registration AS r FROM statements WHERE tenant = ? AND registration IS NOT NULL ORDER BY seq DESC LIMIT 1 OFFSET ?', tid, Math.min(5000, Math.floor(N / 2)));
  const mid = one('SELECT seq FROM statements WHERE tenant = ? ORDER BY seq LIMIT 1 OFFSET ?', tid, Math.floor(N * 0.45));
  const busyAgent = 'mbox:mailto:learner0@example.com';
  const quietAgent = 'mbox:mailto:learner15000@example.com';
  const sinceMs = START_MS + 180 * DAY;
  const cases: Case[] = [
    { title: 'No filter', query: {} },
    { title: 'agent (a very active learner)', query: { filter: { agent: busyAgent } } },
    { title: 'agent (a rare learner)', query: { filter: { agent: quietAgent } } },
    { title: 'agent + related_agents', query: { filter: { agent: quietAgent, relatedAgents: true } } },
    { title: 'agent targeted by StatementRefs', query: { filter: { agent: String(targeted?.agent_key ?? busyAgent) } } },
    { title: 'verb (50%)', query: { filter: { verb: 'http://adlnet.gov/expapi/verbs/answered' } } },
    { title: 'verb (rare, 0.3%)', query: { filter: { verb: 'http://example.com/verbs/rare-3' } } },
    { title: 'verb (rare) from a cursor in the middle', query: { filter: { verb: 'http://example.com/verbs/rare-3' }, after: String(mid.seq) } },
    { title: 'activity (one question)', query: { filter: { activity: question(3, 42) } } },
    { title: 'activity + related_activities (a course)', query: { filter: { activity: course(3), relatedActivities: true } } },
    { title: 'registration', query: { filter: { registration: uuidText(reg.r as Uint8Array) } } },
    { title: 'since + until (ten days)', query: { since: sinceMs, until: sinceMs + 10 * DAY } },
    { title: 'verb + since + until', query: { filter: { verb: 'http://adlnet.gov/expapi/verbs/failed' }, since: sinceMs, until: sinceMs + 10 * DAY } },
    { title: 'agent + verb + activity', query: { filter: { agent: busyAgent, verb: 'http://adlnet.gov/expapi/verbs/answered', activity: question(0, 1) } } },
    { title: 'verb ascending from a cursor', query: { after: String(mid.seq), ascending: true, filter: { verb: 'http://adlnet.gov/expapi/verbs/completed' } } },
    { title: 'mine + verb', query: { filter: { authority: actorKeys(MINE)[0], verb: 'http://adlnet.gov/expapi/verbs/answered' } } },
  ];
  const out = [`SQLite ${one('SELECT sqlite_version() AS v').v}; ${Number(count.n).toLocaleString('en')} statements in the tenant, ${Number(count.refs).toLocaleString('en')} StatementRefs.\n`];
  const summary = ['| query | rows | ms (median of 5) |', '|---|---|---|'];
  for (const c of cases) {
    const q: StatementQuery = { limit: 100, maxBytes: 4 * 1024 * 1024, ascending: false, format: 'exact', attachments: false, ...c.query, filter: { relatedAgents: false, relatedActivities: false, ...c.query.filter } };
    const w: SeqWindow = {};
    // As SqliteStore.queryStatements: since/until become seq bounds first.
    const bound = (ms: number, which: 'since' | 'until') => {
      const b = storedSeqSql(tid, ms, which, SQLITE);
      return BigInt(one(b.sql, ...(b.params as (string | number)[])).seq as number);
    };
    if (q.since !== undefined) w.from = bound(q.since, 'since');
    if (q.until !== undefined) w.to = bound(q.until, 'until');
    if (q.after !== undefined) w[q.ascending ? 'after' : 'before'] = BigInt(q.after);
    const { sql, params } = statementPageSql(tid, q, w, SQLITE);
    const stmt = db.prepare(sql);
    const bind = params as (string | number | bigint | null)[];
    const times: number[] = [];
    let rows = 0;
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      rows = stmt.all(...bind).length;
      times.push(performance.now() - t0);
    }
    const ms = times.sort((a, b) => a - b)[2];
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...bind) as { id: number; parent: number; detail: string }[]);
    const depth = new Map<number, number>([[0, -1]]);
    const lines = plan.map((r) => {
      const d = (depth.get(r.parent) ?? -1) + 1;
      depth.set(r.id, d);
      return `${'  '.repeat(d)}${r.detail}`;
    });
    out.push(`### ${c.title}\n\nRows: ${rows}; ${ms.toFixed(2)} ms (median of 5).\n\n\`\`\`\n${lines.join('\n')}\n\`\`\`\n`);
    summary.push(`| ${c.title} | ${rows} | ${ms.toFixed(2)} |`);
    process.stderr.write(`${c.title}: ${ms.toFixed(2)} ms\n`);
  }
  // since → seq, as SqliteStore does it (the page query above only sees the seq bounds).
  for (const which of ['since', 'until'] as const) {
    const { sql, params } = storedSeqSql(tid, sinceMs, which, SQLITE);
    const bind = params as (string | number)[];
    const stmt = db.prepare(sql);
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      stmt.get(...bind);
      times.push(performance.now() - t0);
    }
    const ms = times.sort((a, b) => a - b)[2];
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...bind) as { detail: string }[]).map((r) => r.detail).join('\n');
    out.push(`### ${which} → seq (bisecting seq)\n\n${ms.toFixed(3)} ms (median of 5).\n\n\`\`\`\n${plan}\n\`\`\`\n`);
    summary.push(`| ${which} → seq | 1 | ${ms.toFixed(3)} |`);
  }
  writeFileSync(OUT, [out[0], summary.join('\n'), '', ...out.slice(1)].join('\n'));
  process.stderr.write(`wrote ${OUT}\n`);
  db.close();
}

if (!existsSync(PATH)) await load();
main();
