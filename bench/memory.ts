/**
 * Where the server's memory goes under the benchmark's batch ingest (100 statements per POST,
 * 4 clients): Lectern runs with bench/memwatch.js preloaded, which samples process.memoryUsage(),
 * V8's spaces and /proc/self/status; this prints, per chunk loaded, the sample at the highest RSS
 * (RSS = V8 heap + external/array buffers + native: SQLite, pg, malloc's free lists) and the
 * figures of the bare node:http handler under the same batches for comparison.
 *
 *   npm run build && node bench/memory.ts --backend sqlite --size 30000
 *   node bench/memory.ts --size 100000 --chunk 50000 --batch 500 --clients 16 --phases ingest   # the bench's fill
 *   node bench/memory.ts --backend postgres --size 120000 --chunk 20000 --heapsnapshot /tmp/snap
 *   node bench/memory.ts --backend sqlite --size 30000 --node-flags=--max-semi-space-size=1 --env MALLOC_ARENA_MAX=2
 *
 * --heapsnapshot DIR: a V8 heap snapshot of the server at the end of the load (SIGUSR2), to open
 * in Chrome DevTools. Writes nothing else; keep sizes small on a shared machine.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { PgCluster } from '../scripts/postgres-cluster.ts';
import { queryFilters } from './generate.ts';
import type { Job } from './load.ts';
import { type BackendName, machine, pgQuery, runLoad, type Server, startBareHttp, startLectern, startPostgres } from './harness.ts';

const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'sqlite' },
    size: { type: 'string', default: '30000' },
    chunk: { type: 'string', default: '10000' },
    seed: { type: 'string', default: '20261123' },
    'node-flags': { type: 'string', multiple: true, default: [] },
    env: { type: 'string', multiple: true, default: [] },
    heapsnapshot: { type: 'string' },
    bare: { type: 'boolean', default: false },
    phases: { type: 'string', default: 'ingest,singles,documents,queries' },
    // The ingest's statements per POST and clients: the issue's 100 × 4, or the bench's fill (500 × 16).
    batch: { type: 'string', default: '100' },
    clients: { type: 'string', default: '4' },
  },
});
const PHASES = new Set(args.phases!.split(','));

const WATCH = fileURLToPath(new URL('./memwatch.js', import.meta.url));
const SEED = Number(args.seed);
const SIZE = Number(args.size);
const CHUNK = Number(args.chunk);
const backend = args.backend as BackendName;
const env = Object.fromEntries(args.env!.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
const log = (s: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${s}\n`);

interface Sample {
  t: number;
  rss: number;
  hwm: number;
  anon: number;
  fileBacked: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  spaces: Record<string, number>;
  gcMs: number;
  gcCount: number;
  gcMajorMs: number;
  gcMajor: number;
  /** MB of V8 heap the worker threads hold (0 without any). */
  threads: number;
}

/** A worker thread's line: its V8 heap. */
interface ThreadSample {
  t: number;
  thread: number;
  heapTotal: number;
}

/** The main thread's samples, each with `threads`: the V8 heaps of the worker threads at that time (their latest lines). */
function samples(file: string): Sample[] {
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Sample | ThreadSample);
  const heaps = new Map<number, number>();
  const out: Sample[] = [];
  for (const l of lines) {
    if ('thread' in l) heaps.set(l.thread, l.heapTotal);
    else out.push({ ...l, threads: [...heaps.values()].reduce((a, b) => a + b, 0) });
  }
  return out;
}

const row = (what: string, s: Sample | undefined, gc = '') =>
  s
    ? `| ${what} | ${gc} | ${s.rss.toFixed(0)} | ${s.hwm.toFixed(0)} | ${s.anon.toFixed(0)} | ${s.fileBacked.toFixed(0)} | ${s.heapTotal.toFixed(0)} | ${s.heapUsed.toFixed(0)} | ${s.threads.toFixed(0)} | ${s.external.toFixed(0)} | ${s.arrayBuffers.toFixed(0)} | ${(s.anon - s.heapTotal - s.threads - s.external).toFixed(0)} | ${Object.entries(
        s.spaces,
      )
        .filter(([, v]) => v >= 1)
        .map(([k, v]) => `${k} ${v.toFixed(0)}`)
        .join(', ')} |`
    : `| ${what} | no sample |`;

const HEADER = [
  "| at | GC pauses ms (count); of them mark-compact | RSS MB | peak (VmHWM) | anon | file | V8 heap total | heap used | worker threads' V8 heaps | external | array buffers | anon − heaps − external | V8 spaces (MB) |",
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
];

