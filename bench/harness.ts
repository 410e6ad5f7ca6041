/**
 * Processes the benchmark drives: Lectern itself (the built CLI, `lectern runserver`, as a child
 * process), the bare HTTP baseline, the load generator (bench/load.ts) and the raw-database
 * baselines, plus a throwaway PostgreSQL cluster (scripts/postgres-cluster.ts) and the server's RSS.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import bcrypt from 'bcrypt';
import pg from 'pg';
import { startCluster, type PgCluster } from '../scripts/postgres-cluster.ts';
import type { Job, LoadResult } from './load.ts';
import { statement, statementId, VERB } from './generate.ts';
import { randomUUID } from 'node:crypto';

const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));
export const CLI = here('../dist/cli/main.js');
const LOAD = here('./load.ts');
const BASELINES = here('./baselines.ts');

export const USER = { username: 'bench', password: 'bench-pass' };
export const AUTHORIZATION = `Basic ${Buffer.from(`${USER.username}:${USER.password}`).toString('base64')}`;

export type BackendName = 'sqlite' | 'postgres';

/** `node args`, or under `taskset -c cpus` when given (the process and its threads on those CPUs only). */
const nodeCommand = (args: string[], cpus?: string): [string, string[]] => (cpus ? ['taskset', ['-c', cpus, process.execPath, ...args]] : [process.execPath, args]);

/** Runs a node script to completion; its last stdout line is JSON. */
function nodeJson<T>(args: string[], what: string, cpus?: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(...nodeCommand(args, cpus), { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? '';
      if (code !== 0) return reject(new Error(`${what} exited with ${code}: ${err.trim().slice(-1500)}`));
      try {
        resolve(JSON.parse(last) as T);
      } catch {
        reject(new Error(`${what} printed no result: ${out.slice(-500)} ${err.slice(-1500)}`));
      }
    });
  });
}

/** The load generator in its own process, stopped (SIGTERM, its results lost) when `signal` aborts. */
export function startLoad(url: string, seed: number, jobs: Job[], signal: AbortSignal, cpus?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(...nodeCommand([LOAD, JSON.stringify({ url, seed, authorization: AUTHORIZATION, jobs })], cpus), { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
    signal.addEventListener('abort', () => child.kill('SIGTERM'), { once: true });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 || signal.aborted ? resolve() : reject(new Error(`load generator exited with ${code}: ${err}`))));
  });
}

/** The load generator, in its own process, against `url` (as the benchmark user, or as `authorization`). */
export function runLoad(url: string, seed: number, jobs: Job[], authorization = AUTHORIZATION, cpus?: string): Promise<LoadResult[]> {
  return nodeJson<LoadResult[]>([LOAD, JSON.stringify({ url, seed, authorization, jobs })], 'load generator', cpus);
}

/** `pid` and every process below it, from /proc. */
function processTree(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // The field after the parenthesised command name is the state, then the parent's pid.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // The process ended meanwhile.
    }
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) for (const [child, p] of parent) if (p === tree[i]) tree.push(child);
  return tree;
}

/**
 * Pins a process, its descendants and all their threads to `cpus` (taskset's list, e.g. "0" or
 * "0-1"); what they start later inherits it. A process that ended meanwhile is skipped.
 */
export function pinProcesses(pid: number, cpus: string): void {
  for (const p of processTree(pid)) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', cpus, String(p)], { stdio: 'ignore' });
    } catch {
      // Gone since the listing.
    }
  }
}

