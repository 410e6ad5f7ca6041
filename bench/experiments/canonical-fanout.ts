/**
 * Issue 27 item 3's scenario: a user with `statements/read/mine` and `statements/write` stores
 * `statements` statements of `activities` distinct contextActivities.other ids each, then reads
 * `GET ?limit=N&format=canonical`, while another client's `GET ?limit=1` is sent 100 ms later.
 * The same read again by a full reader (`statements/read`), whose canonical definitions are read
 * from the store. Prints each answer's status and time and the event loop's longest stall during
 * each read (the server runs in this process). Settings are the defaults (pool of 10 on PostgreSQL).
 *
 *   node bench/experiments/canonical-fanout.ts [sqlite|sqlite-threads|postgres] [statements=10] [activities=50000]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import bcrypt from 'bcrypt';
import { startLrs } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { type PgCluster, startCluster } from '../../scripts/postgres-cluster.ts';

const BACKENDS = ['sqlite', 'sqlite-threads', 'postgres'];
const [name = 'sqlite', n = '10', per = '50000'] = process.argv.slice(2);
if (!BACKENDS.includes(name)) throw new Error(`backend one of ${BACKENDS.join(', ')}`);
const statements = Number(n);
const activities = Number(per);

interface User {
  username: string;
  password: string;
  scopes: string[];
}
const user = (username: string, scopes: string[]): User => ({ username, password: `${username}-pw`, scopes });
const MINE = user('mine', ['statements/read/mine', 'statements/write']);
const READER = user('reader', ['statements/read']);
const OTHER = user('other', ['statements/read']);
const basic = (u: User) => `Basic ${Buffer.from(`${u.username}:${u.password}`).toString('base64')}`;

const dir = mkdtempSync(join(tmpdir(), 'lectern-fanout-'));
const authFile = join(dir, 'auth.json');
writeFileSync(
  authFile,
  JSON.stringify(
    [MINE, READER, OTHER].map((u) => ({
      username: u.username,
      hash: bcrypt.hashSync(u.password, 4),
      scopes: u.scopes,
      agent: { objectType: 'Agent', mbox: `mailto:${u.username}@example.com` },
    })),
  ),
);
let cluster: PgCluster | undefined;
const backendEnv: Record<string, string> =
  name === 'postgres'
    ? { LECTERN_RUNSERVER_BACKEND: 'postgres', LECTERN_POSTGRES_URL: (cluster = await startCluster()).url, LECTERN_POSTGRES_POOL_SIZE: '10' }
    : {
        LECTERN_RUNSERVER_BACKEND: 'sqlite',
        LECTERN_SQLITE_PATH: join(dir, 'lectern.sqlite'),
        ...(name === 'sqlite-threads' && { LECTERN_SQLITE_WRITER_THREAD: 'true', LECTERN_SQLITE_READERS: '2' }),
      };
const config = loadConfig({ LECTERN_RUNSERVER_PORT: '0', LECTERN_AUTH_FILE: authFile, LECTERN_LOG_LEVEL: 'silent', ...backendEnv });
const lrs = await startLrs(config, createLogger(config.logLevel));
const get = (path: string, u: User, init: RequestInit = {}) =>
  fetch(`${lrs.url}${path}`, { ...init, headers: { authorization: basic(u), 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' } });
try {
  for (let i = 0; i < statements; i++) {
    const other = Array.from({ length: activities }, (_, j) => ({ id: `http://example.com/fanout/${i}/${j}` }));
    const body = {
      actor: { objectType: 'Agent', name: 'Ben', mbox: 'mailto:ben@example.com' },
      verb: { id: 'http://adlnet.gov/expapi/verbs/passed', display: { 'en-US': 'passed' } },
      object: { objectType: 'Activity', id: 'http://example.com/activities/explosives-training' },
      context: { contextActivities: { other } },
    };
    const res = await get('/xAPI/statements', MINE, { method: 'POST', body: JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`POST ${res.status}: ${await res.text()}`);
  }
  for (const reader of [MINE, READER]) {
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const timed = async (path: string, u: User) => {
      const start = performance.now();
      const res = await get(path, u);
      const bytes = (await res.arrayBuffer()).byteLength;
      return `${res.status} in ${((performance.now() - start) / 1000).toFixed(2)} s (${(bytes / 1e6).toFixed(1)} MB)`;
    };
    const canonical = timed(`/xAPI/statements?limit=${statements}&format=canonical`, reader);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const other = timed('/xAPI/statements?limit=1', OTHER);
    const [a, b] = await Promise.all([canonical, other]);
    loop.disable();
    console.log(`${name} ${reader.username}: canonical ${a}; other client's limit=1 ${b}; longest event-loop stall ${(loop.max / 1e6).toFixed(0)} ms`);
  }
} finally {
  await lrs.close();
  cluster?.destroy();
  rmSync(dir, { recursive: true, force: true });
}
