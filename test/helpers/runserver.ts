/**
 * `lectern runserver` as a child process, as an operator runs it: the one way the tests start the
 * real server, wait until it serves, read its output and stop it. Its environment is the test's
 * own (`env`, beside PATH), never this process's: a setting of the test runner cannot leak in.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Backend } from './lrs.ts';

/** The built CLI (`npm run build`). */
export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/**
 * What tells that the server serves: `url`, its listening line (the URL of the first process
 * that logs one); `workers`, the primary's line, which comes once every worker listens; `ready`,
 * its IPC message (whatever the log level: opens an IPC channel, which a shell does not); or a
 * pattern of its output (stdout and stderr), the URL in its first group if it has one.
 */
export type Until = 'url' | 'workers' | 'ready' | RegExp;

export interface RunserverOptions {
  /** The server's environment beside PATH (which `env` may replace). */
  env?: Record<string, string>;
  /** Arguments after `runserver`. */
  args?: string[];
  /** A fresh database of this backend, its settings before `env`; dropped by `stop()`. */
  backend?: Backend;
  /** Its working directory; without one, a temporary folder of its own, removed by `stop()`. */
  cwd?: string;
  until?: Until;
  /**
   * The command line to run from `lectern runserver …` (this Node on the built CLI): an installed
   * `lectern`, or the same under a wrapper (prlimit, unshare) that executes it in place.
   */
  command?: (argv: string[]) => string[];
  /** A process group of its own, signalled as systemd signals a unit: every process of it. */
  group?: boolean;
  /** Not serving by then: killed, and the start fails with its output. A guard against a hang, not a measurement. */
  timeoutMs?: number;
}

export interface Runserver {
  /** Its base URL (`''` when `until` is a pattern without a group). */
  url: string;
  /** What `until` matched. */
  match: RegExpExecArray | undefined;
  child: ChildProcess;
  /** The environment it was given (the backend's settings and `env`), to start another on the same database. */
  env: Record<string, string>;
  /** Its stdout and stderr as they came, together; and each alone. */
  output(): string;
  stdout(): string;
  stderr(): string;
  /** Its exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  /** A signal to it (or its group), without waiting. */
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM (or `signal`), its exit awaited, then its database and folder removed; once, whatever the number of calls. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const PATTERNS = {
  url: /"url":"(http:[^"]+)"/,
  workers: /"url":"(http:[^"]+)","backend":"\w+","workers":\d+/,
};

/** Servers still running when this process exits are killed: none outlives its test file. */
const running = new Set<() => void>();
process.once('exit', () => {
  for (const kill of running) kill();
});

/** Starts `lectern runserver` and resolves once it serves; rejects with its output if it exits or hangs first. */
export async function spawnRunserver(opts: RunserverOptions = {}): Promise<Runserver> {
  if (!opts.command && !existsSync(CLI)) throw new Error('build first: npm run build');
  const own = opts.cwd ? undefined : mkdtempSync(join(tmpdir(), 'lectern-runserver-'));
  const cwd = opts.cwd ?? own!;
  const settings = (await opts.backend?.settings(cwd)) ?? {};
  const env = { ...settings, ...opts.env };
  const until = opts.until ?? 'url';
  const argv = [process.execPath, CLI, 'runserver', ...(opts.args ?? [])];
  const [program, ...rest] = opts.command?.(argv) ?? argv;
  const child = spawn(program, rest, {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe', ...(until === 'ready' ? (['ipc'] as const) : [])],
    detached: opts.group,
  });
  const signal = (sig: NodeJS.Signals) => {
    try {
      if (opts.group) process.kill(-child.pid!, sig);
      else child.kill(sig);
    } catch {
      // already gone
    }
  };
  const kill = () => signal('SIGKILL');
  running.add(kill);
  let out = '';
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => ((stdout += d.toString()), (out += d.toString())));
  child.stderr!.on('data', (d: Buffer) => ((stderr += d.toString()), (out += d.toString())));
  // Its code once its output is read to the end ('close'), unless a process it left holds the pipes.
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      running.delete(kill);
      const guard = setTimeout(() => resolve(code), 5_000);
      child.once('close', () => (clearTimeout(guard), resolve(code)));
    }),
  );

  let stopping: Promise<number | null> | undefined;
  const stop = (sig: NodeJS.Signals = 'SIGTERM') =>
    (stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) signal(sig);
      const code = await exited;
      await opts.backend?.dispose?.(settings);
      if (own) rmSync(own, { recursive: true, force: true });
      return code;
    })());

  let match: RegExpExecArray | undefined;
  try {
    const url = await ready(child, until, () => (until === 'url' || until === 'workers' ? stdout : out), exited, opts.timeoutMs ?? 60_000);
    match = url.match;
    return { url: url.url, match, child, env, output: () => out, stdout: () => stdout, stderr: () => stderr, exited, signal, stop };
  } catch (err) {
    kill();
    await stop();
    throw new Error(`${(err as Error).message}: ${out}`);
  }
}

/** Waits for `until` in the output (or the IPC message): its URL, or why it never came. */
function ready(
  child: ChildProcess,
  until: Until,
  text: () => string,
  exited: Promise<number | null>,
  timeoutMs: number,
): Promise<{ url: string; match: RegExpExecArray | undefined }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`runserver did not serve within ${timeoutMs / 1000} s`)), timeoutMs);
    const done = (v: { url: string; match: RegExpExecArray | undefined }) => (clearTimeout(timer), resolve(v));
    void exited.then((code) => (clearTimeout(timer), reject(new Error(`runserver exited ${code} before it served`))));
    if (until === 'ready') {
      child.on('message', (m: { type?: string; url?: string }) => m.type === 'ready' && done({ url: m.url ?? '', match: undefined }));
      return;
    }
    const pattern = typeof until === 'string' ? PATTERNS[until] : until;
    const check = () => {
      const m = pattern.exec(text());
      if (m) done({ url: m[1] ?? '', match: m });
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
  });
}
