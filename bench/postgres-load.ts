/**
 * Loads a large statement table into PostgreSQL, then records the query plans of every xAPI
 * filter (docs/postgres-plans.md is written from its output).
 *
 *   node bench/postgres-load.ts                      # 1,000,000 statements, throwaway cluster
 *   BENCH_STATEMENTS=200000 node bench/postgres-load.ts
 *   BENCH_POSTGRES_URL=postgres://…/lectern_bench node bench/postgres-load.ts   # an existing server
 *
 * Rows are made by the LRS's own code (prepareStatement, stamp), so index rows are exactly what
 * the LRS would write, then streamed with COPY into the real schema (indexes in place; the
 * tenants and keys dictionaries numbered here as the store would), in transactions of 50,000
 * statements. Then: the LRS's own insert path (PostgresStore) for
 * comparison, ANALYZE, and EXPLAIN (ANALYZE, BUFFERS) of the page query of each filter, built by
 * src/store/sql.ts exactly as a request would build it. Deterministic data (seeded PRNG).
 */
import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { filterKeyIds, PostgresStore, SESSION_OPTIONS } from '../src/store/postgres/store.ts';
import { POSTGRES, type SeqWindow, statementPageSql, storedSeqSql } from '../src/store/sql.ts';
import { actorKeys } from '../src/xapi/agents.ts';
import type { StatementFilter, StatementQuery } from '../src/xapi/query.ts';
import { type PreparedStatement, prepareStatement, stamp } from '../src/xapi/statement.ts';
import type { Actor, Statement } from '../src/xapi/types.ts';
import { startCluster, type PgCluster } from '../test/helpers/postgres.ts';
import { questionActivity, SCORED_RESULT } from './fixtures.ts';

export const N = Number(process.env.BENCH_STATEMENTS ?? 1_000_000);
const CHUNK = 50_000;
const OUT = process.env.BENCH_OUT ?? 'bench/postgres-plans.out.md';
const LEARNERS = 20_000;
const COURSES = 50;
const QUESTIONS_PER_COURSE = 100;
export const DAY = 86_400_000;
export const START_MS = Date.UTC(2025, 0, 1);
const STEP_MS = (365 * DAY) / N;

// ----- deterministic data ------------------------------------------------------------------

let seed = 0x5eed;
/** mulberry32 */
function rand(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (n: number) => Math.floor(rand() * n);
const hex = (n: number) => Array.from({ length: n }, () => pick(16).toString(16)).join('');
const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-${'89ab'[pick(4)]}${hex(3)}-${hex(12)}`;
/** A stable UUID for a key (registrations: one per learner and course). */
const keyedUuid = (k: number) => {
  const h = (x: number) => ((Math.imul(x ^ (x >>> 16), 0x45d9f3b) >>> 0).toString(16).padStart(8, '0'));
  return `${h(k)}-${h(k * 7 + 1).slice(0, 4)}-4${h(k * 13 + 2).slice(0, 3)}-a${h(k * 17 + 3).slice(0, 3)}-${h(k * 19 + 4)}${h(k * 23 + 5).slice(0, 4)}`;
};

const VERBS: [string, number][] = [
  ['http://adlnet.gov/expapi/verbs/answered', 0.5],
  ['http://adlnet.gov/expapi/verbs/experienced', 0.2],
  ['http://adlnet.gov/expapi/verbs/attempted', 0.1],
  ['http://adlnet.gov/expapi/verbs/completed', 0.08],
  ['http://adlnet.gov/expapi/verbs/passed', 0.05],
  ['http://adlnet.gov/expapi/verbs/failed', 0.03],
  ...Array.from({ length: 14 }, (_, i): [string, number] => [`http://example.com/verbs/rare-${i}`, 0.04 / 14]),
];
function verb(): string {
  let r = rand();
  for (const [id, p] of VERBS) if ((r -= p) < 0) return id;
  return VERBS[0][0];
}

