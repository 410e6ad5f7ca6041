/**
 * `npm run bench`: Lectern on SQLite and PostgreSQL, driven over HTTP by a separate load-generator
 * process (autocannon), each figure beside a limit measured in the same run on the same machine.
 *
 *   npm run bench                               # 100k and 1M statements, both backends (≈ 1 h on 2 cores)
 *   npm run bench -- --quick                    # small sizes, short runs (≤ 2 minutes)
 *   npm run bench -- --quick --check            # smoke run (CI): quick sizes; like every run, exits non-zero
 *                                               # when a workload failed to run or a filter matched nothing — never on speed
 *   npm run bench -- --backend sqlite --sizes 20000,100000 --phases ingest,queries
 *   npm run bench -- --profile /tmp/prof        # the server runs with node --cpu-prof (+ pg_stat_statements)
 *   npm run bench -- --fill 16,500,200000       # load between the measured chunks with 16 clients × 500/POST
 *   npm run bench -- --query-seconds 5          # each filter measured for 5 s, not 2 (steadier first-page p99s)
 *   npm run bench -- --backend sqlite --keep /tmp/db   # load into /tmp/db/lectern.sqlite and keep it (e.g. for bench/plans.ts)
 *   npm run bench -- --backend postgres --keep /tmp/db # keep the PostgreSQL cluster (stopped cleanly) in /tmp/db/postgres
 *   npm run bench -- --reuse /tmp/db --sizes 1000000 --phases queries,prune
 *                                               # start from a kept store holding the first size's statements
 *                                               # (same seed), skip its ingest; works on it in place (each
 *                                               # prune phase removes the next tenth of the stream)
 *
 * Workloads per backend: batch ingest (POST 100 statements per request, 4 clients) from an empty
 * store up to each size, single-statement POST and PUT (32 clients), State documents (PUT/GET
 * mix), every query filter alone and combined at each size (first page and the pages the `more`
 * links lead to, 10 deep; 8 clients), then extra entries (bench/extras.ts), peak server RSS and
 * bytes on disk per statement. Limits: the raw database (the same JSON in a tight insert loop into
 * one table: node:sqlite transactions; PostgreSQL COPY) and HTTP (a bare node:http handler that
 * parses the same JSON and answers 204). Output: tables on stdout (ratios first) and a JSON file
 * (bench/results/, or --out), plus the query plans at each size (--no-plans to skip).
 *
 * Phases not run by default, at the largest size, after the others (bench/phases.ts):
 *   --phases …,replica   PostgreSQL: the filters on a streaming standby, idle and while the primary ingests
 *   --phases …,tenants   PostgreSQL: batch ingest into one store against 4 (--tenant-statements, 120,000)
 *   --phases …,prune     the oldest tenth pruned while small POSTs run (--prune-seconds, 1,800, then
 *                        interrupted and projected); the filters again afterwards. Last: it changes the store
 *   --phases …,overview  the entries timed at every size (GET /admin/api/overview) without the other extras
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DatabaseSync } from 'node:sqlite';
import { openCluster, type PgCluster } from '../scripts/postgres-cluster.ts';
import { averageSize, queryFilters, streamMentions, VERB } from './generate.ts';
import { EXTRA_ENTRIES } from './extras.ts';
import {
  AUTHORIZATION,
  bytesWritten,
  type BackendName,
  firstStored,
  freeDisk,
  isStored,
  type BenchContext,
  type BenchEntry,
  machine,
  type Machine,
  memory,
  pgQuery,
  postgresLimit,
  runLoad,
  settle,
  sqliteLimit,
  startBareHttp,
  startLectern,
  startPostgres,
  statementStats,
  storedOf as storedAt,
} from './harness.ts';
import { type PhaseContext, prunePhase, replicaPhase, tenantsPhase } from './phases.ts';
import type { Job, LoadResult } from './load.ts';
import { type PlanCase, paramsOf, plansMarkdown, postgresPlans, sqlitePlans } from './plans.ts';
import { type BackendResult, type Baselines, type Disk, gb, int, type MachineCheck, type QueryFigure, report, settledText, table, writeRows } from './report.ts';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    check: { type: 'boolean', default: false },
    backend: { type: 'string', default: 'both' },
    sizes: { type: 'string' },
    seed: { type: 'string', default: '20261123' },
    out: { type: 'string' },
    phases: { type: 'string', default: 'ingest,singles,documents,queries,plans,extras' },
    'no-plans': { type: 'boolean', default: false },
    profile: { type: 'string' },
    keep: { type: 'string' },
    reuse: { type: 'string' },
    fill: { type: 'string' },
    'prune-seconds': { type: 'string', default: '1800' },
    'tenant-statements': { type: 'string' },
    'query-seconds': { type: 'string' },
  },
});

const QUICK = args.quick || (args.check && !args.sizes);
const SEED = Number(args.seed);
const SIZES = (args.sizes ?? (QUICK ? '1500,6000' : '100000,1000000')).split(',').map(Number);
const BACKEND_LIST: BackendName[] = args.backend === 'both' ? ['sqlite', 'postgres'] : [args.backend as BackendName];
if (!BACKEND_LIST.every((b) => b === 'sqlite' || b === 'postgres') || !SIZES.every((n) => Number.isInteger(n) && n > 0)) {
  process.stderr.write(`usage: --backend sqlite|postgres|both (got ${args.backend}), --sizes N[,N…] (got ${args.sizes})\n`);
  process.exit(2);
}
const PHASES = new Set(args.phases!.split(','));
/** --fill CLIENTS,STATEMENTS_PER_POST,CHUNK: how the unmeasured chunks between sizes are loaded. */
const FILL = args.fill ? (([clients, batch, chunk]) => ({ clients, batch, chunk }))(args.fill.split(',').map(Number)) : undefined;
if (args['no-plans']) PHASES.delete('plans');
/** --reuse works on the kept store in place, so it stays where it is: --keep may only name the same place. */
if (args.reuse && args.keep && resolve(args.reuse) !== resolve(args.keep)) {
  process.stderr.write('--reuse works on the kept store in place (it stays there): drop --keep, or give it the same path\n');
  process.exit(2);
}
const KEEP = args.reuse ? undefined : args.keep;
const REUSE = args.reuse;

