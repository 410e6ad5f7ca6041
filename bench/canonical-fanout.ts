/**
 * Issue 27 item 3's scenario: a user with `statements/read/mine` and `statements/write` stores
 * `statements` statements of `activities` distinct contextActivities.other ids each, then reads
 * `GET ?limit=N&format=canonical`, while another client's `GET ?limit=1` is sent 100 ms later.
 * The same read again by a full reader (`statements/read`), whose canonical definitions are read
 * from the store. Prints each answer's status and time and the event loop's longest stall during
 * each read (the server runs in this process). Settings are the defaults (pool of 10 on PostgreSQL).
 *
 *   node bench/canonical-fanout.ts [sqlite|sqlite-threads|postgres] [statements=10] [activities=50000]
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { BACKENDS, jsonInit, startTestLrs, statement, type TestUser } from '../test/helpers/lrs.ts';

const [name = 'sqlite', n = '10', per = '50000'] = process.argv.slice(2);
const backend = BACKENDS.find((b) => b.name === name);
if (!backend) throw new Error(`backend one of ${BACKENDS.map((b) => b.name).join(', ')}`);
const statements = Number(n);
const activities = Number(per);

const user = (username: string, scopes: string[]): TestUser => ({ username, password: `${username}-pw`, scopes, agent: { mbox: `mailto:${username}@example.com` } });
const MINE = user('mine', ['statements/read/mine', 'statements/write']);
const READER = user('reader', ['statements/read']);
const OTHER = user('other', ['statements/read']);

const t = await startTestLrs(backend, { users: [MINE, READER, OTHER], env: { LECTERN_POSTGRES_POOL_SIZE: '10' } });
try {
  for (let i = 0; i < statements; i++) {
    const other = Array.from({ length: activities }, (_, j) => ({ id: `http://example.com/fanout/${i}/${j}` }));
    const res = await t.fetch('/xAPI/statements', jsonInit('POST', statement({ context: { contextActivities: { other } } }), { user: MINE }));
    if (res.status !== 200) throw new Error(`POST ${res.status}: ${await res.text()}`);
  }
  for (const reader of [MINE, READER]) {
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const timed = async (path: string, u: TestUser) => {
      const start = performance.now();
      const res = await t.fetch(path, { user: u });
      const bytes = (await res.arrayBuffer()).byteLength;
      return `${res.status} in ${((performance.now() - start) / 1000).toFixed(2)} s (${(bytes / 1e6).toFixed(1)} MB)`;
    };
    const canonical = timed(`/xAPI/statements?limit=${statements}&format=canonical`, reader);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const other = timed('/xAPI/statements?limit=1', OTHER);
    const [a, b] = await Promise.all([canonical, other]);
    loop.disable();
    console.log(`${backend.name} ${reader.username}: canonical ${a}; other client's limit=1 ${b}; longest event-loop stall ${(loop.max / 1e6).toFixed(0)} ms`);
  }
} finally {
  await t.close();
}
