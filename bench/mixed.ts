/**
 * Ingest and queries at once: does a heavy query stall ingest, and ingest the queries? Lectern
 * (SQLite) is loaded to SIZE statements, then batch ingest (100 per POST, 4 clients) runs beside
 * 8 clients querying one filter, each in a load-generator process of its own; then each alone,
 * for comparison. Run it once per setting to compare, e.g.:
 *
 *   npm run build && node bench/mixed.ts --size 100000
 *   LECTERN_SQLITE_READERS=1 node bench/mixed.ts --size 100000
 *   node bench/mixed.ts --size 100000 --filter 'verb + since + until'
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { queryFilters } from './generate.ts';
import type { Job, LoadResult } from './load.ts';
import { machine, memory, runLoad, startLectern } from './harness.ts';

const { values: args } = parseArgs({
  options: {
    size: { type: 'string', default: '100000' },
    filter: { type: 'string', default: 'agent (busy learner)' },
    ingest: { type: 'string', default: '20000' },
    seconds: { type: 'string', default: '6' },
    seed: { type: 'string', default: '20261123' },
  },
});
const SIZE = Number(args.size);
const SEED = Number(args.seed);
const INGEST = Number(args.ingest);
const SECONDS = Number(args.seconds);

const filters = queryFilters(SEED);
const params = filters[args.filter];
if (!params) throw new Error(`no filter "${args.filter}"; one of: ${Object.keys(filters).join(', ')}`);
const path = `/xAPI/statements?${new URLSearchParams(params)}`;

const log = (m: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${m}`);
const fmt = (r: LoadResult | undefined, unit: 'statements' | 'requests') =>
  r?.run
    ? `${Math.round(unit === 'statements' ? (r.statementsPerSec ?? 0) : r.run.rps).toLocaleString('en')} ${unit}/s, p50 ${r.run.latency.p50} ms, p99 ${r.run.latency.p99} ms${r.run.failed ? `, ${r.run.failed} failed` : ''}`
    : 'failed';

const settings =
  Object.entries(process.env)
    .filter(([k]) => k.startsWith('LECTERN_'))
    .map(([k, v]) => `${k}=${v}`)
    .join(' ') || 'defaults';
const m = machine();
log(`mixed load: sqlite, ${SIZE.toLocaleString('en')} statements, filter "${args.filter}", ${settings}; ${m.nproc} × ${m.cpu}, load ${m.loadavg}`);
const dir = mkdtempSync(join(tmpdir(), 'lectern-mixed-'));
const server = await startLectern({ backend: 'sqlite', dir, sqlitePath: join(dir, 'lectern.sqlite') });
try {
  for (let loaded = 0; loaded < SIZE; loaded += 50_000) {
    const count = Math.min(50_000, SIZE - loaded);
    await runLoad(server.url, SEED, [{ kind: 'batch', name: 'fill', from: loaded, count, batch: 500, connections: 16 }]);
  }
  log(`loaded ${SIZE.toLocaleString('en')}`);
  const ingest = (from: number): Job => ({ kind: 'batch', name: 'ingest', from, count: INGEST, batch: 100, connections: 4 });
  const query: Job = { kind: 'query', name: 'query', path, pages: 1, connections: 8, seconds: SECONDS };

  const [queryAlone] = await runLoad(server.url, SEED, [query]);
  const [ingestAlone] = await runLoad(server.url, SEED, [ingest(SIZE)]);
  // Together: the queries run for as long as the ingest takes (the ingest job is sized to last longer).
  const [[ingestBoth], [queryBoth]] = await Promise.all([runLoad(server.url, SEED, [ingest(SIZE + INGEST)]), runLoad(server.url, SEED, [query])]);
  const rss = memory(server.pid).peak;
  console.log(`| ${settings} | alone | ${fmt(ingestAlone, 'statements')} | ${fmt(queryAlone, 'requests')} |`);
  console.log(`| ${settings} | together | ${fmt(ingestBoth, 'statements')} | ${fmt(queryBoth, 'requests')} |`);
  console.log(`peak RSS ${Math.round(rss / 1e6)} MB; load at the end ${machine().loadavg}`);
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