/** A kept SQLite store: the file itself, or lectern.sqlite in the folder given. */
const sqliteFileIn = (p: string) => (existsSync(p) && statSync(p).isDirectory() ? join(p, 'lectern.sqlite') : p);
/** A kept PostgreSQL cluster's folder (holding data/): given itself, as its data/, or as the folder --keep filled (postgres/). */
function clusterDirIn(p: string): string {
  for (const dir of [join(p, 'postgres'), p, dirname(p)]) if (existsSync(join(dir, 'data', 'PG_VERSION'))) return dir;
  throw new Error(`no kept PostgreSQL cluster in ${p} (looked for postgres/data, data and the folder itself)`);
}

/** ≈ 2 KB on disk per statement (1.4 KB of JSON, ×1.3–1.4 with indexes, and headroom); PostgreSQL also keeps up to max_wal_size (4 GB) of WAL. */
const BYTES_PER_STATEMENT = 2048;
const POSTGRES_WAL = 5 * 1024 ** 3;

/** Workload sizes: the full run and --quick. */
const P = QUICK
  ? { chunk: 6000, singles: 300, documents: 300, querySeconds: 0.2, rawRows: 6000, bareBatches: 20, bareSingles: 400, pages: 3 }
  : { chunk: 20_000, singles: 5000, documents: 10_000, querySeconds: 2, rawRows: 100_000, bareBatches: 300, bareSingles: 50_000, pages: 10 };
/** --query-seconds: each filter's measured window, first page and pages 2–10 (default P.querySeconds). */
const QUERY_SECONDS = Number(args['query-seconds'] ?? P.querySeconds);
const SHAPE = { ...P, querySeconds: QUERY_SECONDS };
if (!(QUERY_SECONDS > 0)) {
  process.stderr.write(`usage: --query-seconds takes a number of seconds above 0 (got ${args['query-seconds']})\n`);
  process.exit(2);
}
const BATCH = 100;
const INGEST_CLIENTS = 4;
const SINGLE_CLIENTS = 32;
const QUERY_CLIENTS = 8;
const DOC_CLIENTS = 32;

