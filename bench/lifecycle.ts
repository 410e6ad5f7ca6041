/**
 * Data lifecycle benchmark: `lectern export` and `lectern import` of BENCH_LIFECYCLE_STATEMENTS
 * (default 100,000) statements on SQLite (or on PostgreSQL: BENCH_POSTGRES_URL, a server where the
 * user may create databases; the run creates and drops its own), beside the LRS's own batch ingest (POST batches of 500)
 * and paging (GET pages of 500) of the same statements, measured in the same run. The ratios
 * (CLI / HTTP) are the figures to compare across machines.
 *
 *   npm run build && node bench/lifecycle.ts
 *
 * `measureLifecycle` is exported for the benchmark harness; run directly, it prints a table.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import bcrypt from 'bcrypt';
import type { BenchEntry } from './harness.ts';
import { statement } from './generate.ts';
import { VOIDED_VERB } from '../src/xapi/types.ts';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const AUTH = `Basic ${Buffer.from('bench:bench').toString('base64')}`;

export interface LifecycleRow {
  workload: string;
  /** Statements per second. */
  rate: number;
  /** The HTTP figure it is compared with, and which. */
  baseline?: { workload: string; rate: number };
  /** Wall-clock seconds, for the record. */
  seconds: number;
}

/** Settings of one store: a SQLite file in `dir`, or with `postgresUrl` a database beside that URL's. */
function envFor(dir: string, db: string, postgresUrl?: string): Record<string, string> {
  const backend: Record<string, string> = { LECTERN_SQLITE_PATH: join(dir, `${db}.sqlite`) };
  if (postgresUrl) {
    const u = new URL(postgresUrl);
    u.pathname = `/${pgName(db)}`;
    Object.assign(backend, { LECTERN_RUNSERVER_BACKEND: 'postgres', LECTERN_POSTGRES_URL: u.toString() });
  }
  return {
    PATH: process.env.PATH ?? '',
    ...backend,
    LECTERN_AUTH_FILE: join(dir, 'auth.json'),
    LECTERN_LOG_LEVEL: 'warn',
    LECTERN_RUNSERVER_MAX_SEARCH_HITS_COUNT: '500',
  };
}

const pgName = (db: string) => `lectern_bench_${db.replace(/\W/g, '_')}_${process.pid}`;

/** Drops the databases a PostgreSQL run created. */
async function dropDatabases(postgresUrl: string, dbs: string[]): Promise<void> {
  const { default: pg } = await import('pg');
  const c = new pg.Client({ connectionString: postgresUrl });
  await c.connect();
  try {
    for (const db of dbs) await c.query(`DROP DATABASE IF EXISTS ${pgName(db)}`);
  } finally {
    await c.end();
  }
}

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

/** Runs the CLI to the end; seconds taken and what it said on stderr. */
async function cli(args: string[], env: Record<string, string>): Promise<{ seconds: number; stderr: string }> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`lectern ${args[0]} failed (${code}): ${err}`);
  return { seconds: (performance.now() - t0) / 1000, stderr: err };
}

async function postAll(url: string, statements: Record<string, unknown>[], batch: number, concurrency: number): Promise<number> {
  const bodies: string[] = [];
  for (let i = 0; i < statements.length; i += batch) bodies.push(JSON.stringify(statements.slice(i, i + batch)));
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++];
        const res = await fetch(`${url}/xAPI/statements`, {
          method: 'POST',
          headers: { authorization: AUTH, 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' },
          body,
        });
        if (res.status !== 200) throw new Error(`POST ${res.status}: ${await res.text()}`);
        await res.arrayBuffer();
      }
    }),
  );
  return (performance.now() - t0) / 1000;
}

async function readAll(url: string): Promise<{ seconds: number; count: number }> {
  let next = '/xAPI/statements?limit=500&ascending=true';
  let count = 0;
  const t0 = performance.now();
  while (next) {
    const res = await fetch(`${url}${next}`, { headers: { authorization: AUTH, 'x-experience-api-version': '1.0.3' } });
    const body = (await res.json()) as { statements: unknown[]; more: string };
    count += body.statements.length;
    next = body.more;
  }
  return { seconds: (performance.now() - t0) / 1000, count };
}

/**
 * Loads `statements` statements into a fresh SQLite LRS by batch POST, pages through them, exports
 * them (plain and gzipped) and imports each export into an empty store; returns one row per workload.
 */
