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
 * machine: a young generation of two 32 MB semi-spaces, filled before each scavenge, and a glibc
 * malloc arena per busy thread. Measured under the benchmark's load (docs/benchmarks.md, "Memory"),
 * 16 MB semi-spaces and two arenas cut the server's peak RSS by ≈ 40–60 MB at the same speed.
 * Both are read once at process start, so the command re-executes itself in place (execve: same
 * pid, same stdio, signals reach it as before) with them. A `--max-semi-space-size` of the user's
 * (in NODE_OPTIONS or on the node command line) or their own MALLOC_ARENA_MAX wins; without
 * process.execve (Windows, Node < 22.15) the server simply runs with Node's defaults.
 */
const SERVER_NODE_FLAGS = ['--max-semi-space-size=16'];
if (
  process.argv[2] === 'runserver' &&
  typeof process.execve === 'function' &&
  !(process.execArgv.join(' ') + ' ' + (process.env.NODE_OPTIONS || '')).includes('--max-semi-space-size')
) {
  try {
    process.execve(process.execPath, [process.execPath, ...SERVER_NODE_FLAGS, ...process.execArgv, ...process.argv.slice(1)], {
      MALLOC_ARENA_MAX: '2',
      ...process.env,
    });
  } catch {
    // Not replaceable here: run with Node's defaults.
  }
}
import('./program.ts');