const ADMIN: Actor = { objectType: 'Agent', mbox: 'mailto:admin@example.com' };
export const MINE: Actor = { objectType: 'Agent', mbox: 'mailto:mine@example.com' };
const learner = (n: number): Actor => ({ objectType: 'Agent', name: `Learner ${n}`, mbox: `mailto:learner${n}@example.com` });
export const question = (c: number, q: number) => `http://example.com/courses/${c}/questions/${q}`;
export const course = (c: number) => `http://example.com/courses/${c}`;

interface Made {
  tenant: string;
  p: PreparedStatement;
  voided: boolean;
}

/** Statement i. Some are StatementRefs: 0.5% void an earlier statement, 0.5% comment on one. */
export function makeStatement(i: number, ids: string[], tenants: string[], voidAt: Map<number, number>, voidedSet: Set<number>): Made {
  const id = uuid();
  ids[i] = id;
  const target = voidAt.get(i);
  const authority = rand() < 0.05 ? MINE : ADMIN;
  const l = Math.floor(LEARNERS * rand() ** 2); // skewed: a few very active learners
  let s: Statement;
  let tenant = rand() < 0.05 ? 'b' : '';
  if (target !== undefined) {
    tenant = tenants[target];
    s = { id, actor: ADMIN, verb: { id: 'http://adlnet.gov/expapi/verbs/voided', display: { 'en-US': 'voided' } }, object: { objectType: 'StatementRef', id: ids[target] } } as Statement;
  } else if (i > 1000 && rand() < 0.005) {
    const j = i - 1 - pick(Math.min(i - 1, 50_000));
    tenant = tenants[j];
    s = {
      id,
      actor: learner(l),
      verb: { id: 'http://example.com/verbs/commented', display: { 'en-US': 'commented' } },
      object: { objectType: 'StatementRef', id: ids[j] },
      result: { response: 'I found this statement useful.' },
    } as Statement;
  } else {
    const c = (l * 7 + pick(3)) % COURSES;
    const q = pick(QUESTIONS_PER_COURSE);
    const v = verb();
    s = {
      id,
      actor: learner(l),
      verb: { id: v, display: { 'en-US': v.slice(v.lastIndexOf('/') + 1) } },
      object: questionActivity(question(c, q), `Question ${q} of course ${c}`),
      result: SCORED_RESULT,
      context: {
        registration: keyedUuid(l * COURSES + c),
        ...(rand() < 0.1 && { instructor: { objectType: 'Agent', name: 'Teacher', mbox: `mailto:teacher${pick(200)}@example.com` } }),
        contextActivities: { parent: [{ id: course(c) }], grouping: [{ id: `http://example.com/programs/${c % 5}` }] },
        platform: 'Lectern bench',
        language: 'en-US',
      },
      timestamp: new Date(START_MS + i * STEP_MS - 1000).toISOString(),
    } as Statement;
    // 0.5% of plain statements get voided a little later.
    if (rand() < 0.005) {
      const at = i + 1 + pick(1000);
      if (at < N && !voidAt.has(at)) {
        voidAt.set(at, i);
        voidedSet.add(i);
      }
    }
  }
  tenants[i] = tenant;
  return { tenant, p: prepareStatement(s, authority, '1.0.3'), voided: voidedSet.has(i) };
}

