/**
 * Ingest during a prune: a store of BENCH_PRUNE_STATEMENTS (default 200,000) statements loaded by
 * batch POST, then small POSTs (batches of 10, 4 clients) timed for BENCH_PRUNE_IDLE_SECONDS (5)
 * with nothing else running, and again while `lectern prune --before T` removes the older half in
 * another process. SQLite by default; PostgreSQL with BENCH_POSTGRES_URL (a server where the user
 * may create databases; the run creates and drops its own) or `--postgres` (a throwaway cluster,
 * durable settings, as bench/run.ts starts).
 *
 *   npm run build && node bench/prune.ts [--postgres]
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import bcrypt from 'bcrypt';
import pg from 'pg';
import { statement, statementId } from './generate.ts';
import { startPostgres } from './harness.ts';
import type { PgCluster } from './postgres-cluster.ts';
import { VOIDED_VERB } from '../src/xapi/types.ts';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const AUTH = `Basic ${Buffer.from('bench:bench').toString('base64')}`;
const HEADERS = { authorization: AUTH, 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' };

async function startServer(env: Record<string, string>): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [CLI, 'runserver', '--port', '0'], { env: { ...env, LECTERN_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
      if (out.length > 1e5) out = out.slice(-1e4);
    });
    child.on('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function postBody(url: string, body: string): Promise<void> {
  const res = await fetch(`${url}/xAPI/statements`, { method: 'POST', headers: HEADERS, body });
  if (res.status !== 200) throw new Error(`POST ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
}

async function load(url: string, n: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < n) {
        const from = next;
        next += 500;
        await postBody(url, JSON.stringify(Array.from({ length: Math.min(500, n - from) }, (_, k) => statement(7, from + k))));
      }
    }),
  );
}

/** A statement of the benchmark's stream with an id of its own, voidings turned into plain StatementRefs (their targets may be gone). */
function fresh(i: number): Record<string, unknown> {
  const s: Record<string, unknown> = { ...statement(8, i), id: randomUUID() };
  if ((s.verb as { id: string }).id === VOIDED_VERB) s.verb = { id: 'http://adlnet.gov/expapi/verbs/experienced' };
  return s;
}

interface Ingest {
  rate: number;
  p50: number;
  p99: number;
  max: number;
}

/** Batches of 10 from 4 clients until `until` resolves (or `seconds` pass); statements/s and request latencies (ms). */
async function ingest(url: string, from: { i: number }, stop: { done: boolean }): Promise<Ingest> {
  const lat: number[] = [];
  const t0 = performance.now();
  let n = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (!stop.done) {
        const start = from.i;
        from.i += 10;
        const t = performance.now();
        await postBody(url, JSON.stringify(Array.from({ length: 10 }, (_, k) => fresh(start + k))));
        lat.push(performance.now() - t);
        n += 10;
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const at = (q: number) => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))] ?? 0;
  return { rate: n / secs, p50: at(0.5), p99: at(0.99), max: lat.at(-1) ?? 0 };
}

async function storedOf(url: string, id: string): Promise<string> {
  const res = await fetch(`${url}/xAPI/statements?statementId=${id}`, { headers: HEADERS });
  if (res.status !== 200) throw new Error(`GET ${id}: ${res.status}`);
  return ((await res.json()) as { stored: string }).stored;
}

async function main(): Promise<void> {
  const n = Number(process.env.BENCH_PRUNE_STATEMENTS ?? 200_000);
  const idle = Number(process.env.BENCH_PRUNE_IDLE_SECONDS ?? 5);
  const cluster: PgCluster | undefined = process.argv.includes('--postgres') && !process.env.BENCH_POSTGRES_URL ? await startPostgres() : undefined;
  const postgresUrl = process.env.BENCH_POSTGRES_URL ?? cluster?.url;
  const dir = mkdtempSync(join(tmpdir(), 'lectern-bench-prune-'));
  const dbName = `lectern_bench_prune_${process.pid}`;
  writeFileSync(join(dir, 'auth.json'), JSON.stringify([{ username: 'bench', hash: bcrypt.hashSync('bench', 4), scopes: ['all'], agent: { mbox: 'mailto:bench@example.com' } }]));
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', LECTERN_AUTH_FILE: join(dir, 'auth.json'), LECTERN_LOG_LEVEL: 'warn', LECTERN_SQLITE_PATH: join(dir, 'prune.sqlite') };
  if (postgresUrl) {
    const u = new URL(postgresUrl);
    u.pathname = `/${dbName}`;
    Object.assign(env, { LECTERN_RUNSERVER_BACKEND: 'postgres', LECTERN_POSTGRES_URL: u.toString() });
  }
  console.log(`Lectern ingest during a prune: ${n} statements, ${postgresUrl ? 'PostgreSQL' : 'SQLite'}; ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}\n`);
  const server = await startServer(env);
  try {
    let t = performance.now();
    await load(server.url, n);
    console.log(`loaded ${n} statements in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const before = await storedOf(server.url, statementId(7, n / 2));
    const from = { i: 0 };
    const stop = { done: false };
    const timer = setTimeout(() => (stop.done = true), idle * 1000);
    const quiet = await ingest(server.url, from, stop);
    clearTimeout(timer);
    stop.done = false;
    t = performance.now();
    const prune = spawn(process.execPath, [CLI, 'prune', '--before', before, '--json'], { env, stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    prune.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => prune.on('close', resolve));
    const during = ingest(server.url, from, stop);
    const code = await exited;
    const pruneSecs = (performance.now() - t) / 1000;
    stop.done = true;
    const busy = await during;
    if (code !== 0) throw new Error(`prune exited ${code}`);
    const pruned = (JSON.parse(out.trim().split('\n')[0]) as { statements: number }).statements;
    const f = (x: number) => Math.round(x).toLocaleString('en-US');
    console.log(`pruned ${f(pruned)} statements in ${pruneSecs.toFixed(1)} s (${f(pruned / pruneSecs)}/s) while ingesting\n`);
    console.log('| ingest (POST batches of 10, 4 clients) | statements/s | p50 ms | p99 ms | max ms |');
    console.log('|---|---|---|---|---|');
    for (const [name, r] of [['idle', quiet], ['during the prune', busy]] as const) console.log(`| ${name} | ${f(r.rate)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(0)} |`);
    console.log(`\nratio during/idle: ${(busy.rate / quiet.rate).toFixed(2)}`);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    if (postgresUrl) {
      const c = new pg.Client({ connectionString: postgresUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${dbName}`);
      await c.end();
    }
    cluster?.destroy();
  }
}

await main();