async function measure(server: Server, file: string, what: string): Promise<string[]> {
  const out: string[] = [];
  const peakSince = (t0: number) =>
    samples(file)
      .filter((s) => s.t >= t0)
      .reduce<Sample | undefined>((a, s) => (!a || s.rss > a.rss ? s : a), undefined);
  await new Promise((r) => setTimeout(r, 600));
  const idle = samples(file).at(-1);
  out.push(row(`${what}: idle`, idle));
  const step = async (name: string, jobs: Job[]) => {
    const t0 = Date.now();
    const res = await runLoad(server.url, SEED, jobs);
    for (const r of res) if (r.error || (r.run?.failed ?? 0) > 0) throw new Error(`${r.name} failed: ${r.error ?? JSON.stringify(r.run?.statusCodes)} ${server.tail()}`);
    await new Promise((r) => setTimeout(r, 400));
    const rate = res[0].statementsPerSec ?? res[0].run?.rps ?? 0;
    log(`${what}: ${name}, ${Math.round(rate)}/s`);
    const all = samples(file);
    const first = all.find((x) => x.t >= t0) ?? all[all.length - 1];
    const last = all[all.length - 1];
    const gc = `${last.gcMs - first.gcMs} (${last.gcCount - first.gcCount}); full ${last.gcMajorMs - first.gcMajorMs} (${last.gcMajor - first.gcMajor})`;
    out.push(row(`${what}: peak during ${name} (${Math.round(rate)}/s)`, peakSince(t0), gc));
  };
  for (let loaded = 0; loaded < SIZE && PHASES.has('ingest'); ) {
    const count = Math.min(CHUNK, SIZE - loaded);
    await step(`ingest → ${loaded + count}`, [{ kind: 'batch', name: 'ingest', from: loaded, count, batch: Number(args.batch), connections: Number(args.clients) }]);
    loaded += count;
  }
  // The other workloads of `npm run bench`, as it runs them (32 clients for writes, 8 for queries).
  if (PHASES.has('singles')) {
    await step('single POSTs, 32 clients', [{ kind: 'single', name: 'post', method: 'POST', from: 0, count: 3000, connections: 32 }]);
    await step('single PUTs, 32 clients', [{ kind: 'single', name: 'put', method: 'PUT', from: 3000, count: 3000, connections: 32 }]);
  }
  if (PHASES.has('documents')) await step('documents, 32 clients', [{ kind: 'documents', name: 'documents', count: 3000, keys: 2000, connections: 32 }]);
  if (PHASES.has('queries')) {
    const jobs: Job[] = Object.entries(queryFilters(SEED)).map(([name, params]) => ({
      kind: 'query',
      name,
      path: `/xAPI/statements?${new URLSearchParams({ ...params, limit: '100' }).toString()}`,
      pages: 10,
      connections: 8,
      seconds: 1,
    }));
    await step('queries (every filter, 10 pages deep), 8 clients', jobs);
  }
  out.push(row(`${what}: after the load`, samples(file).at(-1)));
  return out;
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), 'lectern-mem-'));
  let cluster: PgCluster | undefined;
  const lines: string[] = [];
  const m = machine();
  lines.push(
    `memory: ${backend}, ${SIZE} statements in chunks of ${CHUNK}, ${args.batch} per POST by ${args.clients} clients; flags ${args['node-flags']!.join(' ') || '-'}; env ${args.env!.join(' ') || '-'}; load average ${m.loadavg}; Node ${m.node}`,
  );
  try {
    const file = join(root, 'mem.jsonl');
    let server: Server;
    if (args.bare) {
      server = await startBareHttpWatched(file);
    } else {
      const dir = join(root, 'lrs');
      mkdirSync(dir);
      let postgresUrl: string | undefined;
      if (backend === 'postgres') {
        cluster = await startPostgres();
        await pgQuery(cluster.url, 'CREATE DATABASE lectern_mem');
        postgresUrl = cluster.url.replace(/\/postgres$/, '/lectern_mem');
      }
      const flags = ['--import', WATCH, ...args['node-flags']!];
      if (args.heapsnapshot) flags.push('--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${args.heapsnapshot}`);
      server = await startLectern({
        backend,
        dir,
        sqlitePath: backend === 'sqlite' ? join(dir, 'lectern.sqlite') : undefined,
        postgresUrl,
        nodeFlags: flags,
        env: { ...env, BENCH_MEMWATCH_FILE: file },
      });
    }
    try {
      lines.push(...HEADER, ...(await measure(server, file, args.bare ? 'bare handler' : `lectern ${backend}`)));
      if (args.heapsnapshot) {
        mkdirSync(args.heapsnapshot, { recursive: true });
        const before = new Set(readdirSync(args.heapsnapshot));
        server.child.kill('SIGUSR2');
        for (let i = 0; i < 600 && readdirSync(args.heapsnapshot).every((f) => before.has(f) || !f.endsWith('.heapsnapshot')); i++) await new Promise((r) => setTimeout(r, 100));
        await new Promise((r) => setTimeout(r, 3000));
        lines.push(
          `heap snapshot: ${readdirSync(args.heapsnapshot)
            .filter((f) => !before.has(f))
            .join(', ')} in ${args.heapsnapshot}`,
        );
      }
    } finally {
      await server.stop();
    }
  } finally {
    cluster?.destroy();
    rmSync(root, { recursive: true, force: true });
  }
  lines.push(`load average at the end ${machine().loadavg}`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** The bare baseline with the same watcher preloaded. */
const startBareHttpWatched = (file: string): Promise<Server> =>
  startBareHttp(SEED, { nodeFlags: ['--import', WATCH, ...args['node-flags']!], env: { ...env, BENCH_MEMWATCH_FILE: file } });

await main();
