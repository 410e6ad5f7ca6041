/**
 * The phases of `npm run bench` that run once, at the largest size, on the loaded store:
 *
 * - prune (both backends): `lectern prune --before` the stored time of statement N/10, in its own
 *   process, while small POSTs (10 per request, 4 clients) run; against the same POSTs idle.
 * - replica (PostgreSQL): a streaming hot standby of the bench's cluster (pg_basebackup), a second
 *   `lectern runserver` reading from it (LECTERN_POSTGRES_READ_URLS); the query filters' first
 *   pages on it idle, then while batch ingest runs on the primary from another load process.
 * - tenants (PostgreSQL): batch ingest into one store against the same load spread over 4 stores,
 *   each in a database of its own: what the per-tenant ordering lock costs.
 *
 * Each returns rows for the results table (bench/harness.ts BenchRow); failures are thrown.
 */
import { mkdtempSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Job, LoadResult } from './load.ts';
import { SINGLES_FROM } from './generate.ts';
import {
  type BenchRow,
  freeDisk,
  pgQuery,
  pinProcesses,
  postmasterPid,
  runCli,
  runLoad,
  type Server,
  type SmallPosts,
  smallPosts,
  startLectern,
  startLoad,
  storedOf,
  tenantUser,
} from './harness.ts';
import { type PgCluster, startStandby } from '../scripts/postgres-cluster.ts';

/** Statements the phases write come from ranges of the stream the loaded store never holds (a kept store stays reusable up to its prune). */
const REPLICA_INGEST_FROM = SINGLES_FROM + 200_000_000;
const TENANTS_FROM = SINGLES_FROM + 300_000_000;

export interface PhaseContext {
  server: Server & { env: NodeJS.ProcessEnv };
  seed: number;
  quick: boolean;
  /** The loaded stream: statements 0 … statements-1 of `seed`… */
  statements: number;
  /** … from this one on (an earlier run's prune phase removed the older ones of a reused store). */
  firstKept: number;
  /** A scratch folder (removed afterwards). */
  dir: string;
  log(s: string): void;
}

const seconds = (t0: number) => (performance.now() - t0) / 1000;
const f = (n: number) => Math.round(n).toLocaleString('en-US');

// ----- prune --------------------------------------------------------------------------------

export interface PruneFigures {
  cut: number;
  before: string;
  pruned: number;
  seconds: number;
  complete: boolean;
  idle: SmallPosts;
  during: SmallPosts;
}

/**
 * Prunes the oldest tenth (statements stored before statement N/10's `stored`; on a reused store
 * an earlier run pruned, the next tenth) while small POSTs run. A prune still running after `maxSeconds` is interrupted (SIGINT: it finishes its batch and
 * reports), and its total time is projected from its rate.
 */
