/**
 * The `lectern` entry on the machine's own Node, /usr/bin/node (a Node 20 here: older than Lectern
 * needs, so the entry runs the command under the npm `node` package's Node 24, a child process).
 * A stop signal sent to the PID that was started reaches the command, which stops as it would
 * alone, and the entry ends as the command did: with its exit code, or killed by the same signal.
 * A terminal's Ctrl-C, which the terminal sends to both processes, reaches the command once.
 */
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const SYSTEM_NODE = '/usr/bin/node';
let dir: string;
let older: boolean;
/** Process groups started here: whatever a failed test leaves running is killed at the end. */
const groups: number[] = [];

before(() => {
  assert.ok(existsSync(CLI), 'build first: npm run build');
  assert.ok(existsSync(SYSTEM_NODE), 'the machine has no system node in /usr/bin');
  const [major, minor] = execFileSync(SYSTEM_NODE, ['--version'], { encoding: 'utf8' }).trim().slice(1).split('.').map(Number);
  older = major! < 22 || (major === 22 && minor! < 13);
  dir = mkdtempSync(join(tmpdir(), 'lectern-entry-'));
});
after(() => {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Rejects when `promise` has not settled after `ms`: a signal that goes nowhere fails the test instead of hanging it. */
function within<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(what())), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** `lectern runserver` on the system Node, in a process group of its own (nothing else gets the signals sent to it). */
async function runserver(name: string): Promise<{ child: ChildProcessWithoutNullStreams; output: () => string; exited: Promise<Exit> }> {
  const child = spawn(SYSTEM_NODE, [CLI, 'runserver', '-p', '0'], {
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', HOME: dir, LECTERN_SQLITE_PATH: join(dir, `${name}.sqlite`), LECTERN_AUTH_FILE: join(dir, 'none.json') },
    stdio: 'pipe',
    detached: true,
  });
  groups.push(child.pid!);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<Exit>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const url = await within(
    new Promise<string>((resolve, reject) => {
      child.stdout.on('data', () => {
        const m = /"url":"(http:[^"]+)"/.exec(out);
        if (m) resolve(m[1]!);
      });
      exited.then((e) => reject(new Error(`runserver exited (${e.code ?? e.signal}): ${out}`)));
    }),
    60_000,
    () => `runserver did not start: ${out}`,
  );
  assert.equal((await fetch(`${url}/lbheartbeat`)).status, 200);
  return { child, output: () => out, exited };
}

/** The pid of the process that wrote the log lines: the server's own. */
const serverPid = (out: string) => Number(/"pid":(\d+)/.exec(out)?.[1]);

describe('the entry on the system Node passes stop signals on to the command', () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    test(`kill -${signal.slice(3)} PID: the server stops gracefully, once; the entry exits with its code, 0`, async () => {
      const s = await runserver(signal);
      if (older) assert.notEqual(serverPid(s.output()), s.child.pid, 'the entry runs the server in a child process');
      process.kill(s.child.pid!, signal);
      const exit = await within(s.exited, 60_000, () => `${signal} to the entry did not stop the server: ${s.output()}`);
      assert.deepEqual(exit, { code: 0, signal: null }, s.output());
      assert.match(s.output(), new RegExp(`"signal":"${signal}","msg":"shutting down: finishing in-flight requests"`));
      assert.match(s.output(), /"msg":"stopped"/);
      assert.doesNotMatch(s.output(), /stopping now/);
    });
  }

  test('kill -HUP PID: the server, which does not handle it, dies of it, and so does the entry', async () => {
    const s = await runserver('SIGHUP');
    process.kill(s.child.pid!, 'SIGHUP');
    const exit = await within(s.exited, 60_000, () => `SIGHUP to the entry did not end the server: ${s.output()}`);
    assert.deepEqual(exit, { code: null, signal: 'SIGHUP' }, s.output());
  });

  test("a terminal's Ctrl-C reaches the command once: an import stops after the batch in hand and says how to resume", async () => {
    const file = join(dir, 'statements.ndjson');
    const lines = Array.from({ length: 20_000 }, (_, i) =>
      JSON.stringify({
        id: randomUUID(),
        actor: { mbox: `mailto:a${i % 50}@example.com` },
        verb: { id: 'http://adlnet.gov/expapi/verbs/attempted' },
        object: { id: `http://example.com/ctrl-c/${i}` },
      }),
    );
    writeFileSync(file, `${lines.join('\n')}\n`);
    // `script` runs the command on a pseudo-terminal, in its foreground process group; the ^C typed
    // into it makes the terminal send SIGINT to that group: the entry and the command both.
    const command = [SYSTEM_NODE, CLI, 'import', file, '--batch-size', '100', '--progress-interval', '0'].map((a) => JSON.stringify(a)).join(' ');
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      cwd: dir,
      env: { PATH: '/usr/bin:/bin', HOME: dir, TERM: 'dumb', LECTERN_SQLITE_PATH: join(dir, 'import.sqlite') },
      stdio: 'pipe',
      detached: true,
    });
    groups.push(child.pid!);
    let out = '';
    let typed = false;
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (typed || !/import: [\d,]+ statements/.test(out)) return;
      typed = true;
      child.stdin.write('\x03');
    });
    const exit = await within(new Promise<Exit>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))), 60_000, () => `the import did not stop: ${out}`);
    assert.match(out, /stopping after the current batch/);
    assert.match(out, /To resume: lectern import .* --skip \d+/);
    assert.deepEqual(exit, { code: 130, signal: null }, out);
  });
});