/** COPY text format: backslash is the only character JSON.stringify output needs escaped. */
const cell = (v: string | number | null): string => (v === null ? '\\N' : typeof v === 'number' ? String(v) : v.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r'));
const line = (cells: (string | number | null)[]): string => `${cells.map(cell).join('\t')}\n`;

// ----- load --------------------------------------------------------------------------------

async function copy(c: pg.PoolClient, sql: string, text: string): Promise<void> {
  await pipeline(Readable.from([text]), c.query(copyFrom(sql)));
}

async function load(pool: pg.Pool): Promise<{ seconds: number; rows: Record<string, number> }> {
  const ids: string[] = new Array(N);
  const tenants: string[] = new Array(N);
  const voidAt = new Map<number, number>();
  const voidedSet = new Set<number>();
  const definitions = new Map<string, string>();
  const rows = { statements: 0, statement_agents: 0, statement_activities: 0 };
  // The dictionaries, numbered as the store numbers them (ids from 1, never reused).
  const tenantIds = new Map<string, number>();
  const keyIds = new Map<string, number>();
  const t0 = performance.now();
  for (let from = 0; from < N; from += CHUNK) {
    let te = '';
    let ke = '';
    let st = '';
    let ag = '';
    let ac = '';
    const tenantId = (name: string) => {
      let id = tenantIds.get(name);
      if (id === undefined) {
        tenantIds.set(name, (id = tenantIds.size + 1));
        te += line([id, name]);
      }
      return id;
    };
    const keyId = (tenant: number, key: string) => {
      let id = keyIds.get(`${tenant}\t${key}`);
      if (id === undefined) {
        keyIds.set(`${tenant}\t${key}`, (id = keyIds.size + 1));
        ke += line([id, tenant, key]);
      }
      return id;
    };
    for (let i = from; i < Math.min(N, from + CHUNK); i++) {
      const { tenant, p, voided } = makeStatement(i, ids, tenants, voidAt, voidedSet);
      const seq = i + 1;
      const storedMs = Math.floor(START_MS + i * STEP_MS);
      const t = tenantId(tenant);
      const authority = p.statement.authority ? keyId(t, actorKeys(p.statement.authority)[0]) : null;
      const full = JSON.stringify(stamp(p, new Date(storedMs).toISOString()));
      st += line([seq, t, p.id, storedMs, keyId(t, p.verb), p.registration, p.refId, p.voids ? 1 : 0, voided ? 1 : 0, authority, full]);
      for (const a of p.agents) ag += line([keyId(t, a.key), a.role, seq]);
      for (const a of p.activities) ac += line([keyId(t, a.id), a.direct ? 1 : 0, seq]);
      for (const d of p.definitions) definitions.set(`${tenant}\t${d.id}`, JSON.stringify(d.definition));
      rows.statements++;
      rows.statement_agents += p.agents.length;
      rows.statement_activities += p.activities.length;
    }
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      await copy(c, 'COPY tenants (id, name) FROM STDIN', te);
      await copy(c, 'COPY keys (id, tenant, key) FROM STDIN', ke);
      await copy(c, 'COPY statements (seq, tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority, "full") FROM STDIN', st);
      await copy(c, 'COPY statement_agents (agent, role, seq) FROM STDIN', ag);
      await copy(c, 'COPY statement_activities (activity, direct, seq) FROM STDIN', ac);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    const done = Math.min(N, from + CHUNK);
    const s = (performance.now() - t0) / 1000;
    process.stderr.write(`\r${done.toLocaleString('en')} statements, ${Math.round(done / s).toLocaleString('en')}/s   `);
  }
  const c = await pool.connect();
  try {
    await copy(c, 'COPY activities (tenant, id, definition) FROM STDIN', [...definitions].map(([k, d]) => line([...k.split('\t'), d])).join(''));
    await c.query(`SELECT setval('statements_seq', $1)`, [N]);
    for (const table of ['tenants', 'keys']) await c.query(`SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT max(id) FROM ${table}))`);
  } finally {
    c.release();
  }
  process.stderr.write('\n');
  return { seconds: (performance.now() - t0) / 1000, rows };
}

/** The LRS's own write path (lock, checks, one multi-row write per batch) for comparison. */
async function viaStore(url: string, total: number, batch: number, concurrency: number): Promise<number> {
  const store = new PostgresStore({ url, poolSize: concurrency, statementTimeoutMs: 0, connectTimeoutMs: 10_000, connectRetries: 0, connectBackoffMs: 0 });
  const ids: string[] = [];
  const tenants: string[] = [];
  const made: PreparedStatement[] = [];
  for (let i = 0; i < total; i++) made.push(makeStatement(i, ids, tenants, new Map(), new Set()).p);
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < made.length) {
        const part = made.slice(next, next + batch);
        next += batch;
        await store.insertStatements('store-bench', part, []);
      }
    }),
  );
  const s = (performance.now() - t0) / 1000;
  await store.close();
  return total / s;
}

