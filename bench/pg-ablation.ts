/**
 * What PostgreSQL's share of a statement write costs, and the ceiling of Lectern's layout: on one
 * durable throwaway cluster (the bench's settings), each variant into a fresh database, beside
 * the raw limit measured in the same run:
 *
 * - raw: COPY of the statement JSON into one table (seq, unique id, stored_ms, json), as the
 *   bench's limit;
 * - layout by COPY: Lectern's own tables, indexes and rows (statement row, agent and activity
 *   link rows; dictionary ids made beforehand) written by COPY, the cheapest way the server can
 *   take them: the ceiling of the layout;
 * - the same without the link rows, and without the statement table's secondary indexes;
 * - the same rows 100 statements at a time, by COPY and by the store's own INSERT (unnest);
 * - the same by INSERT 10 statements at a time (a group of single-statement requests);
 * - the store: `PostgresStore.insertStatements` (Lectern's write path without HTTP), 4 callers × 100,
 *   and 32 callers × 1 (the bench's single-statement writes).
 *
 * For each: statements/s, its share of raw, and the CPU per statement of the server processes
 * (/proc of every `postgres` process) and of this process (the client side).
 *
 *   node bench/pg-ablation.ts [statements=20000]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { PostgresStore } from '../src/store/postgres/store.ts';
import { actorKeys } from '../src/xapi/agents.ts';
import { prepareStatement, stamp, type PreparedStatement } from '../src/xapi/statement.ts';
import type { Actor, Statement } from '../src/xapi/types.ts';
import { startPostgres } from './harness.ts';
import { statement } from './generate.ts';

const N = Number(process.argv[2] ?? 20_000);
const PER_COPY = 10_000;
const AUTHORITY: Actor = { objectType: 'Agent', mbox: 'mailto:bench@example.com' };
const iso = new Date().toISOString();
const prepared = (i: number): PreparedStatement => prepareStatement(statement(20261123, i) as unknown as Statement, AUTHORITY, '1.0.3');
const data = Array.from({ length: N }, (_, i) => {
  const p = prepared(i);
  return { p, full: JSON.stringify(stamp(p, iso)) };
});

/** CPU seconds of every postgres process (the cluster is the only one on the machine while this runs). */
function serverCpu(): number {
  const hz = 100;
  let ticks = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // gone meanwhile
    }
  }
  return ticks / hz;
}

interface Measured {
  rate: number;
  serverUs: number;
  clientUs: number;
}

async function measure(fn: () => Promise<void>): Promise<Measured> {
  const s0 = serverCpu();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const secs = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { rate: N / secs, serverUs: ((serverCpu() - s0) * 1e6) / N, clientUs: (c.user + c.system) / N };
}

/** COPY text format: tabs, newlines and backslashes escaped; null as \N. */
const cell = (v: string | number | null): string => (v === null ? '\\N' : String(v).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t'));
const line = (cells: (string | number | null)[]): string => `${cells.map(cell).join('\t')}\n`;

async function copy(c: pg.Client, sql: string, lines: string[]): Promise<void> {
  await pipeline(Readable.from(lines.length ? [lines.join('')] : []), c.query(copyFrom(sql)));
}

async function database(admin: pg.Client, base: string, name: string): Promise<string> {
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
  await admin.query(`CREATE DATABASE ${name}`);
  return base.replace(/\/postgres$/, `/${name}`);
}

async function raw(url: string): Promise<Measured> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('CREATE TABLE raw_statements (seq bigserial PRIMARY KEY, id uuid NOT NULL UNIQUE, stored_ms bigint NOT NULL, "full" json NOT NULL)');
  const m = await measure(async () => {
    for (let i = 0; i < N; i += PER_COPY) {
      await c.query('BEGIN');
      await copy(c, 'COPY raw_statements (id, stored_ms, "full") FROM STDIN', data.slice(i, i + PER_COPY).map((d) => line([d.p.id, Date.now(), d.full])));
      await c.query('COMMIT');
    }
  });
  await c.end();
  return m;
}

