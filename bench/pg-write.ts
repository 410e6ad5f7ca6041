/**
 * PostgreSQL write path against its limit, in one run on one durable throwaway cluster:
 * Lectern (built server, `runserver --backend postgres`) fed batches of 100 statements by 4
 * clients, then COPY of the same statement JSON into a one-table schema (10,000 rows per
 * transaction). Prints both rates, their ratio, `uptime`, and the top pg_stat_statements
 * entries of the Lectern phase.
 *
 *   npm run build && node bench/pg-write.ts
 *   BENCH_STATEMENTS=40000 BENCH_CLIENTS=4 BENCH_BATCH=100 node bench/pg-write.ts
 */
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import bcrypt from 'bcrypt';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { startCluster } from '../test/helpers/postgres.ts';
import { statement } from './generate.ts';

const TOTAL = Number(process.env.BENCH_STATEMENTS ?? 40_000);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 4);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
/** BENCH_CLI: another build's dist/cli/main.js (e.g. the branch start, for before/after in one sitting). */
const CLI = process.env.BENCH_CLI ?? fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

/** The benchmark's seeded realistic stream (bench/generate.ts), as `npm run bench` uses it. */
const makeStatement = (i: number): Record<string, unknown> => statement(SEED, i);
const SEED = 20261123;

async function startServer(dir: string, url: string): Promise<{ base: string; child: ChildProcess }> {
  const authFile = join(dir, 'auth.json');
  writeFileSync(authFile, JSON.stringify([{ username: 'bench', hash: bcrypt.hashSync('bench', 4), scopes: ['all'], agent: { mbox: 'mailto:bench@example.com' } }]));
  const child = spawn(process.execPath, [...(process.env.BENCH_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROF}`] : []), CLI, 'runserver', '--backend', 'postgres', '--port', '0'], {
    env: { PATH: process.env.PATH ?? '', LECTERN_POSTGRES_URL: url, LECTERN_AUTH_FILE: authFile, LECTERN_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (process.env.BENCH_VERBOSE) process.stderr.write(d);
    });
    child.on('exit', (c) => reject(new Error(`server exited ${c}: ${out}`)));
    const poll = setInterval(() => {
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) {
        clearInterval(poll);
        resolve(Number(m[1]));
      }
    }, 20);
  });
  return { base: `http://127.0.0.1:${port}`, child };
}

const HEADERS = {
  authorization: `Basic ${Buffer.from('bench:bench').toString('base64')}`,
  'x-experience-api-version': '1.0.3',
  'content-type': 'application/json',
};

/** POSTs every body, CLIENTS requests in flight; statements/s. */
async function postAll(base: string, bodies: string[]): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < bodies.length) {
        const res = await fetch(`${base}/xAPI/statements`, { method: 'POST', headers: HEADERS, body: bodies[next++] });
        if (res.status !== 200) throw new Error(`POST ${res.status}: ${await res.text()}`);
        await res.arrayBuffer();
      }
    }),
  );
  return (bodies.length * BATCH) / ((performance.now() - t0) / 1000);
}

/** The limit: the same JSON by COPY into one table (seq, id, stored_ms, full), 10,000 rows per transaction. */
async function copyAll(url: string, statements: Record<string, unknown>[]): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('CREATE TABLE raw_statements (seq bigserial PRIMARY KEY, id uuid NOT NULL UNIQUE, stored_ms bigint NOT NULL, "full" json NOT NULL)');
  const esc = (s: string) => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t');
  const t0 = performance.now();
  for (let i = 0; i < statements.length; i += 10_000) {
    await c.query('BEGIN');
    const lines = statements.slice(i, i + 10_000).map((s) => `${s.id as string}\t${Date.now()}\t${esc(JSON.stringify(s))}\n`);
    await pipeline(Readable.from(lines), c.query(copyFrom('COPY raw_statements (id, stored_ms, "full") FROM STDIN')));
    await c.query('COMMIT');
  }
  const rate = statements.length / ((performance.now() - t0) / 1000);
  await c.end();
  return rate;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-pgw-'));
  const cluster = await startCluster({ durable: true, settings: [
      `shared_preload_libraries = 'pg_stat_statements${process.env.BENCH_SERVER_LOG ? ',auto_explain' : ''}'`,
      'shared_buffers = 256MB',
      // BENCH_SERVER_LOG=file: EXPLAIN ANALYZE of every statement over 5 ms, copied there at the end.
      ...(process.env.BENCH_SERVER_LOG ? ['auto_explain.log_min_duration = 5', 'auto_explain.log_analyze = on', 'auto_explain.log_buffers = on', 'auto_explain.log_nested_statements = on'] : []),
    ],
  });
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query('CREATE DATABASE lectern');
    await admin.query('CREATE DATABASE raw');
    await admin.end();
    const lurl = cluster.url.replace(/\/postgres$/, '/lectern');
    const statements = Array.from({ length: TOTAL }, (_, i) => makeStatement(i));
    const bodies: string[] = [];
    for (let i = 0; i < statements.length; i += BATCH) bodies.push(JSON.stringify(statements.slice(i, i + BATCH)));
    const { base, child } = await startServer(dir, lurl);
    const stat = new pg.Client({ connectionString: lurl });
    await stat.connect();
    await stat.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    // Warm-up (not counted): the first requests compile code and plans.
    await postAll(base, Array.from({ length: 20 }, (_, k) => JSON.stringify(Array.from({ length: BATCH }, (_, j) => makeStatement(TOTAL + k * BATCH + j)))));
    await stat.query('SELECT pg_stat_statements_reset()');
    const before = execSync('uptime').toString().trim();
    const lectern = await postAll(base, bodies);
    const top = await stat.query<{ calls: string; mean: string; total: string; query: string }>(
      "SELECT calls, round(mean_exec_time::numeric, 2) AS mean, round(total_exec_time::numeric) AS total, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'lectern') ORDER BY total_exec_time DESC LIMIT 8",
    );
    await stat.end();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    const copy = await copyAll(cluster.url.replace(/\/postgres$/, '/raw'), statements);
    const after = execSync('uptime').toString().trim();
    console.log(`statements ${fmt(TOTAL)}, ${CLIENTS} clients × ${BATCH} per POST`);
    console.log(`uptime before: ${before}\nuptime after:  ${after}`);
    console.log(`Lectern batch ingest: ${fmt(lectern)} statements/s`);
    console.log(`COPY, 10k rows/tx:    ${fmt(copy)} rows/s`);
    console.log(`ratio: ${((100 * lectern) / copy).toFixed(1)} %`);
    console.log('\npg_stat_statements (Lectern phase): calls | mean ms | total ms | query');
    for (const r of top.rows) console.log(`${r.calls} | ${r.mean} | ${r.total} | ${r.query}`);
  } finally {
    if (process.env.BENCH_SERVER_LOG) copyFileSync(join(cluster.dir, 'server.log'), process.env.BENCH_SERVER_LOG);
    cluster.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