// ----- plans -------------------------------------------------------------------------------

interface Case {
  title: string;
  why: string;
  query: Omit<Partial<StatementQuery>, 'filter'> & { filter?: Partial<StatementFilter> };
}

async function explain(pool: pg.Pool, tenant: number, c: Case): Promise<string> {
  const q: StatementQuery = {
    limit: 100,
    maxBytes: 4 * 1024 * 1024,
    ascending: false,
    format: 'exact',
    attachments: false,
    ...c.query,
    filter: { relatedAgents: false, relatedActivities: false, ...c.query.filter },
  };
  const w: SeqWindow = {};
  let pre = '';
  const run = async (sql: string, params: unknown[]) =>
    (await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, params)).rows.map((r) => r['QUERY PLAN']).join('\n');
  // since/until become seq bounds first (PostgresStore.queryStatements does the same).
  if (q.since !== undefined) {
    const { sql, params } = storedSeqSql(tenant, q.since, 'since', POSTGRES);
    pre += `-- since → first seq\n${await run(sql, params)}\n\n`;
    w.from = BigInt((await pool.query(sql, params)).rows[0].seq);
  }
  if (q.until !== undefined) {
    const { sql, params } = storedSeqSql(tenant, q.until, 'until', POSTGRES);
    pre += `-- until → last seq\n${await run(sql, params)}\n\n`;
    w.to = BigInt((await pool.query(sql, params)).rows[0].seq);
  }
  if (q.after !== undefined) {
    if (q.ascending) w.after = BigInt(q.after);
    else w.before = BigInt(q.after);
  }
  const ids = await filterKeyIds((text, values) => pool.query<{ id: number; key: string }>(text, values), tenant, q.filter);
  const { sql, params } = statementPageSql(tenant, q, w, POSTGRES, { ids });
  await pool.query(sql, params); // warm
  const plan = await run(sql, params);
  const rows = (await pool.query(sql, params)).rowCount;
  return `### ${c.title}\n\n${c.why}\n\nRows returned: ${rows} (limit + 1 = ${q.limit + 1}).\n\n\`\`\`\n${pre}${plan}\n\`\`\`\n`;
}

/** The load, then the LRS's own write path on top of it; figures go to `out`. */
async function loadAndMeasure(pool: pg.Pool, url: string, out: string[], version: string): Promise<void> {
  const { seconds, rows } = await load(pool);
  out.push(`# Load\n\nPostgreSQL ${version}; ${N.toLocaleString('en')} statements by COPY (indexes in place, ${CHUNK.toLocaleString('en')} per transaction): ` +
    `${seconds.toFixed(1)} s, ${Math.round(N / seconds).toLocaleString('en')} statements/s ` +
    `(${Object.entries(rows).map(([k, v]) => `${k}: ${v.toLocaleString('en')}`).join(', ')}).\n`);
  const t0 = performance.now();
  await pool.query('VACUUM ANALYZE');
  out.push(`VACUUM ANALYZE: ${((performance.now() - t0) / 1000).toFixed(1)} s.\n`);
  const sizes = await pool.query<{ name: string; size: string }>(
    "SELECT relname AS name, pg_size_pretty(pg_total_relation_size(oid)) AS size FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY pg_total_relation_size(oid) DESC",
  );
  out.push(`Sizes (with indexes and TOAST): ${sizes.rows.map((r) => `${r.name} ${r.size}`).join(', ')}.\n`);
  const storeRate = await viaStore(url, 50_000, 500, 4);
  const storeSingle = await viaStore(url, 5_000, 1, 8);
  out.push(
    `The LRS's own write path (PostgresStore.insertStatements, into the loaded table, one tenant): ` +
      `batches of 500 from 4 concurrent writers ${Math.round(storeRate).toLocaleString('en')} statements/s; ` +
      `single statements from 8 concurrent writers ${Math.round(storeSingle).toLocaleString('en')} statements/s.\n`,
  );

}