/** Lectern's schema (its migrations), then its rows by COPY. */
/**
 * The INSERT the store sends for a group's rows (src/store/postgres/store.ts, INSERT_WRITE without
 * its checks): arrays expanded by unnest, the JSON as one json array parameter, seqs from nextval.
 */
const INSERT_ROWS = `WITH sq AS (SELECT n, nextval('statements_seq') AS seq FROM generate_series(1, $3::int) AS n),
st AS (INSERT INTO statements (seq, tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority, "full")
  SELECT sq.seq, $1, i, $2::bigint, v, r, ref, iv, 0, a, f FROM ROWS FROM (unnest($4::uuid[]), unnest($5::int[]), unnest($6::uuid[]), unnest($7::uuid[]),
    unnest($8::smallint[]), unnest($9::int[]), json_array_elements($10::json)) WITH ORDINALITY AS t(i, v, r, ref, iv, a, f, n) JOIN sq USING (n)),
ag AS (INSERT INTO statement_agents (agent, role, seq) SELECT k, d, sq.seq FROM unnest($11::int[], $12::int[], $13::smallint[]) AS t(k, n, d) JOIN sq USING (n)),
ac AS (INSERT INTO statement_activities (activity, direct, seq) SELECT k, d, sq.seq FROM unnest($14::int[], $15::int[], $16::smallint[]) AS t(k, n, d) JOIN sq USING (n))
SELECT 1`;

async function layout(url: string, opts: { links: boolean; indexes: boolean; via?: 'copy' | 'insert'; per?: number }): Promise<Measured> {
  const per = opts.per ?? PER_COPY;
  const store = new PostgresStore({ url, poolSize: 2, statementTimeoutMs: 0, connectTimeoutMs: 10_000, connectRetries: 0, connectBackoffMs: 100 });
  await store.migrate();
  await store.close();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  if (!opts.indexes) await c.query('DROP INDEX statements_seq_idx, statements_verb, statements_registration, statements_ref, statements_authority');
  const tenant = (await c.query<{ id: number }>("INSERT INTO tenants (name) VALUES ('') RETURNING id")).rows[0].id;
  // The dictionary beforehand (not measured): the store resolves and caches ids before its write too.
  const keys = new Set<string>();
  const authority = actorKeys(AUTHORITY)[0];
  keys.add(authority);
  for (const { p } of data) {
    keys.add(p.verb);
    for (const a of p.agents) keys.add(a.key);
    for (const a of p.activities) keys.add(a.id);
  }
  await copy(c, 'COPY keys (tenant, key) FROM STDIN', [...keys].map((k) => line([tenant, k])));
  const ids = new Map((await c.query<{ id: number; key: string }>('SELECT id, key FROM keys')).rows.map((r) => [r.key, r.id]));
  const id = (k: string): number => ids.get(k)!;
  const m = await measure(async () => {
    for (let i = 0; i < N; i += per) {
      const chunk = data.slice(i, i + per);
      if (opts.via === 'insert') {
        const ag = chunk.flatMap(({ p }, k) => p.agents.map((a) => [id(a.key), k + 1, a.role]));
        const ac = chunk.flatMap(({ p }, k) => p.activities.map((a) => [id(a.id), k + 1, a.direct ? 1 : 0]));
        const col = (rows: number[][], j: number) => rows.map((r) => r[j]);
        await c.query({
          name: 'insert_rows',
          text: INSERT_ROWS,
          values: [tenant, Date.now(), chunk.length, chunk.map((d) => d.p.id), chunk.map((d) => id(d.p.verb)), chunk.map((d) => d.p.registration), chunk.map((d) => d.p.refId),
            chunk.map((d) => (d.p.voids ? 1 : 0)), chunk.map(() => id(authority)), `[${chunk.map((d) => d.full).join(',')}]`, col(ag, 0), col(ag, 1), col(ag, 2), col(ac, 0), col(ac, 1), col(ac, 2)],
        });
        continue;
      }
      await c.query('BEGIN');
      const seq0 = Number((await c.query<{ seq: string }>('SELECT setval(\'statements_seq\', nextval(\'statements_seq\') + $1) AS seq', [chunk.length])).rows[0].seq) - chunk.length;
      const now = Date.now();
      await copy(c, 'COPY statements (seq, stored_ms, id, tenant, verb, authority, is_voiding, voided, registration, ref_id, "full") FROM STDIN',
        chunk.map(({ p, full }, k) => line([seq0 + k, now, p.id, tenant, id(p.verb), id(authority), p.voids ? 1 : 0, 0, p.registration, p.refId, full])));
      if (opts.links) {
        await copy(c, 'COPY statement_agents (agent, role, seq) FROM STDIN', chunk.flatMap(({ p }, k) => p.agents.map((a) => line([id(a.key), a.role, seq0 + k]))));
        await copy(c, 'COPY statement_activities (activity, direct, seq) FROM STDIN', chunk.flatMap(({ p }, k) => p.activities.map((a) => line([id(a.id), a.direct ? 1 : 0, seq0 + k]))));
      }
      await c.query('COMMIT');
    }
  });
  await c.end();
  return m;
}

