/**
 * Test harness: a real Lectern server on an ephemeral loopback port, on a real database, with a
 * temporary credentials file. `BACKENDS` lists every backend the contract suite runs against.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcrypt';
import { startLrs, type RunningLrs } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';

export interface TestUser {
  username: string;
  password: string;
  scopes: string[];
  agent: Record<string, unknown>;
  target?: string;
}

export const ADMIN: TestUser = { username: 'admin', password: 'admin-pass', scopes: ['all'], agent: { mbox: 'mailto:admin@example.com' } };
export const OTHER: TestUser = { username: 'other', password: 'other-pass', scopes: ['all'], agent: { mbox: 'mailto:other@example.com' } };
export const TENANT_B: TestUser = { username: 'tenant-b', password: 'b-pass', scopes: ['all'], agent: { mbox: 'mailto:b@example.com' }, target: 'b' };

export async function credentialEntries(users: TestUser[]): Promise<unknown[]> {
  return Promise.all(
    users.map(async (u) => ({
      username: u.username,
      hash: await bcrypt.hash(u.password, 4),
      scopes: u.scopes,
      agent: { objectType: 'Agent', ...u.agent },
      ...(u.target !== undefined && { target: u.target }),
    })),
  );
}

export interface Backend {
  name: string;
  /** Settings that point a server at a fresh, empty database of this backend. */
  settings(dir: string): Promise<Record<string, string>>;
}

export const sqliteBackend: Backend = {
  name: 'sqlite',
  async settings(dir) {
    return { LECTERN_RUNSERVER_BACKEND: 'sqlite', LECTERN_SQLITE_PATH: join(dir, 'lrs.sqlite') };
  },
};

export const BACKENDS: Backend[] = [sqliteBackend];

export interface TestLrs {
  lrs: RunningLrs;
  url: string;
  dir: string;
  config: Config;
  env: Record<string, string>;
  /** fetch with the xAPI version header and the given user's Basic credentials. */
  fetch(path: string, init?: RequestInit & { user?: TestUser | null; version?: string | null }): Promise<Response>;
  /** Restarts on the same database and credentials. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export const basic = (u: TestUser): string => `Basic ${Buffer.from(`${u.username}:${u.password}`).toString('base64')}`;

export async function startTestLrs(
  backend: Backend = sqliteBackend,
  opts: { users?: TestUser[]; env?: Record<string, string> } = {},
): Promise<TestLrs> {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-test-'));
  const authFile = join(dir, 'auth.json');
  writeFileSync(authFile, JSON.stringify(await credentialEntries(opts.users ?? [ADMIN, OTHER, TENANT_B])));
  const env: Record<string, string> = {
    LECTERN_RUNSERVER_PORT: '0',
    LECTERN_AUTH_FILE: authFile,
    LECTERN_LOG_LEVEL: process.env.LECTERN_TEST_LOG_LEVEL ?? 'silent',
    LECTERN_SHUTDOWN_TIMEOUT: '2',
    ...(await backend.settings(dir)),
    ...opts.env,
  };
  const config = loadConfig(env);
  const logger = createLogger(config.logLevel);
  let lrs = await startLrs(config, logger);
  const t: TestLrs = {
    lrs,
    url: lrs.url,
    dir,
    config,
    env,
    fetch(path, init = {}) {
      const { user = ADMIN, version = '1.0.3', ...rest } = init;
      const headers = new Headers(rest.headers);
      if (user && !headers.has('authorization')) headers.set('authorization', basic(user));
      if (version && !headers.has('x-experience-api-version')) headers.set('x-experience-api-version', version);
      const go = () => fetch(`${t.url}${path}`, { ...rest, headers });
      // A pooled keep-alive connection may belong to a server this harness restarted: retry reads once.
      const idempotent = !rest.method || rest.method === 'GET' || rest.method === 'HEAD';
      return go().catch((err: unknown) => (idempotent ? go() : Promise.reject(err)));
    },
    async restart() {
      await lrs.close();
      lrs = await startLrs({ ...config, port: Number(new URL(t.url).port) }, logger);
      t.lrs = lrs;
    },
    async close() {
      await lrs.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return t;
}

/** A minimal valid statement; `overrides` replace top-level properties. */
export function statement(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    actor: { objectType: 'Agent', name: 'Ben', mbox: 'mailto:ben@example.com' },
    verb: { id: 'http://adlnet.gov/expapi/verbs/passed', display: { 'en-US': 'passed' } },
    object: { objectType: 'Activity', id: 'http://example.com/activities/explosives-training' },
    ...overrides,
  };
}

export const jsonInit = (method: string, body: unknown, extra: RequestInit & { user?: TestUser | null; version?: string | null } = {}) => ({
  ...extra,
  method,
  headers: { 'content-type': 'application/json', ...(extra.headers as Record<string, string> | undefined) },
  body: JSON.stringify(body),
});