async function main(): Promise<void> {
  let cluster: PgCluster | undefined;
  let url = process.env.BENCH_POSTGRES_URL;
  if (!url) {
    cluster = await startCluster({
      durable: true,
      settings: [
        'shared_buffers = 1GB',
        'max_wal_size = 8GB',
        'checkpoint_timeout = 30min',
        'maintenance_work_mem = 512MB',
        'work_mem = 16MB',
        ...(process.env.BENCH_PG_SETTINGS ?? '').split(';').filter(Boolean),
      ],
    });
    url = cluster.url.replace(/\/postgres$/, '/lectern_bench');
  }
  try {
    const store = new PostgresStore({ url, poolSize: 2, statementTimeoutMs: 0, connectTimeoutMs: 10_000, connectRetries: 3, connectBackoffMs: 500 });
    await store.waitForServer();
    await store.migrate();
    await store.close();
    const pool = new pg.Pool({ connectionString: url, max: 4, options: SESSION_OPTIONS }); // as PostgresStore
    const out: string[] = [];
    const version = (await pool.query<{ server_version: string }>('SHOW server_version')).rows[0].server_version;
    // BENCH_PLANS_ONLY=1 with BENCH_POSTGRES_URL: plans of an already loaded database.
    if (!(process.env.BENCH_PLANS_ONLY === '1' && process.env.BENCH_POSTGRES_URL)) await loadAndMeasure(pool, url, out, version);

    // Parameters for the plans: real values from the data.
    const one = async (sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows[0] as Record<string, string>;
    const busyAgent = 'mbox:mailto:learner0@example.com';
    const quietAgent = 'mbox:mailto:learner15000@example.com';
    // The default tenant ('') is the first one the load numbers.
    const tid = Number((await one("SELECT id FROM tenants WHERE name = ''")).id);
    const targeted = await one(
      'SELECT k.key AS agent_key FROM statements r JOIN statements t ON t.tenant = r.tenant AND t.id = r.ref_id JOIN statement_agents a ON a.seq = t.seq AND a.role = 1 ' +
        "JOIN keys k ON k.id = a.agent WHERE r.tenant = $1 AND r.verb = (SELECT id FROM keys WHERE tenant = $1 AND key = 'http://example.com/verbs/commented') " +
        "AND k.key LIKE 'mbox:mailto:learner1%' ORDER BY r.seq DESC LIMIT 1",
      [tid],
    );
    const reg = await one('SELECT registration::text AS r FROM statements WHERE tenant = $1 AND registration IS NOT NULL ORDER BY seq DESC LIMIT 1 OFFSET $2', [tid, Math.min(5000, Math.floor(N / 2))]);
    const mid = await one('SELECT seq FROM statements WHERE tenant = $1 ORDER BY seq LIMIT 1 OFFSET $2', [tid, Math.floor(N * 0.45)]);
    const sinceMs = START_MS + 180 * DAY;
    const cases: Case[] = [
      { title: 'No filter (newest first)', why: 'The most common request: the latest page.', query: {} },
      { title: 'agent (a very active learner)', why: 'Drives from statement_agents (agent, role, seq) backwards; each hit joins statements by seq. StatementRef targeting runs alongside.', query: { filter: { agent: busyAgent } } },
      { title: 'agent (a rare learner)', why: 'Few matches: the scans stop at the end of the agent\'s index range.', query: { filter: { agent: quietAgent } } },
      { title: 'agent + related_agents=true', why: 'Same index range, without the role = 1 condition (authority, instructor, team, SubStatement).', query: { filter: { agent: quietAgent, relatedAgents: true } } },
      { title: 'agent whose statements are targeted by StatementRefs', why: 'Checks that statements referring to this agent\'s statements are found.', query: { filter: { agent: targeted?.agent_key ?? busyAgent } } },
      { title: 'verb (50% of statements)', why: 'statements (tenant, verb, seq) backwards; stops after 101 rows.', query: { filter: { verb: 'http://adlnet.gov/expapi/verbs/answered' } } },
      { title: 'verb (a rare verb, 0.3%)', why: 'Same index, a longer range walk.', query: { filter: { verb: 'http://example.com/verbs/rare-3' } } },
      { title: 'activity (one question)', why: 'statement_activities (activity, direct, seq) backwards, direct = 1 only.', query: { filter: { activity: question(3, 42) } } },
      { title: 'activity + related_activities=true (a course: every statement of its questions)', why: 'The parent context activity: a long range in statement_activities.', query: { filter: { activity: course(3), relatedActivities: true } } },
      { title: 'registration', why: 'Partial index statements (tenant, registration, seq).', query: { filter: { registration: reg.r } } },
      { title: 'since + until (ten days in the middle of the year)', why: 'Two index probes turn the times into a seq range, then the page walks statements (tenant, seq).', query: { since: sinceMs, until: sinceMs + 10 * DAY } },
      { title: 'verb + since + until', why: 'The seq range bounds the verb index walk.', query: { filter: { verb: 'http://adlnet.gov/expapi/verbs/failed' }, since: sinceMs, until: sinceMs + 10 * DAY } },
      { title: 'agent + verb + activity', why: 'The agent index drives; the other conditions are checked on the joined rows.', query: { filter: { agent: busyAgent, verb: 'http://adlnet.gov/expapi/verbs/answered', activity: question(0, 1) } } },
      { title: 'paging cursor (search_after from a `more` link), no filter', why: 'Keyset: seq < cursor on statements (tenant, seq).', query: { after: mid.seq } },
      { title: 'paging cursor, verb filter, ascending', why: 'Keyset on the verb index.', query: { after: mid.seq, ascending: true, filter: { verb: 'http://adlnet.gov/expapi/verbs/completed' } } },
      { title: 'mine=true (authority)', why: 'statements (tenant, authority, seq).', query: { filter: { authority: actorKeys(MINE)[0] } } },
    ];
    out.push('\n# Plans\n');
    for (const c of cases) {
      out.push(await explain(pool, tid, c));
      process.stderr.write(`explained: ${c.title}\n`);
    }
    const single = async (title: string, sql: string, params: unknown[]) =>
      `### ${title}\n\n\`\`\`\n${(await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, params)).rows.map((r) => r['QUERY PLAN']).join('\n')}\n\`\`\`\n`;
    const someId = await one('SELECT id::text AS id FROM statements WHERE tenant = $1 ORDER BY seq DESC LIMIT 1 OFFSET 777', [tid]);
    out.push(
      await single('statementId', 'SELECT seq, stored_ms, "full", (SELECT key FROM keys WHERE id = s.authority) AS authority_key FROM statements s WHERE tenant = $1 AND id = $2::uuid AND voided = $3', [
        tid,
        someId.id,
        0,
      ]),
    );
    out.push(
      await single(
        'consistent-through',
        'SELECT floor(extract(epoch FROM now()) * 1000)::bigint AS now_ms, (SELECT floor(extract(epoch FROM min(a.xact_start)) * 1000)::bigint FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid ' +
          "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = 2 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS busy_ms",
        [0x4c450002, 12345],
      ),
    );
    writeFileSync(OUT, out.join('\n'));
    process.stderr.write(`wrote ${OUT}\n`);
    await pool.end();
  } finally {
    // The server log (e.g. with BENCH_PG_SETTINGS='log_min_duration_statement = 5') outlives the cluster.
    if (cluster && process.env.BENCH_SERVER_LOG) copyFileSync(join(cluster.dir, 'server.log'), process.env.BENCH_SERVER_LOG);
    cluster?.destroy();
  }
}

// bench/sqlite-plans.ts loads the same statements into SQLite.
if (import.meta.main) await main();