/** Lectern's write path without HTTP: the store, `callers` × `per` statements. */
async function store(url: string, callers = 4, per = 100): Promise<Measured> {
  const s = new PostgresStore({ url, poolSize: 10, statementTimeoutMs: 0, connectTimeoutMs: 10_000, connectRetries: 0, connectBackoffMs: 100 });
  await s.migrate();
  let next = 0;
  const m = await measure(async () => {
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (next < N) {
          const from = next;
          next += per;
          // A fresh prepare per request, as the HTTP route makes one.
          await s.insertStatements('', data.slice(from, from + per).map((d) => d.p), []);
        }
      }),
    );
  });
  await s.close();
  return m;
}

const cluster = await startPostgres();
try {
  const admin = new pg.Client({ connectionString: cluster.url });
  await admin.connect();
  const variants: [string, (url: string) => Promise<Measured>][] = [
    ['layout by COPY (the ceiling)', (u) => layout(u, { links: true, indexes: true })],
    ['layout by COPY, 100 per transaction', (u) => layout(u, { links: true, indexes: true, per: 100 })],
    ["layout by the store's INSERT, 100 per statement", (u) => layout(u, { links: true, indexes: true, via: 'insert', per: 100 })],
    ['  without the link rows', (u) => layout(u, { links: false, indexes: true })],
    ['  without link rows and secondary indexes', (u) => layout(u, { links: false, indexes: false })],
    ['the store (4 callers × 100, no HTTP)', (u) => store(u)],
    ["layout by the store's INSERT, 10 per statement", (u) => layout(u, { links: true, indexes: true, via: 'insert', per: 10 })],
    ['the store (32 callers × 1, no HTTP)', (u) => store(u, 32, 1)],
  ];
  console.log(`statements ${N}, COPY ${PER_COPY} per transaction; CPU per statement: server = every postgres process, client = this process`);
  for (const rep of [1, 2]) {
    const r = await raw(await database(admin, cluster.url, 'raw'));
    const row = (label: string, m: Measured, base: number) =>
      console.log(`  ${label.padEnd(44)} ${String(Math.round(m.rate)).padStart(6)}/s ${((100 * m.rate) / base).toFixed(1).padStart(5)} %   server ${m.serverUs.toFixed(0).padStart(4)} µs   client ${m.clientUs.toFixed(0).padStart(4)} µs`);
    console.log(`rep ${rep}`);
    row('raw COPY, one table', r, r.rate);
    for (const [label, fn] of variants) row(label, await fn(await database(admin, cluster.url, 'v')), r.rate);
  }
  await admin.end();
} finally {
  await cluster.stop('immediate').catch(() => undefined);
  cluster.destroy();
}