export async function measureLifecycle(opts: { statements?: number; concurrency?: number; postgresUrl?: string } = {}): Promise<LifecycleRow[]> {
  const n = opts.statements ?? 100_000;
  const dir = mkdtempSync(join(tmpdir(), 'lectern-bench-lifecycle-'));
  const dbs = ['source', 'import-plain', 'import-gz'];
  try {
    writeFileSync(join(dir, 'auth.json'), JSON.stringify([{ username: 'bench', hash: bcrypt.hashSync('bench', 4), scopes: ['all'], agent: { mbox: 'mailto:bench@example.com' } }]));
    const source = envFor(dir, 'source', opts.postgresUrl);
    // The benchmark's own realistic stream (seed 7): StatementRefs and voidings included.
    const statements = Array.from({ length: n }, (_, i) => statement(7, i));
    const server = await startServer(source);
    let post: number;
    let read: { seconds: number; count: number };
    try {
      post = await postAll(server.url, statements, 500, opts.concurrency ?? 4);
      read = await readAll(server.url);
    } finally {
      await server.stop();
    }
    // Paging leaves voided statements out (the stream voids a few earlier ones); export keeps them.
    const voided = new Set(statements.filter((s) => (s.verb as { id: string }).id === VOIDED_VERB).map((s) => (s.object as { id: string }).id));
    if (read.count !== n - voided.size) throw new Error(`paged ${read.count} statements, expected ${n - voided.size}`);
    const postRow = { workload: 'POST batches of 500', rate: n / post };
    const getRow = { workload: 'GET pages of 500', rate: n / read.seconds };
    const rows: LifecycleRow[] = [
      { ...postRow, seconds: post },
      { ...getRow, seconds: read.seconds },
    ];
    for (const file of ['export.ndjson', 'export.ndjson.gz']) {
      const { seconds: secs, stderr } = await cli(['export', '-o', join(dir, file)], source);
      if (!stderr.includes(`exported ${n} statements`)) throw new Error(`export did not write ${n} statements: ${stderr}`);
      rows.push({ workload: `lectern export → ${file} (${(statSync(join(dir, file)).size / 1e6).toFixed(0)} MB)`, rate: n / secs, baseline: getRow, seconds: secs });
    }
    for (const [i, file] of ['export.ndjson', 'export.ndjson.gz'].entries()) {
      const target = envFor(dir, dbs[i + 1], opts.postgresUrl);
      const { seconds: secs, stderr } = await cli(['import', join(dir, file)], target);
      if (!stderr.includes(`imported ${n} statements: ${n} stored`)) throw new Error(`import did not store ${n} statements: ${stderr}`);
      rows.push({ workload: `lectern import ← ${file}, batches of 1,000`, rate: n / secs, baseline: postRow, seconds: secs });
    }
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (opts.postgresUrl) await dropDatabases(opts.postgresUrl, dbs);
  }
}

/** `npm run bench` entry: export and import beside batch POST and paging, on the backend being measured. */
export const lifecycleEntry: BenchEntry = {
  name: 'lifecycle',
  async run(ctx) {
    const rows = await measureLifecycle({ statements: ctx.quick ? 5_000 : 100_000, ...(ctx.backend === 'postgres' && { postgresUrl: ctx.postgresUrl }) });
    return rows.map((r) => ({
      workload: r.workload,
      value: r.rate,
      unit: 'statements/s',
      ...(r.baseline && { baseline: r.baseline.rate, baselineName: r.baseline.workload, ratio: r.rate / r.baseline.rate }),
    }));
  },
};

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const n = Number(process.env.BENCH_LIFECYCLE_STATEMENTS ?? 100_000);
  const postgresUrl = process.env.BENCH_POSTGRES_URL;
  const backend = postgresUrl ? 'PostgreSQL' : 'SQLite';
  console.log(`Lectern lifecycle benchmark: ${n} statements, ${backend}; ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}\n`);
  const rows = await measureLifecycle({ statements: n, postgresUrl });
  const fmt = (x: number) => Math.round(x).toLocaleString('en-US');
  console.log('| workload | statements/s | seconds | compared with | its statements/s | ratio |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) {
    const b = r.baseline;
    console.log(`| ${r.workload} | ${fmt(r.rate)} | ${r.seconds.toFixed(1)} | ${b ? b.workload : ''} | ${b ? fmt(b.rate) : ''} | ${b ? (r.rate / b.rate).toFixed(2) : ''} |`);
  }
}
