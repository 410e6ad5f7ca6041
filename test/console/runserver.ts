/** `lectern runserver` (the built CLI) on a fresh database, for the console's tests. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN, basic, credentialEntries, type Backend, type TestUser } from '../helpers/lrs.ts';
import { spawnRunserver } from '../helpers/runserver.ts';

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
  const server = await spawnRunserver({
    backend,
    cwd: dir,
    args: ['--port', String(port), ...args],
    env: { LECTERN_AUTH_FILE: join(dir, 'auth.json'), LECTERN_SHUTDOWN_TIMEOUT: '2', ...env },
    // With workers, the primary's line: it comes once every worker listens.
    until: args.includes('--workers') ? 'workers' : 'url',
  });
  const { url } = server;
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
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