/** The pid of a local PostgreSQL cluster's postmaster: the first line of postmaster.pid in its data directory. */
export async function postmasterPid(url: string): Promise<number> {
  const [r] = await pgQuery<{ dir: string }>(url, "SELECT current_setting('data_directory') AS dir");
  return Number(readFileSync(join(r.dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

/** Free bytes for an unprivileged writer on the filesystem holding `path`. */
export function freeDisk(path: string): number {
  const s = statfsSync(path);
  return s.bavail * s.bsize;
}

export function sqliteLimit(file: string, seed: number, count: number, perTx: number): Promise<DbLimit> {
  return nodeJson<DbLimit>([BASELINES, 'sqlite', file, String(seed), String(count), String(perTx)], 'raw SQLite baseline');
}

export function postgresLimit(url: string, seed: number, count: number, perCopy: number): Promise<DbLimit> {
  return nodeJson<DbLimit>([BASELINES, 'postgres', url, String(seed), String(count), String(perCopy)], 'PostgreSQL COPY baseline');
}

/** Bytes a process has caused to be written to storage so far (Linux /proc/PID/io `write_bytes`, counted when it dirties a page); 0 where unreadable. */
export function bytesWritten(pid: number | 'self'): number {
  try {
    return Number(/^write_bytes:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Peak and current resident set of a process, in bytes (Linux /proc). */
export function memory(pid: number): { peak: number; current: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
    return { peak: kb('VmHWM'), current: kb('VmRSS') };
  } catch {
    return { peak: 0, current: 0 };
  }
}

export interface Server {
  url: string;
  pid: number;
  child: ChildProcess;
  /** SIGTERM, then waits for the exit (a CPU profile is written then). */
  stop(): Promise<void>;
  /** The last lines the server wrote, for error messages. */
  tail(): string;
}

/** Starts a child process and waits for `ready` to find the URL in its output. */
function startChild(args: string[], env: NodeJS.ProcessEnv, ready: RegExp, what: string): Promise<Server> {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((res) => child.once('exit', () => res()));
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`${what} exited with ${code} before listening:\n${out.slice(-3000)}`));
    child.once('exit', onExit);
    const poll = setInterval(() => {
      const m = ready.exec(out);
      if (!m) return;
      clearInterval(poll);
      child.off('exit', onExit);
      resolve({
        url: `http://127.0.0.1:${m[1]}`,
        pid: child.pid!,
        child,
        tail: () => out.slice(-3000),
        async stop() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          await exited;
        },
      });
    }, 20);
    child.once('exit', () => clearInterval(poll));
  });
}

/** The user of store (tenant) `target` in writeAuthFile's file, and its Authorization header. */
export const tenantUser = (target: string) => ({
  username: `bench-${target}`,
  target,
  authorization: `Basic ${Buffer.from(`bench-${target}:${USER.password}`).toString('base64')}`,
});

/** Writes a credentials file with one user (all scopes, and `admin`: the operator, for the admin API's entries; default tenant), and one per store in `targets`. */
export function writeAuthFile(dir: string, targets: string[] = []): string {
  const file = join(dir, 'auth.json');
  const hash = bcrypt.hashSync(USER.password, 10);
  const agent = { objectType: 'Agent', mbox: 'mailto:bench@example.com' };
  const users = [
    { username: USER.username, hash, scopes: ['all', 'admin'], agent },
    ...targets.map((t) => ({ username: tenantUser(t).username, hash, scopes: ['all'], agent, target: t })),
  ];
  writeFileSync(file, JSON.stringify(users));
  return file;
}

export interface LecternOptions {
  backend: BackendName;
  dir: string;
  sqlitePath?: string;
  postgresUrl?: string;
  /** Folder for a V8 CPU profile of the server (node --cpu-prof), written when it stops. */
  cpuProfDir?: string;
  /** More node flags for the server process (e.g. bench/memory.ts's `--import bench/memwatch.js`). */
  nodeFlags?: string[];
  env?: Record<string, string>;
  /** Stores (tenants) with a user each in the credentials file (tenantUser). */
  targets?: string[];
}

/**
 * The environment `lectern runserver` (and the other commands of the same store) get: default
 * settings apart from the database location, a free port, the credentials file and the LECTERN_*
 * variables the benchmark was given.
 */
export function lecternEnv(o: LecternOptions): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '',
    // Settings given to the benchmark (e.g. LECTERN_SQLITE_WRITER_THREAD=false) reach the server.
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('LECTERN_'))),
    LECTERN_RUNSERVER_BACKEND: o.backend,
    LECTERN_RUNSERVER_PORT: '0',
    LECTERN_AUTH_FILE: writeAuthFile(o.dir, o.targets),
    ...(o.sqlitePath && { LECTERN_SQLITE_PATH: o.sqlitePath }),
    ...(o.postgresUrl && { LECTERN_POSTGRES_URL: o.postgresUrl }),
    ...o.env,
  };
}

