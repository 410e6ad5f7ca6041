/**
 * Query plans of the statement filters on a loaded database, built by Lectern's own query code
 * (src/xapi/query.ts parses the same HTTP parameters, src/store/sql.ts builds the same SQL), so
 * the plan is the one a request gets. SQLite: EXPLAIN QUERY PLAN plus the median time of the
 * query itself through node:sqlite; PostgreSQL: EXPLAIN (ANALYZE, BUFFERS). The database time
 * beside the HTTP latency of the same request shows where a request's time goes.
 */
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { postgresPlaceholder, type SeqWindow, sqlitePlaceholder, statementPageSql } from '../src/store/sql.ts';
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
  const r = parseStatementRequest(params, { maxLimit: 100 });
  if (r.kind !== 'query') throw new Error('not a query');
  return r.query;
}

/** The parameters of a path such as /xAPI/statements?verb=…&search_after=… */
export function paramsOf(path: string): Record<string, string> {
  return Object.fromEntries(new URL(path, 'http://x').searchParams);
}

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export function sqlitePlans(file: string, cases: PlanCase[], tenant = ''): Plan[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return cases.map((c) => {
      const q = toQuery(c.params);
      const w: SeqWindow = {};
      const t0 = performance.now();
      const one = (sql: string, ...p: (string | number)[]) => db.prepare(sql).get(...p) as { seq: number } | undefined;
      if (q.since !== undefined) w.from = BigInt(one('SELECT seq FROM statements WHERE tenant = ? AND stored_ms > ? ORDER BY stored_ms, seq LIMIT 1', tenant, q.since)?.seq ?? 0);
      if (q.until !== undefined) w.to = BigInt(one('SELECT seq FROM statements WHERE tenant = ? AND stored_ms <= ? ORDER BY stored_ms DESC, seq DESC LIMIT 1', tenant, q.until)?.seq ?? 0);
      const windowMs = performance.now() - t0;
      if (q.after !== undefined) {
        if (q.ascending) w.after = BigInt(q.after);
        else w.before = BigInt(q.after);
      }
      const { sql, params } = statementPageSql(tenant, q, w, sqlitePlaceholder);
      const args = params as (string | number | bigint)[];
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as { id: number; parent: number; detail: string }[]);
      const depth = new Map<number, number>([[0, -1]]);
      const lines = plan.map((p) => {
        const d = (depth.get(p.parent) ?? 0) + 1;
        depth.set(p.id, d);
        return `${'  '.repeat(d)}${p.detail}`;
      });
      const st = db.prepare(sql);
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
  const c = new pg.Client({ connectionString: url });
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
      const bound = async (label: string, sql: string, v: number) => {
        const plan = await explain(sql, [tenant, v]);
        extraMs += Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? 0);
        pre += `-- ${label}\n${plan}\n\n`;
        return BigInt((await c.query<{ seq: string }>(sql, [tenant, v])).rows[0]?.seq ?? 0);
      };
      if (q.since !== undefined) w.from = await bound('since → first seq', 'SELECT seq FROM statements WHERE tenant = $1 AND stored_ms > $2 ORDER BY stored_ms, seq LIMIT 1', q.since);
      if (q.until !== undefined) w.to = await bound('until → last seq', 'SELECT seq FROM statements WHERE tenant = $1 AND stored_ms <= $2 ORDER BY stored_ms DESC, seq DESC LIMIT 1', q.until);
      if (q.after !== undefined) {
        if (q.ascending) w.after = BigInt(q.after);
        else w.before = BigInt(q.after);
      }
      const { sql, params } = statementPageSql(tenant, q, w, postgresPlaceholder);
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
