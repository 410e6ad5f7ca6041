/**
 * Query plans of the statement filters on a loaded database, built by Lectern's own query code
 * (src/xapi/query.ts parses the same HTTP parameters, src/store/sql.ts builds the same SQL), so
 * the plan is the one a request gets. SQLite: EXPLAIN QUERY PLAN plus the median time of the
 * query itself through node:sqlite; PostgreSQL: EXPLAIN (ANALYZE, BUFFERS). The database time
 * beside the HTTP latency of the same request shows where a request's time goes.
 */
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { filterKeyIds, SESSION_OPTIONS } from '../src/store/postgres/store.ts';
import { type Driver, DRIVER_COUNT_CAP, driverCountsSql, drivers, rarestDriver, type SeqWindow, statementPageSql, storedSeqSql, uuidBytes } from '../src/store/sql.ts';
import { POSTGRES } from '../src/store/postgres/query.ts';
import { SQLITE, sqliteSql } from '../src/store/sqlite/query.ts';
import { parseStatementRequest, type StatementQuery } from '../src/xapi/query.ts';

export interface PlanCase {
  name: string;
  /** The GET /xAPI/statements parameters of the request. */
  params: Record<string, string>;
}

export interface Plan {
  name: string;
  /** Median milliseconds of the page query alone (SQLite: through node:sqlite; PostgreSQL: execution time). */
  ms: number;
  rows: number;
  plan: string;
}

function toQuery(params: Record<string, string>): StatementQuery {
  const r = parseStatementRequest(params, { maxLimit: 100, maxBytes: 4 * 1024 * 1024 });
  if (r.kind !== 'query') throw new Error('not a query');
  return r.query;
}

/** The parameters of a path such as /xAPI/statements?verb=…&search_after=… */
export function paramsOf(path: string): Record<string, string> {
  return Object.fromEntries(new URL(path, 'http://x').searchParams);
}

function cursorSeq(seq: number | string | undefined, id: string): bigint {
  if (seq === undefined) throw new Error(`the cursor ${id} names no stored statement`);
  return BigInt(seq);
}

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export function sqlitePlans(file: string, cases: PlanCase[], tenant = ''): Plan[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return cases.map((c) => {
      const q = toQuery(c.params);
      const w: SeqWindow = {};
      const t0 = performance.now();
      const one = (sql: string, p: unknown[]) => db.prepare(sqliteSql(sql)).get(...(p as (string | number)[])) as { seq: number } | undefined;
      // As SqliteStore.queryStatements: the tenant's id, then since/until as seq bounds.
      const tid = Number((db.prepare('SELECT id FROM tenants WHERE name = ?').get(tenant) as { id: number } | undefined)?.id ?? 0);
      const bound = (ms: number, which: 'since' | 'until') => {
        const b = storedSeqSql(tid, ms, which, SQLITE);
        return BigInt(one(b.sql, b.params)?.seq ?? 0);
      };
      if (q.since !== undefined) w.from = bound(q.since, 'since');
      if (q.until !== undefined) w.to = bound(q.until, 'until');
      const windowMs = performance.now() - t0;
      if (q.after !== undefined) {
        // The `more` cursor names a statement id: its seq bounds the page, as the store resolves it.
        const seq = cursorSeq((db.prepare('SELECT seq FROM statement_seqs WHERE tenant = ? AND id = ?').get(tid, uuidBytes(q.after)) as { seq: number } | undefined)?.seq, q.after);
        if (q.ascending) w.after = seq;
        else w.before = seq;
      }
      // A combined filter is read from its rarest value, as the store chooses it.
      let driver: Driver | undefined;
      if (drivers(q.filter).length > 1) {
        const counts = driverCountsSql(tid, q.filter, DRIVER_COUNT_CAP, SQLITE);
        driver = rarestDriver(db.prepare(sqliteSql(counts.sql)).get(...(counts.params as (string | number)[])) as Record<string, unknown>);
      }
      const { sql, params } = statementPageSql(tid, q, w, SQLITE, { driver });
      const args = params as (string | number | bigint)[];
      const plan = db.prepare(`EXPLAIN QUERY PLAN ${sqliteSql(sql)}`).all(...args) as { id: number; parent: number; detail: string }[];
      const depth = new Map<number, number>([[0, -1]]);
      const lines = plan.map((p) => {
        const d = (depth.get(p.parent) ?? 0) + 1;
        depth.set(p.id, d);
        return `${'  '.repeat(d)}${p.detail}`;
      });
      const st = db.prepare(sqliteSql(sql));
      let rows = 0;
      const times: number[] = [];
      for (let k = 0; k < 3; k++) {
        const t = performance.now();
        rows = st.all(...args).length;
        times.push(performance.now() - t);
      }
      return { name: c.name, ms: median(times) + windowMs, rows, plan: lines.join('\n') };
    });
  } finally {
    db.close();
  }
}