export async function prunePhase(ctx: PhaseContext, maxSeconds: number): Promise<{ rows: BenchRow[]; figures: PruneFigures }> {
  const tenth = Math.floor(ctx.statements / 10);
  const cut = ctx.firstKept + tenth;
  if (cut >= ctx.statements * 0.45) throw new Error(`the store was pruned up to statement ${ctx.firstKept} already: another tenth would reach the queries' since/until window`);
  const before = await storedOf(ctx.server.url, ctx.seed, cut);
  const idleSeconds = ctx.quick ? 2 : 10;
  ctx.log(`prune: small POSTs idle for ${idleSeconds} s`);
  const stopIdle = { done: false };
  const timer = setTimeout(() => (stopIdle.done = true), idleSeconds * 1000);
  const idle = await smallPosts(ctx.server.url, ctx.seed + 1, stopIdle);
  clearTimeout(timer);
  ctx.log(`prune: lectern prune --before ${before} (statement ${f(cut)}), at most ${maxSeconds} s, with small POSTs`);
  const stop = { done: false };
  const interrupt = new AbortController();
  const limit = setTimeout(() => interrupt.abort(), maxSeconds * 1000);
  const t0 = performance.now();
  const pruning = runCli(['prune', '--before', before, '--json'], ctx.server.env, interrupt.signal);
  const posting = smallPosts(ctx.server.url, ctx.seed + 2, stop);
  const res = await pruning.finally(() => (stop.done = true));
  const took = seconds(t0);
  clearTimeout(limit);
  const during = await posting;
  if (res.code !== 0 && !(res.code === 130 && interrupt.signal.aborted)) throw new Error(`lectern prune exited with ${res.code}: ${res.stderr.slice(-1000)}`);
  const reports = res.stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { statements: number; complete: boolean });
  const pruned = reports.reduce((n, r) => n + r.statements, 0);
  const complete = res.code === 0 && reports.every((r) => r.complete);
  const rate = pruned / took;
  const figures: PruneFigures = { cut, before, pruned, seconds: took, complete, idle, during };
  const rows: BenchRow[] = [
    {
      workload: `prune the oldest tenth (${f(pruned)} of ${f(ctx.statements - ctx.firstKept)}${complete ? '' : `, interrupted after ${maxSeconds} s`})`,
      value: rate,
      unit: 'statements/s',
      note: complete ? `${took.toFixed(0)} s in all` : `≈ ${f(tenth / rate)} s projected for all ${f(tenth)}`,
    },
    { workload: `  prune's total time${complete ? '' : ' (projected)'}`, value: complete ? took : tenth / rate, unit: 's' },
    {
      workload: '  small POSTs during the prune (10/POST, 4 clients)',
      value: during.statementsPerSec,
      unit: 'statements/s',
      baseline: idle.statementsPerSec,
      baselineName: 'the same POSTs idle',
      ratio: during.statementsPerSec / idle.statementsPerSec,
      p50: during.p50,
      p99: during.p99,
    },
    { workload: '  small POSTs idle', value: idle.statementsPerSec, unit: 'statements/s', p50: idle.p50, p99: idle.p99 },
  ];
  return { rows, figures };
}

// ----- replica ------------------------------------------------------------------------------

interface StandbyStats {
  xacts: number;
  fetched: number;
}

async function dbStats(url: string): Promise<StandbyStats> {
  const [r] = await pgQuery<{ x: string; t: string }>(
    url,
    'SELECT xact_commit + xact_rollback AS x, tup_fetched + tup_returned AS t FROM pg_stat_database WHERE datname = current_database()',
  );
  return { xacts: Number(r.x), fetched: Number(r.t) };
}

const delta = (a: StandbyStats, b: StandbyStats): StandbyStats => ({ xacts: b.xacts - a.xacts, fetched: b.fetched - a.fetched });

/** The statistics a backend reports reach pg_stat_database within a second (PostgreSQL 15 flushes them at most once a second). */
const settle = () => new Promise((r) => setTimeout(r, 1500));

async function heartbeatReplica(url: string): Promise<{ state: string; lag_ms: number | null } | undefined> {
  const res = await fetch(`${url}/heartbeat`);
  const body = (await res.json()) as { replicas?: { state: string; lag_ms: number | null }[] };
  return body.replicas?.[0];
}

/**
 * Two hosts on one machine: the primary's side (its PostgreSQL, the Lectern that ingests, the
 * ingest clients) on the first half of the CPUs, the standby's (its PostgreSQL and its replay, the
 * Lectern that reads from it, the query clients) on the other half. Unpinned, the standby's
 * queries during ingest measured how two servers share two cores, not how a standby keeps up.
 * Undefined on a one-CPU machine.
 */
function replicaCpus(): { primary: string; standby: string; all: string } | undefined {
  const n = availableParallelism();
  if (n < 2) return undefined;
  const half = Math.floor(n / 2);
  const range = (a: number, b: number) => (a === b ? String(a) : `${a}-${b}`);
  return { primary: range(0, half - 1), standby: range(half, n - 1), all: range(0, n - 1) };
}

