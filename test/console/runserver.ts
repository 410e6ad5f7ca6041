/** `lectern runserver` (the built CLI) on a fresh database, for the console's tests. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADMIN, basic, credentialEntries, type Backend, type TestUser } from '../helpers/lrs.ts';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

export interface Server {
  url: string;
  /** An xAPI request as the test's admin user. */
  xapi(path: string, init?: RequestInit): Promise<Response>;
  post(body: unknown): Promise<string[]>;
  stop(): Promise<void>;
}

/** `lectern runserver` on a fresh database of `backend`, with the test users (ADMIN, and `users`). */
export async function runserver(backend: Backend, env: Record<string, string> = {}, port = 0, args: string[] = [], users: TestUser[] = []): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-console-'));
  writeFileSync(join(dir, 'auth.json'), JSON.stringify(await credentialEntries([ADMIN, ...users])));
  const settings = await backend.settings(dir);
  const child = spawn(process.execPath, [CLI, 'runserver', '--port', String(port), ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', LECTERN_AUTH_FILE: join(dir, 'auth.json'), LECTERN_SHUTDOWN_TIMEOUT: '2', ...settings, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      // With workers, the primary's line: it comes once every worker listens.
      const m = (args.includes('--workers') ? /"url":"(http:[^"]+)","backend":"\w+","workers":\d+/ : /"url":"(http:[^"]+)"/).exec(out);
      if (m) resolve(m[1]);
    });
    void exited.then((code) => reject(new Error(`runserver exited ${code}: ${out}`)));
  });
  return {
    url,
    xapi: (path, init = {}) =>
      fetch(`${url}${path}`, { ...init, headers: { authorization: basic(ADMIN), 'x-experience-api-version': '1.0.3', ...(init.headers as Record<string, string> | undefined) } }),
    async post(body) {
      const res = await fetch(`${url}/xAPI/statements`, {
        method: 'POST',
        headers: { authorization: basic(ADMIN), 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as string[];
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
      await backend.dispose?.(settings);
    },
  };
}