export async function postgresPlans(url: string, cases: PlanCase[], tenant = ''): Promise<Plan[]> {
  // The store's session settings: without them JIT compiled the costlier plans (≈ 100 ms of a 3 ms query).
  const c = new pg.Client({ connectionString: url, options: SESSION_OPTIONS });
  await c.connect();
  try {
    const out: Plan[] = [];
    for (const pc of cases) {
      const q = toQuery(pc.params);
      const w: SeqWindow = {};
      let pre = '';
      const explain = async (sql: string, params: unknown[]) =>
        (await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params)).rows.map((r) => r['QUERY PLAN']).join('\n');
      let extraMs = 0;
      // As PostgresStore.queryStatements: the tenant's id, then since/until as seq bounds.
      const tid = Number((await c.query<{ id: number }>('SELECT id FROM tenants WHERE name = $1', [tenant])).rows[0]?.id ?? 0);
      const bound = async (label: string, which: 'since' | 'until', v: number) => {
        const { sql, params } = storedSeqSql(tid, v, which, POSTGRES);
        const plan = await explain(sql, params);
        extraMs += Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? 0);
        pre += `-- ${label}\n${plan}\n\n`;
        return BigInt((await c.query<{ seq: string }>(sql, params)).rows[0]?.seq ?? 0);
      };
      if (q.since !== undefined) w.from = await bound('since → first seq', 'since', q.since);
      if (q.until !== undefined) w.to = await bound('until → last seq', 'until', q.until);
      if (q.after !== undefined) {
        // The `more` cursor names a statement id: its seq bounds the page, as the store resolves it.
        const seq = cursorSeq((await c.query<{ seq: string }>('SELECT seq FROM statements WHERE tenant = $1 AND id = $2::uuid', [tid, q.after])).rows[0]?.seq, q.after);
        if (q.ascending) w.after = seq;
        else w.before = seq;
      }
      // The filter values' ids, resolved first as the store does (an unknown one: the plan of the subqueries).
      const ids = await filterKeyIds((text, values) => c.query<{ id: number; key: string }>(text, values), tid, q.filter);
      let driver: Driver | undefined;
      if (drivers(q.filter).length > 1) {
        const counts = driverCountsSql(tid, q.filter, DRIVER_COUNT_CAP, POSTGRES);
        driver = rarestDriver((await c.query<Record<string, unknown>>(counts.sql, counts.params)).rows[0]);
      }
      const { sql, params } = statementPageSql(tid, q, w, POSTGRES, { ids, driver });
      await c.query(sql, params); // warm
      const times: number[] = [];
      let plan = '';
      for (let k = 0; k < 2; k++) {
        plan = await explain(sql, params);
        times.push(Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? 0));
      }
      const rows = (await c.query(sql, params)).rowCount ?? 0;
      out.push({ name: pc.name, ms: median(times) + extraMs, rows, plan: pre + plan });
    }
    return out;
  } finally {
    await c.end();
  }
}

/** A markdown section per plan. */
export function plansMarkdown(title: string, plans: Plan[]): string {
  return [`# ${title}\n`, ...plans.map((p) => `## ${p.name}\n\n${p.rows} rows, ${p.ms.toFixed(2)} ms (database only)\n\n\`\`\`\n${p.plan}\n\`\`\`\n`)].join('\n');
}
