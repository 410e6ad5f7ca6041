/**
 * Test harness: a real Lectern server on an ephemeral loopback port, on a real database, with a
 * temporary credentials file. `BACKENDS` lists every backend the contract suite runs against.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcrypt';
import { startLrs, type RunningLrs } from '../../src/app.ts';
import type { Clock } from '../../src/clock.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import { createDatabase, dropDatabase, postgresSkipped } from './postgres.ts';
import { createReplicatedDatabase, type ReplicaPair, startReplicaPair, urlOf } from './replica.ts';

export interface TestUser {
  username: string;
  password: string;
  scopes: string[];
  agent: Record<string, unknown>;
  target?: string;
  /** The credential's validation (docs/validation.md); absent: the server's. */
  validation?: 'strict' | 'lax';
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
      ...(u.validation !== undefined && { validation: u.validation }),
    })),
  );
}

export interface Backend {
  name: string;
  /** Settings that point a server at a fresh, empty database of this backend. */
  settings(dir: string): Promise<Record<string, string>>;
  /** Removes what `settings` created outside `dir`. */
  dispose?(settings: Record<string, string>): Promise<void>;
}

/** SQLite on one event loop (the default): reads and writes on one connection. */
export const sqliteBackend: Backend = {
  name: 'sqlite',
  async settings(dir) {
    return { LECTERN_RUNSERVER_BACKEND: 'sqlite', LECTERN_SQLITE_PATH: join(dir, 'lrs.sqlite'), LECTERN_SQLITE_WRITER_THREAD: 'false' };
  },
};

/** SQLite with its writes on a thread of their own (LECTERN_SQLITE_WRITER_THREAD) and statement pages read on two more (LECTERN_SQLITE_READERS). */
export const sqliteThreadBackend: Backend = {
  name: 'sqlite-threads',
  async settings(dir) {
    return { ...(await sqliteBackend.settings(dir)), LECTERN_SQLITE_WRITER_THREAD: 'true', LECTERN_SQLITE_READERS: '2' };
  },
};

/** A fresh database per test server, on the test PostgreSQL (see ./postgres.ts). */
export const postgresBackend: Backend = {
  name: 'postgres',
  async settings() {
    return {
      LECTERN_RUNSERVER_BACKEND: 'postgres',
      LECTERN_POSTGRES_URL: await createDatabase(),
      // Several servers per test process and two test processes share one PostgreSQL.
      LECTERN_POSTGRES_POOL_SIZE: '4',
      LECTERN_POSTGRES_CONNECT_RETRIES: '0',
    };
  },
  async dispose(settings) {
    await dropDatabase(settings.LECTERN_POSTGRES_URL);
  },
};

/** Every backend the contract suite runs on; LECTERN_TEST_SKIP_POSTGRES=1 leaves PostgreSQL out. */
/** A server on an existing PostgreSQL database (the caller creates and removes it), with more settings. */
export const postgresAt = (url: string, settings: Record<string, string> = {}): Backend => ({
  name: 'postgres',
  settings: async () => ({ LECTERN_RUNSERVER_BACKEND: 'postgres', LECTERN_POSTGRES_URL: url, ...settings }),
});

export const BACKENDS: Backend[] = postgresSkipped() ? [sqliteBackend, sqliteThreadBackend] : [sqliteBackend, sqliteThreadBackend, postgresBackend];

let replicaPair: Promise<ReplicaPair> | undefined;
/**
 * Statement, Activities and Agents reads on a streaming standby (LECTERN_POSTGRES_READ_URLS) of a
 * primary of this test process's own, synchronous with remote_apply (a write is acknowledged
 * once the standby shows it). Not in BACKENDS: REPLICA_BACKENDS, for the files that read.
 */
export const postgresReplicaBackend: Backend = {
  name: 'postgres-replica',
  async settings() {
    const pair = await (replicaPair ??= startReplicaPair({ sync: true }));
    const name = await createReplicatedDatabase(pair);
    return {
      LECTERN_RUNSERVER_BACKEND: 'postgres',
      LECTERN_POSTGRES_URL: urlOf(pair.primary, name),
      LECTERN_POSTGRES_READ_URLS: urlOf(pair.standby, name),
      LECTERN_POSTGRES_POOL_SIZE: '4',
      LECTERN_POSTGRES_CONNECT_RETRIES: '0',
    };
  },
};

/** BACKENDS and postgres-replica: the contract files about reads run on both. */
export const REPLICA_BACKENDS: Backend[] = postgresSkipped() ? BACKENDS : [...BACKENDS, postgresReplicaBackend];

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

/**
 * Starts a test server on a fresh database of `backend`. With `shareWith`, it is a second server
 * (another "process") on the same database and credentials as that one.
 */
export async function startTestLrs(
  backend: Backend = sqliteBackend,
  opts: { users?: TestUser[]; env?: Record<string, string>; shareWith?: TestLrs; logger?: Logger; clock?: Clock; storeClock?: Clock } = {},
): Promise<TestLrs> {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-test-'));
  const authFile = join(dir, 'auth.json');
  if (opts.shareWith) writeFileSync(authFile, readFileSync(opts.shareWith.env.LECTERN_AUTH_FILE));
  else writeFileSync(authFile, JSON.stringify(await credentialEntries(opts.users ?? [ADMIN, OTHER, TENANT_B])));
  const backendSettings = opts.shareWith ? {} : await backend.settings(dir);
  const env: Record<string, string> = {
    LECTERN_RUNSERVER_PORT: '0',
    LECTERN_AUTH_FILE: authFile,
    LECTERN_LOG_LEVEL: process.env.LECTERN_TEST_LOG_LEVEL ?? 'silent',
    LECTERN_SHUTDOWN_TIMEOUT: '2',
    ...(opts.shareWith && { ...opts.shareWith.env, LECTERN_RUNSERVER_PORT: '0', LECTERN_AUTH_FILE: authFile }),
    ...backendSettings,
    ...opts.env,
  };
  const config = loadConfig(env);
  const logger = opts.logger ?? createLogger(config.logLevel);
  let lrs: RunningLrs;
  try {
    lrs = await startLrs(config, logger, undefined, { clock: opts.clock, storeClock: opts.storeClock });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    if (!opts.shareWith) await backend.dispose?.(backendSettings);
    throw err;
  }
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
      lrs = await startLrs({ ...config, port: Number(new URL(t.url).port) }, logger, undefined, { clock: opts.clock, storeClock: opts.storeClock });
      t.lrs = lrs;
    },
    async close() {
      await lrs.close();
      rmSync(dir, { recursive: true, force: true });
      if (!opts.shareWith) await backend.dispose?.(backendSettings);
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