const errors: string[] = [];
const fail = (what: string, err: unknown) => {
  const msg = `${what}: ${err instanceof Error ? err.message : String(err)}`;
  errors.push(msg);
  process.stderr.write(`FAILED ${msg}\n`);
};
const log = (s: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${s}\n`);

/** A load result that failed to run, or got answers other than 2xx, is an error. */
function checked(r: LoadResult | undefined, where: string): LoadResult | undefined {
  if (!r || r.error) {
    fail(`${where} ${r?.name ?? ''}`, r?.error ?? 'no result');
    return undefined;
  }
  for (const run of [r.run, r.deep]) if (run && run.failed > 0) fail(`${where} ${r.name}`, `${run.failed} failed requests (${JSON.stringify(run.statusCodes)})`);
  if (r.kind === 'query' && r.firstPageCount === 0) fail(`${where} ${r.name}`, 'the filter matched no statement');
  return r;
}

// ----- baselines ---------------------------------------------------------------------------

const bareJobs = (): Job[] => [
  // Unreported: at ≈ 40k req/s a cold handler's first second (JIT, connections) weighs on a short run.
  { kind: 'single', name: 'warm-up', method: 'POST', from: 0, count: P.bareSingles, connections: SINGLE_CLIENTS },
  { kind: 'batch', name: 'batch', from: 0, count: P.bareBatches * BATCH, batch: BATCH, connections: INGEST_CLIENTS },
  { kind: 'single', name: 'post', method: 'POST', from: 0, count: P.bareSingles, connections: SINGLE_CLIENTS },
  { kind: 'single', name: 'put', method: 'PUT', from: P.bareSingles, count: P.bareSingles, connections: SINGLE_CLIENTS },
  { kind: 'query', name: 'get', path: '/xAPI/statements?limit=100', pages: 1, connections: QUERY_CLIENTS, seconds: Math.max(P.querySeconds, 1) },
  { kind: 'documents', name: 'documents', count: P.bareSingles, keys: 2000, connections: DOC_CLIENTS },
];

/** The bare node:http handler in its own process for `fn`, stopped afterwards. */
async function onBareHttp<T>(fn: (url: string, pid: number) => Promise<T>): Promise<T> {
  const bare = await startBareHttp(SEED);
  try {
    return await fn(bare.url, bare.pid);
  } finally {
    await bare.stop();
  }
}

/**
 * The bare handler again, at one size before its queries (Lectern idle): a 10M run takes an hour,
 * and this machine's speed has drifted by 15–25 % within one (docs/performance.md). Reported
 * beside the raw ratios, never folded into them.
 */
async function machineCheck(size: number): Promise<MachineCheck | undefined> {
  try {
    return await onBareHttp(async (url) => {
      const res = await runLoad(
        url,
        SEED,
        bareJobs().filter((j) => ['warm-up', 'batch', 'get'].includes(j.name)),
      );
      const by = Object.fromEntries(res.map((r) => [r.name, checked(r, 'machine check')]));
      return { size, batchStatementsPerSec: by.batch?.statementsPerSec, getRps: by.get?.run?.rps };
    });
  } catch (err) {
    fail('machine check', err);
    return undefined;
  }
}

async function baselines(dir: string, cluster: PgCluster | undefined): Promise<Baselines> {
  const b: Baselines = {};
  log('baseline: bare node:http handler');
  try {
    await onBareHttp(async (url, pid) => {
      const res = await runLoad(url, SEED, bareJobs());
      b.http = Object.fromEntries(res.map((r) => [r.name, checked(r, 'bare HTTP')]));
      b.httpPeakRss = memory(pid).peak;
    });
  } catch (err) {
    fail('bare HTTP baseline', err);
  }
  if (BACKEND_LIST.includes('sqlite')) {
    log('baseline: raw node:sqlite insert loop');
    try {
      b.sqlite = {
        perTx100: await sqliteLimit(join(dir, 'raw-100.sqlite'), SEED, P.rawRows, 100),
        perTx10k: await sqliteLimit(join(dir, 'raw-10k.sqlite'), SEED, P.rawRows, 10_000),
      };
    } catch (err) {
      fail('raw SQLite baseline', err);
    }
  }
  if (cluster) {
    log('baseline: PostgreSQL COPY');
    try {
      await pgQuery(cluster.url, 'DROP DATABASE IF EXISTS bench_raw');
      await pgQuery(cluster.url, 'CREATE DATABASE bench_raw');
      b.postgres = await postgresLimit(cluster.url.replace(/\/postgres$/, '/bench_raw'), SEED, P.rawRows, 10_000);
    } catch (err) {
      fail('PostgreSQL COPY baseline', err);
    }
  }
  return b;
}

// ----- one backend --------------------------------------------------------------------------

/** `stored` of stream statement i, read back through the API (since/until bounds that exist). */
const storedOf = (url: string, i: number) => storedAt(url, SEED, i);

/**
 * A reused store must be what the run would have loaded: statements 0 … size-1 of this seed (the
 * query filters and since/until bounds are taken from them), less the oldest ones if an earlier
 * run's prune phase removed them. A few ids are looked up; a bigger store is refused.
 */
async function checkReused(url: string, size: number): Promise<number> {
  const first = await firstStored(url, SEED, size);
  for (const i of [first, Math.floor(size / 2), size - 2, size - 1])
    if (!(await isStored(url, SEED, i))) throw new Error(`--reuse: statement ${i} of seed ${SEED} is not in the store (another seed, or fewer than ${size} statements)`);
  for (const i of [size, size + 1, size + 2])
    if (await isStored(url, SEED, i)) throw new Error(`--reuse: statement ${i} of seed ${SEED} is in the store: it holds more than the first size (${size})`);
  return first;
}

async function queryCases(url: string, size: number): Promise<PlanCase[]> {
  // A window of 5 % of the store: since is exclusive, so it starts just before statement 45 %.
  const since = new Date(Date.parse(await storedOf(url, Math.floor(size * 0.45))) - 1).toISOString();
  const until = await storedOf(url, Math.floor(size * 0.5));
  const cases = Object.entries(queryFilters(SEED)).map(([name, params]) => ({ name, params }));
  cases.push({ name: 'since + until (5 % of the store)', params: { since, until } });
  cases.push({ name: 'verb + since + until', params: { verb: VERB.failed, since, until } });
  return cases.map((c) => ({ ...c, params: { ...c.params, limit: '100' } }));
}

/**
 * A filter whose whole answer at the smallest size measured was one short page (k < 100
 * statements) serves a full page at larger sizes: a different answer, not the same search in a
 * larger store. It is measured again with `limit=k`, and the growth table compares that twin.
 */
function sameAnswerCases(measured: QueryFigure[], size: number): (PlanCase & { sameAnswerAs: string })[] {
  const smallest = Math.min(...measured.map((q) => q.size));
  if (!measured.length || smallest >= size) return [];
  const filters: Record<string, Record<string, string> | undefined> = queryFilters(SEED);
  return measured.flatMap((q) => {
    const k = q.firstPageCount ?? 0;
    if (q.size !== smallest || q.sameAnswerAs || q.pagesFound !== 1 || k === 0 || k >= 100) return [];
    const c = filters[q.filter];
    return c ? [{ name: `${q.filter}, limit ${k} (its whole answer at ${int(smallest)})`, params: { ...c, limit: String(k) }, sameAnswerAs: q.filter }] : [];
  });
}

const pathOf = (params: Record<string, string>) => `/xAPI/statements?${new URLSearchParams(params).toString()}`;

/**
 * A filter may rightly match nothing once its statements were all in a pruned part (at small
 * sizes, the rare agent's): when no statement of the stream after `prunedTo` mentions its values.
 */
function prunedAway(r: LoadResult, cases: PlanCase[], prunedTo: number, size: number): boolean {
  if (r.firstPageCount !== 0) return false;
  // Pruning goes by stored time, which follows the stream to within a few concurrent batches.
  const gone = !streamMentions(SEED, prunedTo + 2000, size, cases.find((c) => c.name === r.name)?.params ?? {});
  if (gone) log(`${r.name} matches nothing, rightly: no statement after the pruned part mentions it`);
  return gone;
}

/** The query workload of each filter: its first page, and the pages `more` leads to up to `pages`. */
const queryJobs = (cases: PlanCase[], pages: number): Job[] =>
  cases.map((c) => ({ kind: 'query', name: c.name, path: pathOf(c.params), pages, connections: QUERY_CLIENTS, seconds: QUERY_SECONDS }));

async function sqliteDisk(file: string): Promise<Disk> {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const s = db.prepare('SELECT count(*) AS n, sum(length(CAST(full AS BLOB))) AS b FROM statements').get() as { n: number; b: number };
    const parts: Record<string, number> = {};
    for (const r of db.prepare('SELECT name, sum(pgsize) AS s FROM dbstat GROUP BY name ORDER BY 2 DESC').all() as { name: string; s: number }[]) parts[r.name] = r.s;
    let bytes = 0;
    for (const f of [file, `${file}-wal`]) if (existsSync(f)) bytes += statSync(f).size;
    return { statements: s.n, jsonBytes: s.b, bytes, parts };
  } finally {
    db.close();
  }
}

async function postgresDisk(url: string): Promise<Disk> {
  const [s] = await pgQuery<{ n: string; b: string }>(url, 'SELECT count(*) AS n, sum(octet_length("full"::text)) AS b FROM statements');
  const rels = await pgQuery<{ name: string; s: string }>(
    url,
    "SELECT c.relname AS name, pg_relation_size(c.oid) + CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END AS s FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i') ORDER BY 2 DESC",
  );
  const parts = Object.fromEntries(rels.map((r) => [r.name, Number(r.s)]));
  return { statements: Number(s.n), jsonBytes: Number(s.b), bytes: Object.values(parts).reduce((a, b) => a + b, 0), parts };
}

async function benchBackend(backend: BackendName, root: string, cluster: PgCluster | undefined, progress: (r: BackendResult) => void): Promise<BackendResult> {
  const dir = mkdtempSync(join(root, `${backend}-`));
  // With --keep the store is made where it is kept (no copy: at 10M it is ≈ 20 GB).
  const sqlitePath = backend !== 'sqlite' ? undefined : REUSE ? sqliteFileIn(REUSE) : KEEP ? join(KEEP, 'lectern.sqlite') : join(dir, 'lectern.sqlite');
  if (sqlitePath && REUSE && !existsSync(sqlitePath)) throw new Error(`--reuse: no SQLite store at ${sqlitePath}`);
  if (sqlitePath && KEEP) {
    if (existsSync(sqlitePath)) throw new Error(`--keep: ${sqlitePath} exists; a kept store is not overwritten (--reuse it, or remove it)`);
    mkdirSync(KEEP, { recursive: true });
  }
  const postgresUrl = cluster ? cluster.url.replace(/\/postgres$/, '/lectern_bench') : undefined;
  const result: BackendResult = { backend, ingest: [], fill: [], writes: {}, queries: [], peakRss: 0, extras: [], plans: {}, phaseRows: [], afterPrune: [], machineChecks: [] };
  log(`${backend}: starting lectern runserver`);
  const server = await startLectern({ backend, dir, sqlitePath, postgresUrl, cpuProfDir: args.profile });
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, memory(server.pid).peak)), 500);
  try {
    let loaded = 0;
    let singlesFrom = 0;
    const contextAt = (statements: number): BenchContext => ({
      backend,
      server,
      seed: SEED,
      quick: QUICK,
      dir,
      statements,
      sqlitePath,
      postgresUrl,
      authorization: AUTHORIZATION,
      load: (url, jobs) => runLoad(url, SEED, jobs),
    });
    const runEntry = async (entry: BenchEntry, ctx: BenchContext) => {
      log(`${backend}: ${entry.name}`);
      try {
        const rows = await entry.run(ctx);
        for (const row of rows) if (row.failed) fail(`${backend} ${entry.name}`, `${row.workload} failed${row.note ? `: ${row.note}` : ''}`);
        result.extras.push(...rows);
      } catch (err) {
        fail(`${backend} ${entry.name}`, err);
      }
    };
    /** The first statement of the stream in the store: 0, unless a reused store was pruned. */
    let firstKept = 0;
    if (REUSE) {
      loaded = SIZES[0];
      firstKept = await checkReused(server.url, loaded);
      log(
        `${backend}: reusing the store in ${REUSE}: statements ${int(firstKept)}…${int(loaded - 1)} of seed ${SEED} are there, ${int(loaded)} is not${firstKept ? ' (the older ones were pruned by an earlier run)' : ''}`,
      );
    }
    for (const size of SIZES) {
      if (loaded < size && PHASES.has('ingest')) {
        const where = sqlitePath ? dirname(sqlitePath) : cluster!.dir;
        const need = (size - loaded) * BYTES_PER_STATEMENT + (backend === 'postgres' ? POSTGRES_WAL : 0);
        const free = freeDisk(where);
        log(`${backend}: ${gb(free)} free in ${where}; loading ${int(loaded)} → ${int(size)} needs ≈ ${gb(need)}`);
        if (free < need)
          throw new Error(
            `not enough disk to load ${int(size)} statements: ${gb(free)} free in ${where}, ≈ ${gb(need)} needed (2 KB per statement${backend === 'postgres' ? ' + 5 GB of WAL' : ''})`,
          );
      }
      while (loaded < size && PHASES.has('ingest')) {
        // The chunk from the empty store and the chunk that reaches each size are the measured
        // workload; with --fill, the chunks between are loaded faster (bigger POSTs, more clients)
        // and reported apart.
        const measured = !FILL || loaded === 0 || size - loaded <= P.chunk;
        const count = measured ? Math.min(P.chunk, size - loaded) : Math.min(FILL.chunk, size - loaded - P.chunk);
        const shape = measured ? { batch: BATCH, connections: INGEST_CLIENTS } : { batch: FILL.batch, connections: FILL.clients };
        const written = bytesWritten(server.pid);
        const [r] = await runLoad(server.url, SEED, [{ kind: 'batch', name: `ingest ${loaded}→${loaded + count}`, from: loaded, count, ...shape }]);
        const ok = checked(r, backend);
        if (!ok?.run) throw new Error(`loading stopped at ${loaded} statements`);
        const writtenPerStatement = backend === 'sqlite' ? (bytesWritten(server.pid) - written) / count : undefined;
        const chunk = { from: loaded, to: loaded + count, statementsPerSec: ok.statementsPerSec ?? 0, p50: ok.run.latency.p50, p99: ok.run.latency.p99, writtenPerStatement };
        if (measured) result.ingest.push(chunk);
        else result.fill.push({ ...chunk, ...shape });
        loaded += count;
        log(`${backend}: ${loaded.toLocaleString('en')} statements, ${Math.round(ok.statementsPerSec ?? 0).toLocaleString('en')}/s`);
      }
      if (SIZES.length > 1 && (PHASES.has('ingest') || PHASES.has('queries'))) {
        const settled = await settle();
        log(`${backend}: machine check at ${size.toLocaleString('en')} (bare node:http)${settled ? `; ${settledText(settled)}` : ''}`);
        const check = await machineCheck(size);
        if (check) result.machineChecks.push({ ...check, settled });
      }
      // --quick measures queries at the largest size only.
      if (PHASES.has('queries') && (!QUICK || size === SIZES[SIZES.length - 1])) {
        const cases: (PlanCase & { sameAnswerAs?: string })[] = [...(await queryCases(server.url, size)), ...sameAnswerCases(result.queries, size)];
        log(`${backend}: queries at ${size.toLocaleString('en')}`);
        const res = await runLoad(server.url, SEED, queryJobs(cases, P.pages));
        for (const r of res) {
          const ok = firstKept && prunedAway(r, cases, firstKept, size) ? r : checked(r, `${backend} query @${size}`);
          const sameAnswerAs = cases.find((c) => c.name === r.name)?.sameAnswerAs;
          result.queries.push({
            filter: r.name,
            size,
            first: ok?.run,
            deep: ok?.deep,
            pagesFound: ok?.pagesFound,
            walkMs: ok?.walkMs,
            firstPageCount: ok?.firstPageCount,
            sameAnswerAs,
          });
        }
        if (PHASES.has('plans')) {
          log(`${backend}: plans at ${size.toLocaleString('en')}`);
          try {
            // The plan of the first page and of the deepest page reached (its `more` cursor).
            const deepest = res.flatMap((r) => (r.lastPath && (r.pagesFound ?? 0) > 1 ? [{ name: `${r.name} (page ${r.pagesFound})`, params: paramsOf(r.lastPath) }] : []));
            const all = [...cases, ...deepest];
            const plans = backend === 'sqlite' ? sqlitePlans(sqlitePath!, all) : await postgresPlans(postgresUrl!, all);
            result.plans[size] = plans;
            for (const q of result.queries.filter((x) => x.size === size)) {
              q.dbMs = plans.find((p) => p.name === q.filter)?.ms;
              q.dbMsDeep = plans.find((p) => p.name === `${q.filter} (page ${q.pagesFound})`)?.ms;
            }
          } catch (err) {
            fail(`${backend} plans @${size}`, err);
          }
        }
      }
      if (size === SIZES[0]) {
        const jobs: Job[] = [];
        if (PHASES.has('singles')) {
          jobs.push({ kind: 'single', name: 'post', method: 'POST', from: singlesFrom, count: P.singles, connections: SINGLE_CLIENTS });
          jobs.push({ kind: 'single', name: 'put', method: 'PUT', from: singlesFrom + P.singles, count: P.singles, connections: SINGLE_CLIENTS });
          singlesFrom += 2 * P.singles;
        }
        if (PHASES.has('documents')) jobs.push({ kind: 'documents', name: 'documents', count: P.documents, keys: 2000, connections: DOC_CLIENTS });
        if (jobs.length) {
          log(`${backend}: single-statement writes and documents`);
          for (const r of await runLoad(server.url, SEED, jobs)) result.writes[r.name] = checked(r, backend);
        }
      }
      // Entries measured at every size (the Overview's time); `overview` runs them without the other extras.
      if (PHASES.has('extras') || PHASES.has('overview')) for (const entry of EXTRA_ENTRIES.filter((e) => e.everySize)) await runEntry(entry, contextAt(loaded));
      result.peakRss = Math.max(peak, memory(server.pid).peak);
      progress(result);
    }
    if (PHASES.has('extras')) {
      const ctx: BenchContext = contextAt(loaded);
      for (const entry of EXTRA_ENTRIES.filter((e) => !e.everySize)) await runEntry(entry, ctx);
    }
    const ctx: PhaseContext = { server, seed: SEED, quick: QUICK, statements: loaded, firstKept, dir, log: (s) => log(`${backend}: ${s}`) };
    const phase = async (name: string, run: () => Promise<void>) => {
      if (!PHASES.has(name)) return;
      try {
        await run();
      } catch (err) {
        fail(`${backend} ${name}`, err);
      }
      progress(result);
    };
    const check = (r: LoadResult, where: string) => void checked(r, `${backend} ${where}`);
    if (backend === 'postgres') {
      await phase('replica', async () => {
        const jobs = queryJobs(await queryCases(server.url, loaded), 1);
        const { rows, figures } = await replicaPhase(ctx, cluster!, 'lectern_bench', jobs, check);
        result.phaseRows.push(...rows);
        result.replica = figures;
      });
      await phase('tenants', async () => {
        const { rows, runs } = await tenantsPhase(ctx, cluster!, Number(args['tenant-statements'] ?? (QUICK ? 4000 : 120_000)));
        result.phaseRows.push(...rows);
        result.tenants = runs;
      });
    }
    // Last: it removes the oldest tenth of the store (a kept store is then no longer reusable).
    await phase('prune', async () => {
      const cases = await queryCases(server.url, loaded);
      const { rows, figures } = await prunePhase(ctx, Number(args['prune-seconds']));
      result.phaseRows.push(...rows);
      result.prune = figures;
      log(`${backend}: queries after the prune`);
      for (const r of await runLoad(server.url, SEED, queryJobs(cases, P.pages))) {
        const ok = prunedAway(r, cases, figures.cut, loaded) ? r : checked(r, `${backend} query after the prune`);
        result.afterPrune.push({ filter: r.name, size: loaded, first: ok?.run, deep: ok?.deep, pagesFound: ok?.pagesFound, walkMs: ok?.walkMs });
        const before = result.queries.find((q) => q.size === loaded && q.filter === r.name)?.first?.latency.p50;
        if (ok?.run) {
          result.phaseRows.push({
            workload: `  query after the prune: ${r.name}`,
            value: ok.run.latency.p50,
            unit: 'ms',
            baseline: before,
            baselineName: 'p50 before the prune',
            ratio: before && ok.run.latency.p50 / before,
            p50: ok.run.latency.p50,
            p99: ok.run.latency.p99,
          });
        }
      }
    });
    peak = Math.max(peak, memory(server.pid).peak);
    if (backend === 'postgres') {
      result.disk = await postgresDisk(postgresUrl!);
      if (args.profile) result.statementStats = await statementStats(postgresUrl!);
    }
  } catch (err) {
    fail(`${backend}`, err);
    process.stderr.write(`server output:\n${server.tail()}\n`);
  } finally {
    clearInterval(sampler);
    result.peakRss = peak;
    await server.stop();
  }
  if (backend === 'sqlite') {
    try {
      result.disk = await sqliteDisk(sqlitePath!);
    } catch (err) {
      fail('sqlite disk', err);
    }
    if (KEEP || REUSE) log(`${backend}: database kept in ${sqlitePath}`);
  }
  rmSync(dir, { recursive: true, force: true });
  return result;
}

// ----- main ---------------------------------------------------------------------------------

async function main(): Promise<number> {
  const started = Date.now();
  const m: Machine = { ...machine(), sqlite: (new DatabaseSync(':memory:').prepare('SELECT sqlite_version() AS v').get() as { v: string }).v };
  const root = mkdtempSync(join(tmpdir(), 'lectern-bench-'));
  const stamp = new Date(started).toISOString().replace(/[:.]/g, '-');
  const out = args.out ?? join(process.cwd(), 'bench', 'results', `bench-${stamp}${QUICK ? '-quick' : ''}.json`);
  const plansFile = `${out.replace(/\.json$/, '')}.plans.md`;
  let cluster: PgCluster | undefined;
  const results: BackendResult[] = [];
  let b: Baselines = {};
  /** Written after each backend too, so a run stopped half-way keeps what it measured. */
  const save = (partial?: BackendResult) => {
    const all = partial ? [...results, partial] : results;
    mkdirSync(dirname(out), { recursive: true });
    const plans = all.flatMap((r) => Object.entries(r.plans).map(([size, p]) => plansMarkdown(`${r.backend}, ${int(Number(size))} statements`, p)));
    if (plans.length) writeFileSync(plansFile, plans.join('\n'));
    const rows = Object.fromEntries(all.map((r) => [r.backend, writeRows(b, r, SHAPE)]));
    const doc = {
      started: new Date(started).toISOString(),
      quick: QUICK,
      seed: SEED,
      sizes: SIZES,
      querySeconds: QUERY_SECONDS,
      machine: { ...m, loadavgNow: machine().loadavg },
      baselines: b,
      results: all,
      rows,
      errors,
    };
    writeFileSync(out, JSON.stringify(doc, null, 1));
    return plans.length > 0;
  };
  log(`Lectern benchmark${QUICK ? ' (quick)' : ''}: ${BACKEND_LIST.join(' + ')}, sizes ${SIZES.map(int).join(', ')}, seed ${SEED}`);
  log(`machine: ${m.nproc} × ${m.cpu}, ${m.memoryGiB} GiB, Node ${m.node}, load ${m.loadavg}; avg statement ${Math.round(averageSize(SEED, 0, 2000))} bytes`);
  try {
    if (BACKEND_LIST.includes('postgres')) {
      try {
        if (REUSE) {
          cluster = await openCluster(clusterDirIn(REUSE));
          log(`postgres: reusing the cluster in ${cluster.dir}`);
        } else {
          cluster = await startPostgres({ statementStats: args.profile !== undefined, at: KEEP && join(resolve(KEEP), 'postgres') });
        }
        const [v] = await pgQuery<{ v: string }>(cluster.url, 'SHOW server_version');
        m.postgres = v.v;
      } catch (err) {
        fail('PostgreSQL cluster', err);
      }
    }
    b = await baselines(root, cluster);
    for (const backend of BACKEND_LIST) {
      if (backend === 'postgres' && !cluster) continue;
      try {
        results.push(await benchBackend(backend, root, cluster, (partial) => save(partial)));
      } catch (err) {
        fail(backend, err);
      }
      save();
    }
  } finally {
    if (cluster && (KEEP || REUSE)) {
      // Kept: without the COPY baseline's database, stopped cleanly (a checkpoint), reopened by --reuse.
      await pgQuery(cluster.url, 'DROP DATABASE IF EXISTS bench_raw').catch((err: unknown) => fail('dropping bench_raw', err));
      await cluster.stop().catch((err: unknown) => fail('stopping the kept cluster', err));
      log(`postgres: cluster kept (stopped) in ${cluster.dir}`);
    }
    cluster?.destroy();
    rmSync(root, { recursive: true, force: true });
  }
  const header = [
    `# Lectern benchmark ${new Date(started).toISOString()}${QUICK ? ' (--quick)' : ''}`,
    `machine: ${m.nproc} × ${m.cpu}, ${m.memoryGiB} GiB, kernel ${m.kernel}; Node ${m.node}; SQLite ${m.sqlite}${m.postgres ? `; PostgreSQL ${m.postgres}` : ''}`,
    `load average at start ${m.loadavg}, at end ${machine().loadavg}; ${Math.round((Date.now() - started) / 1000)} s; seed ${SEED}; sizes ${SIZES.map(int).join(', ')}`,
    b.sqlite
      ? `raw SQLite limit (same JSON, one table, WAL, synchronous=FULL): ${int(b.sqlite.perTx100.rowsPerSec)} rows/s at 100 rows per transaction, ${int(b.sqlite.perTx10k.rowsPerSec)} at 10,000`
      : '',
    b.postgres ? `PostgreSQL limit (COPY of the same JSON into one table, 10,000 rows per transaction): ${int(b.postgres.rowsPerSec)} rows/s` : '',
    b.http
      ? `HTTP limit (bare node:http, parse + 204): batch ${int(b.http.batch?.statementsPerSec)} statements/s, POST ${int(b.http.post?.run?.rps)} req/s, PUT ${int(b.http.put?.run?.rps)} req/s, GET page ${int(b.http.get?.run?.rps)} req/s, documents ${int(b.http.documents?.run?.rps)} req/s`
      : '',
  ].filter(Boolean);
  process.stdout.write(`${header.join('\n')}\n${report(b, results, SHAPE)}\n`);
  for (const r of results.filter((x) => x.statementStats)) {
    process.stdout.write(`\n## ${r.backend}: server time by statement (pg_stat_statements)\n\n`);
    process.stdout.write(
      `${table(
        ['total ms', 'calls', 'mean ms', 'plan ms/call', 'plans', 'rows', 'query'],
        r.statementStats!.map((x) => [int(x.totalMs), int(x.calls), x.meanMs.toFixed(2), x.planMs.toFixed(2), int(x.plans), int(x.rows), x.query.slice(0, 110)]),
      )}\n`,
    );
  }
  if (errors.length) process.stdout.write(`\nFAILED (${errors.length}):\n${errors.map((e) => `- ${e}`).join('\n')}\n`);
  const hasPlans = save();
  process.stdout.write(`\nresults: ${out}${hasPlans ? `\nplans: ${plansFile}` : ''}\n`);
  return errors.length ? 1 : 0;
}

process.exitCode = await main();
