#!/usr/bin/env node
/**
 * The `lectern` entry point (package.json `bin`). Deliberately plain: it must parse and run on any
 * Node ≥ 20, so nothing else is imported before the version check. Lectern itself needs Node
 * 22.13 (node:sqlite unflagged); on an older Node (a system Node 20) it runs the CLI under the
 * Node 24 that the npm `node` package (a dependency) brings, forwarding signals and the exit code.
 * Only when that Node is missing too does it say, in one line, what to do.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const NEEDS = [22, 13];
const have = process.versions.node.split('.').map(Number);
const older = have[0] < NEEDS[0] || (have[0] === NEEDS[0] && have[1] < NEEDS[1]);

/** The `node` package's binary, if installed beside Lectern and not the Node running now. */
function bundledNode(): string | undefined {
  try {
    const manifest = createRequire(import.meta.url).resolve('node/package.json');
    const bin = JSON.parse(readFileSync(manifest, 'utf8')).bin;
    const path = join(dirname(manifest), typeof bin === 'string' ? bin : bin.node);
    if (existsSync(path) && realpathSync(path) !== realpathSync(process.execPath)) return path;
  } catch {
    // not installed (or its install script did not run)
  }
  return undefined;
}

/** Whether this process is in the foreground process group of its terminal, where a Ctrl-C lands. */
function inTerminalForeground(): boolean {
  try {
    // After the command name (in parentheses): state ppid pgrp session tty_nr tpgid (-1: no terminal).
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[2] === fields[5];
  } catch {
    // Not Linux: ps says the same.
    const r = spawnSync('ps', ['-o', 'pgid=,tpgid=', '-p', String(process.pid)], { encoding: 'utf8' });
    const [pgid, tpgid] = (r.stdout ?? '').trim().split(/\s+/);
    return !!pgid && pgid === tpgid;
  }
}

if (older) {
  const node = bundledNode();
  if (!node) {
    process.stderr.write(
      `lectern: error: Lectern needs Node.js >=${NEEDS.join('.')}, this is ${process.version} (${process.execPath}), and the Node 24 of the npm \`node\` package is not installed: ` +
        'in the Lectern folder run `npm ci`, or reinstall Lectern with install scripts enabled (the script of the `node` package downloads Node 24), ' +
        'or install a newer Node, e.g. `npm install -g node@24`\n',
    );
    process.exit(2);
  }
  const child = spawn(node, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
  // Stop signals are passed on, but for a terminal's Ctrl-C: the terminal sends that SIGINT to its
  // whole foreground process group, the child included, and a second one would make a command quit
  // at once instead of stopping cleanly (an import after its batch). Node does not say who sent a
  // signal, so a SIGINT that finds this process in its terminal's foreground group is taken to be
  // that one; any other (kill PID, no terminal, a background job) is passed on. A repeated SIGTERM
  // (systemd signals every process of the unit) is one stop to runserver.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (signal !== 'SIGINT' || !inTerminalForeground()) child.kill(signal);
    });
  }
  child.on('error', (err) => {
    process.stderr.write(`lectern: error: cannot run ${node}: ${err.message}\n`);
    process.exit(2);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  });
} else {
  import('./program.ts');
}
