#!/usr/bin/env node
/**
 * The `lectern` entry point. Deliberately plain: it must parse and run on any Node, so that on
 * one older than package.json's `engines` it says in one line which Node it needs and how to get
 * it, instead of a stack trace from a module that needs a newer Node. Nothing else is imported
 * before that check.
 */
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
const wanted = /(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(String(pkg.engines && pkg.engines.node) || '') || ['', '0'];
const have = process.versions.node.split('.');
let older = false;
for (let i = 1; i <= 3; i++) {
  const a = Number(have[i - 1] || 0);
  const b = Number(wanted[i] || 0);
  if (a !== b) {
    older = a < b;
    break;
  }
}
if (older) {
  process.stderr.write(
    'lectern: error: Lectern needs Node.js ' + pkg.engines.node + ', this is ' + process.version + ' (' + process.execPath + '): ' +
      'in the Lectern folder run `npm ci` then `npm run lectern -- <command>` (npm brings Node 24 from the `node` package), ' +
      'or install a newer Node, e.g. `npm install -g node@24`\n',
  );
  process.exit(2);
}
/**
 * `lectern runserver` is long-lived, and Node's defaults size memory for throughput on a big
 * machine: a young generation of two semi-spaces of up to 64 MB each (V8 without pointer
 * compression), filled before each scavenge; an old generation let grow to up to 4 × what
 * survived the last full collection; a glibc malloc arena per busy thread. Measured under the
 * benchmark's load (docs/benchmarks.md, "Memory"), 16 MB semi-spaces, an old generation let grow
 * by half of what survives, and two arenas cut the server's peak RSS by 40–55 % at the same speed
 * (≈ 3 % more of the main thread's time in GC pauses; growing to twice, 20 MB more). With an
 * old generation that small, V8's rule for starting a full collection (when the old generation's
 * headroom is less than the young generation) fired every ≈ 40 ms under PostgreSQL statement
 * pages: a quarter of the server's CPU. Started at half the old generation's limit instead, a
 * third as many: those pages +15–30 % req/s for ≈ 5 MB of peak RSS (at 80 %, ≈ 10 MB and no
 * faster; docs/benchmarks.md, session 10). They are read at process start only, so the command
 * re-executes itself in place (execve: same pid, same stdio, signals reach it as before) with
 * them. glibc's threshold for giving a large block its own mapping is fixed at 1 MB: by default
 * it rises to the largest such block freed (up to 32 MB), and the big blocks that then come from
 * the heap leave it fragmented (native memory after the benchmark's writes with the SQLite writer
 * thread: 53–93 MB, fixed 16–27 MB). At 128 KB a 130 KB statement page would cost an mmap and
 * its page faults each time (≈ 75 µs more per page, measured); at 1 MB it comes from the heap.
 * A flag the user gives (in NODE_OPTIONS or on the node command line) or their own MALLOC_*
 * setting wins. It runs with Node's defaults where it cannot re-execute: without
 * process.execve (Windows, Node < 22.15), and when a parent talks to it over an IPC channel,
 * which execve would close (cluster workers inherit the primary's flags).
 */
const given = process.execArgv.join(' ') + ' ' + (process.env.NODE_OPTIONS || '');
const FLAGS = ['--max-semi-space-size', '--heap-growing-percent', '--incremental-marking-soft-trigger'];
if (process.argv[2] === 'runserver' && FLAGS.some((f) => !given.includes(f)) && typeof process.execve === 'function' && !process.channel) {
  const threads = await writerThread(process.argv.slice(3));
  const values = [threads ? 8 : 16, 50, 50];
  const missing = FLAGS.flatMap((f, i) => (given.includes(f) ? [] : [`${f}=${values[i]}`]));
  try {
    const malloc = { MALLOC_ARENA_MAX: threads ? '1' : '2', MALLOC_MMAP_THRESHOLD_: '1048576' };
    process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], { ...malloc, ...process.env });
  } catch {
    // Not replaceable here: run with Node's defaults.
  }
}

/**
 * Whether runserver will write SQLite on a thread of its own (LECTERN_SQLITE_WRITER_THREAD). V8
 * flags apply to every thread, so each of the two isolates gets a young generation of the flag's
 * size. 8 MB semi-spaces and one malloc arena for both threads (with two, the writer's arena held
 * 30–40 MB more after the benchmark's writes) keep the process's peak within ≈ 10 MB of one event
 * loop with 16 MB and two arenas under steady ingest, and faster than it in every workload up to
 * a few hundred thousand statements; 4 MB gave up that speed for no memory measurably saved
 * (docs/benchmarks.md, session 12). Settings
 * that do not load are reported by runserver itself.
 */
async function writerThread(args: string[]): Promise<boolean> {
  try {
    const { loadConfig, sqliteWriterThread } = await import('../config.ts');
    const at = args.findIndex((a) => a === '-b' || a === '--backend' || a.startsWith('--backend='));
    const backend = at < 0 ? undefined : args[at].startsWith('--backend=') ? args[at].slice('--backend='.length) : args[at + 1];
    return sqliteWriterThread(loadConfig(undefined, backend === undefined ? {} : { backend: { value: backend, source: '--backend' } }));
  } catch {
    return false;
  }
}

import('./program.ts');