/** `lectern runserver` as a user runs it (lecternEnv); `env` is what it was given. */
export async function startLectern(o: LecternOptions): Promise<Server & { env: NodeJS.ProcessEnv }> {
  const env = lecternEnv(o);
  const flags = [...(o.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${o.cpuProfDir}`] : []), ...(o.nodeFlags ?? [])];
  return { ...(await startChild([...flags, CLI, 'runserver'], env, /listening on http:\/\/[^:]+:(\d+)/, 'lectern runserver')), env };
}

const XAPI_HEADERS = { authorization: AUTHORIZATION, 'x-experience-api-version': '1.0.3' };

/** `stored` of stream statement i (of `seed`), read back through the API; a voided one answers 404, so the next one is taken. */
export async function storedOf(url: string, seed: number, i: number): Promise<string> {
  for (let k = i; k < i + 20; k++) {
    const res = await fetch(`${url}/xAPI/statements?statementId=${statementId(seed, k)}`, { headers: XAPI_HEADERS });
    if (res.status === 200) return ((await res.json()) as { stored: string }).stored;
    await res.arrayBuffer();
  }
  throw new Error(`statements ${i}… of the stream are not stored`);
}

/** Whether stream statement i (of `seed`) is in the store (voided or not). */
export async function isStored(url: string, seed: number, i: number): Promise<boolean> {
  for (const param of ['statementId', 'voidedStatementId']) {
    const res = await fetch(`${url}/xAPI/statements?${param}=${statementId(seed, i)}`, { headers: XAPI_HEADERS });
    await res.arrayBuffer();
    if (res.status === 200) return true;
  }
  return false;
}

/**
 * The first stream statement still stored, of a store holding statements 0 … n-1 of which an
 * earlier prune may have removed the oldest (found by bisection: a prune removes by stored time,
 * which follows the stream's order to within a few batches).
 */
export async function firstStored(url: string, seed: number, n: number): Promise<number> {
  let lo = 0;
  let hi = n - 1;
  if (await isStored(url, seed, 0)) return 0;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await isStored(url, seed, mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}

export interface SmallPosts {
  statementsPerSec: number;
  p50: number;
  p99: number;
  max: number;
}

/**
 * Small writes, as an LMS sends them as they happen: POSTs of 10 statements from 4 clients, in
 * this process, until `stop.done`. Statements of the stream of `seed` with ids of their own (a
 * store may already hold the stream), voidings made plain (their targets may be gone).
 */
export async function smallPosts(url: string, seed: number, stop: { done: boolean }): Promise<SmallPosts> {
  const lat: number[] = [];
  let n = 0;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (!stop.done) {
        const batch = Array.from({ length: 10 }, () => {
          const s: Record<string, unknown> = { ...statement(seed, next++), id: randomUUID() };
          if ((s.verb as { id: string }).id === VERB.voided) s.verb = { id: VERB.common };
          return s;
        });
        const t = performance.now();
        const res = await fetch(`${url}/xAPI/statements`, { method: 'POST', headers: { ...XAPI_HEADERS, 'content-type': 'application/json' }, body: JSON.stringify(batch) });
        if (res.status !== 200) throw new Error(`POST ${res.status}: ${(await res.text()).slice(0, 300)}`);
        await res.arrayBuffer();
        lat.push(performance.now() - t);
        n += 10;
      }
    }),
  );
  lat.sort((a, b) => a - b);
  const at = (q: number) => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))] ?? 0;
  return { statementsPerSec: n / ((performance.now() - t0) / 1000), p50: at(0.5), p99: at(0.99), max: lat.at(-1) ?? 0 };
}

/** Runs a lectern command (the built CLI) with `env`; its exit code and stdout. `signal` sends it SIGINT (Ctrl-C). */
export function runCli(args: string[], env: NodeJS.ProcessEnv, signal?: AbortSignal): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-5000)));
    signal?.addEventListener('abort', () => child.kill('SIGINT'), { once: true });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The bare node:http handler (bench/baselines.ts http). */
export function startBareHttp(seed: number, o: { nodeFlags?: string[]; env?: Record<string, string> } = {}): Promise<Server> {
  return startChild([...(o.nodeFlags ?? []), BASELINES, 'http', String(seed)], { PATH: process.env.PATH ?? '', ...o.env }, /listening (\d+)/, 'bare HTTP server');
}

/**
 * A throwaway PostgreSQL cluster (scripts/postgres-cluster.ts, shared with the tests) with durable settings: fsync and full WAL on,
 * as a production server would run; a larger buffer cache and WAL so a 1M load is not a
 * checkpoint storm.
 */
export function startPostgres(opts: { statementStats?: boolean; at?: string } = {}): Promise<PgCluster> {
  // A quarter of the memory, PostgreSQL's usual starting point (docs/scaling.md): with 256 MB the
  // random-key indexes stopped fitting near 1M statements and ingest at 10M ran at 75 % of the first million.
  // The machine's memory, or the container's limit where one is set.
  const memory = Math.min(totalmem(), process.constrainedMemory() || Infinity);
  const buffersMb = Math.max(256, Math.min(16_384, Math.floor(memory / 4 / 2 ** 20)));
  const settings = [`shared_buffers = ${buffersMb}MB`, 'max_wal_size = 4GB', 'checkpoint_timeout = 15min'];
  // With --profile: per-statement server time (pg_stat_statements), to see where a write's time goes.
  if (opts.statementStats)
    settings.push("shared_preload_libraries = 'pg_stat_statements'", 'pg_stat_statements.track = all', 'pg_stat_statements.track_planning = on', 'track_io_timing = on');
  return startCluster({ durable: true, settings, at: opts.at });
}

export interface StatementStat {
  query: string;
  calls: number;
  totalMs: number;
  meanMs: number;
  /** Planning time per call (pg_stat_statements.track_planning), and how many times it was planned. */
  planMs: number;
  plans: number;
  rows: number;
}

/** The statements PostgreSQL spent most time on in `url`'s database (pg_stat_statements). */
export async function statementStats(url: string, top = 15): Promise<StatementStat[]> {
  await pgQuery(url, 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const rows = await pgQuery<{ query: string; calls: string; total: number; mean: number; plan: number; plans: string; rows: string }>(
    url,
    'SELECT query, calls, total_exec_time AS total, mean_exec_time AS mean, total_plan_time / greatest(calls, 1) AS plan, plans, rows FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT $1',
    [top],
  );
  return rows.map((r) => ({
    query: r.query.replace(/\s+/g, ' ').slice(0, 300),
    calls: Number(r.calls),
    totalMs: r.total,
    meanMs: r.mean,
    planMs: r.plan,
    plans: Number(r.plans),
    rows: Number(r.rows),
  }));
}

export async function pgQuery<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(sql, params)).rows;
  } finally {
    await c.end();
  }
}

export interface Machine {
  nproc: number;
  cpu: string;
  memoryGiB: number;
  node: string;
  loadavg: string;
  kernel: string;
  sqlite?: string;
  postgres?: string;
}

/** nproc, CPU model, load, Node and database versions: recorded with every result. */
export function machine(): Machine {
  const sh = (cmd: string, args: string[]) => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8' }).trim();
    } catch {
      return '?';
    }
  };
  const cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '?';
  const mem = Number(/MemTotal:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0);
  return {
    nproc: Number(sh('nproc', [])),
    cpu,
    memoryGiB: Math.round(mem / 1024 / 1024),
    node: process.version,
    loadavg: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
    kernel: sh('uname', ['-r']),
  };
}

/** CPU time of the whole machine from /proc/stat: busy and stolen by the host, and the total (jiffies). */
function cpuTimes(): { busy: number; steal: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal = 0] = f;
  return { busy: user + nice + system + irq + softirq, steal, total: f.slice(0, 8).reduce((a, b) => a + b, 0) };
}

export interface Settled {
  /** Seconds waited for the machine to fall quiet. */
  seconds: number;
  /** Share of the CPUs busy over the last window (every process: the database's background work included). */
  busy: number;
  /** Share taken by the host (a virtual machine's steal time) over that window. */
  steal: number;
}

/**
 * Waits, up to `maxSeconds`, until the whole machine is quiet (under `quiet` of its CPUs busy
 * over a 2 s window) with the server idle: after a large load the database keeps working for a
 * while (a spread checkpoint, autovacuum, the kernel writing back dirty pages), and queries
 * measured meanwhile measure that. Returns what it saw (undefined where /proc/stat is missing).
 */
export async function settle(maxSeconds = 180, quiet = 0.1): Promise<Settled | undefined> {
  if (!existsSync('/proc/stat')) return undefined;
  const t0 = performance.now();
  for (;;) {
    const a = cpuTimes();
    await new Promise((r) => setTimeout(r, 2000));
    const b = cpuTimes();
    const total = b.total - a.total || 1;
    const seen = { seconds: (performance.now() - t0) / 1000, busy: (b.busy - a.busy) / total, steal: (b.steal - a.steal) / total };
    if (seen.busy < quiet || seen.seconds >= maxSeconds) return seen;
  }
}

/** What a raw-database limit loop (bench/baselines.ts) measured. */
export interface DbLimit {
  rowsPerSec: number;
  seconds: number;
  bytesOnDisk: number;
  /** Bytes written to storage during the timed loop (WAL, checkpoints), per row (SQLite). */
  writtenPerRow?: number;
}

/** Extra benchmark entries (bench/extras.ts): what each is given and returns. */
export interface BenchContext {
  backend: BackendName;
  /** The running Lectern (url, pid). */
  server: Server;
  seed: number;
  quick: boolean;
  /** A scratch folder of this backend's run (removed afterwards). */
  dir: string;
  /** Statements stored so far (the loaded stream is statements 0 … n-1 of `seed`). */
  statements: number;
  /** The database the server uses: a file (sqlite) or a URL (postgres). */
  sqlitePath?: string;
  postgresUrl?: string;
  /** `Authorization` header value of the benchmark user (all scopes, default tenant). */
  authorization: string;
  /** The load generator (a separate process) against any URL. */
  load(url: string, jobs: Job[]): Promise<LoadResult[]>;
}

/** One line of the results table. Ratios come first in the table; give one when there is a baseline. */
export interface BenchRow {
  workload: string;
  value: number;
  unit: string;
  baseline?: number;
  /** What the baseline is, e.g. "raw SQLite insert loop". */
  baselineName?: string;
  /** value / baseline (or baseline / value when lower is better): 1.0 is the limit. */
  ratio?: number;
  p50?: number;
  p99?: number;
  failed?: boolean;
  note?: string;
}

export interface BenchEntry {
  name: string;
  /** Run after each size's load and queries (else once, after the largest size's). */
  everySize?: boolean;
  run(ctx: BenchContext): Promise<BenchRow[]>;
}