export interface ReplicaFigures {
  /** Where each side ran (replicaCpus), when pinned. */
  cpus?: { primary: string; standby: string };
  basebackupSeconds: number;
  idle: LoadResult[];
  during: LoadResult[];
  standbyIdle: StandbyStats;
  primaryIdle: StandbyStats;
  /** Replay lag samples during ingest: the primary's pg_stat_replication.replay_lag (ms) and bytes not yet replayed. */
  lagMs: number[];
  lagBytes: number[];
  heartbeatLagMs: number[];
  ingestPerSec: number;
}

/**
 * Queries served by a streaming standby, idle and while the primary ingests. `queryJobs` are the
 * bench's filters (first pages). The standby is a throwaway (made by pg_basebackup, removed with
 * its replication slot afterwards).
 */
export async function replicaPhase(
  ctx: PhaseContext,
  cluster: PgCluster,
  database: string,
  queryJobs: Job[],
  check: (r: LoadResult, where: string) => void,
): Promise<{ rows: BenchRow[]; figures: ReplicaFigures }> {
  const primaryDb = cluster.url.replace(/\/postgres$/, `/${database}`);
  const [size] = await pgQuery<{ b: string }>(cluster.url, 'SELECT sum(pg_database_size(oid)) AS b FROM pg_database');
  const need = Number(size.b) * 1.1 + 1024 ** 3;
  const free = freeDisk(ctx.dir);
  if (free < need)
    throw new Error(`not enough disk for the standby: ${(free / 1024 ** 3).toFixed(1)} GB free, ≈ ${(need / 1024 ** 3).toFixed(1)} GB needed (a copy of the cluster)`);
  ctx.log(`replica: pg_basebackup of ${(Number(size.b) / 1024 ** 3).toFixed(1)} GB`);
  const cpus = replicaCpus();
  const primaryPid = await postmasterPid(cluster.url);
  let t0 = performance.now();
  const standby = await startStandby(cluster, ['hot_standby_feedback = on']);
  const basebackupSeconds = seconds(t0);
  const standbyDb = standby.url.replace(/\/postgres$/, `/${database}`);
  let reader: Server | undefined;
  const stopIngest = new AbortController();
  try {
    reader = await startLectern({
      backend: 'postgres',
      dir: mkdtempSync(join(ctx.dir, 'replica-')),
      postgresUrl: primaryDb,
      env: { LECTERN_POSTGRES_READ_URLS: standbyDb },
    });
    if (cpus) {
      ctx.log(`replica: the primary's side on CPU ${cpus.primary}, the standby's on CPU ${cpus.standby}`);
      for (const pid of [primaryPid, ctx.server.pid]) pinProcesses(pid, cpus.primary);
      for (const pid of [await postmasterPid(standby.url), reader.pid]) pinProcesses(pid, cpus.standby);
    }
    for (let i = 0; (await heartbeatReplica(reader.url))?.state !== 'up'; i++) {
      if (i > 120) throw new Error(`the standby is not up after 60 s: ${JSON.stringify(await heartbeatReplica(reader.url))}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    ctx.log('replica: queries on the standby, idle');
    const [s0, p0] = [await dbStats(standbyDb), await dbStats(primaryDb)];
    const idle = await runLoad(reader.url, ctx.seed, queryJobs, undefined, cpus?.standby);
    await settle();
    const standbyIdle = delta(s0, await dbStats(standbyDb));
    const primaryIdle = delta(p0, await dbStats(primaryDb));
    for (const r of idle) check(r, 'replica idle');
    const requests = idle.reduce((n, r) => n + (r.run?.requests ?? 0), 0);
    // Each request is at least one transaction where it was served: most must be on the standby.
    if (standbyIdle.xacts < requests / 2)
      throw new Error(`the standby served ${standbyIdle.xacts} transactions for ${requests} requests (the primary ${primaryIdle.xacts}): reads are not on the standby`);

    ctx.log('replica: the same queries while the primary ingests (4 clients × 100 per POST)');
    const [ins0] = await pgQuery<{ n: string }>(primaryDb, "SELECT n_tup_ins AS n FROM pg_stat_user_tables WHERE relname = 'statements'");
    const ingest = startLoad(
      ctx.server.url,
      ctx.seed,
      [{ kind: 'batch', name: 'ingest during replica reads', from: REPLICA_INGEST_FROM, count: 0, batch: 100, connections: 4, seconds: 3600 }],
      stopIngest.signal,
      cpus?.primary,
    );
    const lagMs: number[] = [];
    const lagBytes: number[] = [];
    const heartbeatLagMs: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [r] = await pgQuery<{ ms: number | null; bytes: string | null }>(
          cluster.url,
          'SELECT extract(epoch FROM replay_lag) * 1000 AS ms, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) AS bytes FROM pg_stat_replication LIMIT 1',
        );
        if (r) {
          lagMs.push(Number(r.ms ?? 0));
          lagBytes.push(Number(r.bytes ?? 0));
        }
        const hb = await heartbeatReplica(reader!.url);
        if (hb?.lag_ms !== undefined && hb.lag_ms !== null) heartbeatLagMs.push(hb.lag_ms);
        await new Promise((res) => setTimeout(res, 500));
      }
    })();
    await new Promise((r) => setTimeout(r, 3000));
    t0 = performance.now();
    const during = await runLoad(reader.url, ctx.seed, queryJobs, undefined, cpus?.standby);
    const duringSeconds = seconds(t0);
    const [ins1] = await pgQuery<{ n: string }>(primaryDb, "SELECT n_tup_ins AS n FROM pg_stat_user_tables WHERE relname = 'statements'");
    sampling = false;
    stopIngest.abort();
    await Promise.all([ingest, sampler]);
    for (const r of during) check(r, 'replica during ingest');
    const ingestPerSec = (Number(ins1.n) - Number(ins0.n)) / duringSeconds;
    const figures: ReplicaFigures = {
      cpus: cpus && { primary: cpus.primary, standby: cpus.standby },
      basebackupSeconds,
      idle,
      during,
      standbyIdle,
      primaryIdle,
      lagMs,
      lagBytes,
      heartbeatLagMs,
      ingestPerSec,
    };
    return { rows: replicaRows(figures), figures };
  } finally {
    stopIngest.abort();
    await reader?.stop();
    standby.destroy();
    // The primary and its Lectern serve the phases after this one on every CPU again.
    if (cpus) for (const pid of [primaryPid, ctx.server.pid]) pinProcesses(pid, cpus.all);
    // The standby's slot would keep WAL on the primary for ever.
    await pgQuery(cluster.url, 'SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active').catch(() => undefined);
  }
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : NaN;
};

function replicaRows(x: ReplicaFigures): BenchRow[] {
  const rows: BenchRow[] = [
    {
      workload: 'standby: pg_basebackup of the cluster',
      value: x.basebackupSeconds,
      unit: 's',
      note: x.cpus ? `then the primary's side on CPU ${x.cpus.primary}, the standby's on CPU ${x.cpus.standby}` : undefined,
    },
    {
      workload: '  reads on the standby (idle run: transactions there ÷ requests)',
      value: x.standbyIdle.xacts,
      unit: 'transactions',
      baseline: x.idle.reduce((n, r) => n + (r.run?.requests ?? 0), 0),
      baselineName: 'requests sent',
      ratio: x.standbyIdle.xacts / x.idle.reduce((n, r) => n + (r.run?.requests ?? 0), 0),
      note: `primary: ${f(x.primaryIdle.xacts)} transactions meanwhile`,
    },
    { workload: '  ingest on the primary during the reads (4 clients × 100)', value: x.ingestPerSec, unit: 'statements/s' },
    { workload: '  replay lag during ingest, p50 (pg_stat_replication)', value: quantile(x.lagMs, 0.5), unit: 'ms', note: `max ${f(Math.max(0, ...x.lagMs))} ms` },
    { workload: '  replay lag during ingest, max', value: Math.max(0, ...x.lagMs), unit: 'ms' },
    { workload: '  WAL not yet replayed during ingest, max', value: Math.max(0, ...x.lagBytes) / 1024, unit: 'KB' },
    { workload: "  the server's view (/heartbeat lag_ms), max", value: Math.max(0, ...x.heartbeatLagMs), unit: 'ms' },
  ];
  for (const d of x.during) {
    const i = x.idle.find((r) => r.name === d.name);
    if (!d.run || !i?.run) continue;
    rows.push({
      workload: `  standby query during ingest: ${d.name} (p50; target ≤ 2× idle)`,
      value: d.run.latency.p50,
      unit: 'ms',
      baseline: i.run.latency.p50,
      baselineName: 'idle p50',
      ratio: d.run.latency.p50 / i.run.latency.p50,
      p50: d.run.latency.p50,
      p99: d.run.latency.p99,
    });
    rows.push({ workload: '    p99', value: d.run.latency.p99, unit: 'ms', baseline: i.run.latency.p99, baselineName: 'idle p99', ratio: d.run.latency.p99 / i.run.latency.p99 });
  }
  return rows;
}

// ----- tenants ------------------------------------------------------------------------------

export interface TenantRun {
  stores: number;
  statementsPerSec: number;
  p50: number;
  p99: number;
}

/**
 * Batch ingest (100 per POST) from 4 load processes × 2 clients, all into one store, then the
 * same statements spread over 4 stores (one per process): each run in a new database of the
 * cluster, dropped afterwards. Writes to one store are serialised by its ordering lock; writes to
 * different stores are not.
 */
export async function tenantsPhase(ctx: PhaseContext, cluster: PgCluster, total: number): Promise<{ rows: BenchRow[]; runs: TenantRun[] }> {
  const targets = ['t1', 't2', 't3', 't4'];
  const runs: TenantRun[] = [];
  for (const stores of [1, 4]) {
    const db = `lectern_tenants_${stores}`;
    await pgQuery(cluster.url, `DROP DATABASE IF EXISTS ${db}`);
    await pgQuery(cluster.url, `CREATE DATABASE ${db}`);
    const server = await startLectern({ backend: 'postgres', dir: mkdtempSync(join(ctx.dir, 'tenants-')), postgresUrl: cluster.url.replace(/\/postgres$/, `/${db}`), targets });
    try {
      ctx.log(`tenants: ${f(total)} statements into ${stores} store${stores > 1 ? 's' : ''}, 4 processes × 2 clients × 100 per POST`);
      const part = Math.floor(total / 4);
      const res = await Promise.all(
        targets.map((t, k) =>
          runLoad(
            server.url,
            ctx.seed,
            [{ kind: 'batch', name: `store ${stores === 1 ? targets[0] : t}`, from: TENANTS_FROM + k * part, count: part, batch: 100, connections: 2 }],
            tenantUser(stores === 1 ? targets[0] : t).authorization,
          ),
        ),
      );
      const results = res.map(([r]) => r);
      for (const r of results) if (!r?.run || r.error || r.run.failed > 0) throw new Error(`tenants ${r?.name}: ${r?.error ?? `${r?.run?.failed} failed requests`}`);
      const slowest = Math.max(...results.map((r) => r.run!.seconds));
      const lat = results.map((r) => r.run!.latency);
      runs.push({
        stores,
        statementsPerSec: (part * 4) / slowest,
        p50: quantile(
          lat.map((l) => l.p50),
          0.5,
        ),
        p99: Math.max(...lat.map((l) => l.p99)),
      });
    } finally {
      await server.stop();
      await pgQuery(cluster.url, `DROP DATABASE IF EXISTS ${db}`);
    }
  }
  const [one, four] = runs;
  const rows: BenchRow[] = [
    { workload: `batch ingest into one store (${f(total)} statements, 8 clients × 100/POST)`, value: one.statementsPerSec, unit: 'statements/s', p50: one.p50, p99: one.p99 },
    {
      workload: '  the same spread over 4 stores',
      value: four.statementsPerSec,
      unit: 'statements/s',
      baseline: one.statementsPerSec,
      baselineName: 'one store',
      ratio: four.statementsPerSec / one.statementsPerSec,
      p50: four.p50,
      p99: four.p99,
    },
  ];
  return { rows, runs };
}
