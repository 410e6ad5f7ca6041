/**
 * Where a statement page's CPU goes on PostgreSQL: Lectern (`lectern runserver`, default
 * settings) serves each named bench filter's first page to 8 clients (autocannon in this process,
 * 1 s of warm-up, 5 s measured), and this prints req/s beside the CPU time per request of the
 * server process and of the PostgreSQL backends (user + system, from /proc; Linux only).
 *
 *   node bench/page-cpu.ts postgres://postgres@127.0.0.1:5432/lectern plain 'verb (34 %)'
 *
 * The database is one Lectern loaded with the bench's generator (bench/generate.ts, seed
 * 20261123), e.g. by a run of `npm run bench` against a server you keep, and settled (analyzed).
 */
import { execSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { queryFilters } from './generate.ts';
import { AUTHORIZATION, startLectern } from './harness.ts';

const [url, ...names] = process.argv.slice(2);
if (!url || names.length === 0) {
  process.stderr.write('usage: node bench/page-cpu.ts POSTGRES_URL FILTER…  (filter names of bench/generate.ts queryFilters, or plain)\n');
  process.exit(2);
}

/** CPU milliseconds (user + system) a process has used. */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * (1000 / 100);
}

/** CPU milliseconds of every PostgreSQL backend serving a client (not the postmaster's helpers). */
function postgresCpuMs(): number {
  let total = 0;
  const pids = execSync("pgrep -f 'postgres: [^ ]+ [^ ]+ ([[]local[]]|[^ ]+[(][0-9]+[)])' || true").toString().trim().split('\n').filter(Boolean);
  for (const pid of pids) {
    try {
      total += cpuMs(Number(pid));
    } catch {
      // ended meanwhile
    }
  }
  return total;
}

const filters = queryFilters(20261123);
const server = await startLectern({ backend: 'postgres', dir: mkdtempSync(join(tmpdir(), 'lectern-page-cpu-')), postgresUrl: url });
try {
  for (const name of names) {
    const params = new URLSearchParams({ ...(filters[name] ?? {}), limit: '100' });
    const options = { url: `${server.url}/xAPI/statements?${params}`, connections: 8, headers: { authorization: AUTHORIZATION, 'x-experience-api-version': '1.0.3' } };
    await autocannon({ ...options, duration: 1 });
    const node0 = cpuMs(server.pid);
    const pg0 = postgresCpuMs();
    const r = await autocannon({ ...options, duration: 5 });
    const n = r.requests.total;
    const perRequest = (ms: number) => ((ms * 1000) / n).toFixed(0);
    process.stdout.write(
      `${name.padEnd(42)} ${String(Math.round(r.requests.average)).padStart(6)} req/s  p50 ${r.latency.p50} ms  Lectern ${perRequest(cpuMs(server.pid) - node0)} µs/request  PostgreSQL ${perRequest(postgresCpuMs() - pg0)} µs/request${r.non2xx ? `  (${r.non2xx} non-2xx)` : ''}\n`,
    );
  }
} finally {
  await server.stop();
}
