/**
 * SQLite reader threads (src/store/sqlite/pages.ts, LECTERN_SQLITE_READERS): statement pages
 * are read on threads of their own. Beyond the contract suite (which runs with two readers on the
 * `sqlite-threads` backend): a page read there shows every write acknowledged before it, tenants
 * stay apart, the `more` links walk the same pages as on the event loop, and a reader that stops
 * is replaced without the server noticing more than that one query.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { LrsError } from '../../src/errors.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { jsonInit, sqliteBackend, startTestLrs, statement, TENANT_B, type TestLrs } from '../helpers/lrs.ts';

const readersOf = (lrs: TestLrs): Worker[] => (lrs.lrs.store as unknown as { readerThreads: Worker[] }).readerThreads;

const VERB = { id: 'http://example.com/verbs/read-on-a-thread' };
const st = (o: Record<string, unknown> = {}) => statement({ id: randomUUID(), verb: VERB, ...o });

async function walk(lrs: TestLrs, path: string): Promise<string[]> {
  const ids: string[] = [];
  for (let next: string | undefined = path; next; ) {
    const res = await lrs.fetch(next);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { statements: { id: string }[]; more?: string };
    ids.push(...body.statements.map((s) => s.id));
    next = body.more || undefined;
  }
  return ids;
}

describe('SQLite reader threads', () => {
  let threaded: TestLrs;
  let plain: TestLrs;
  before(async () => {
    threaded = await startTestLrs(sqliteBackend, { env: { LECTERN_SQLITE_READERS: '2' } });
    plain = await startTestLrs(sqliteBackend, { env: { LECTERN_SQLITE_READERS: '0' } });
  });
  after(async () => {
    await threaded?.close();
    await plain?.close();
  });

  test('a page read on a reader shows each write acknowledged before it', async () => {
    for (let i = 0; i < 20; i++) {
      const s = st();
      assert.equal((await threaded.fetch('/xAPI/statements', jsonInit('POST', s))).status, 200);
      const res = await threaded.fetch(`/xAPI/statements?verb=${encodeURIComponent(VERB.id)}&limit=1`);
      assert.equal(((await res.json()) as { statements: { id: string }[] }).statements[0].id, s.id);
    }
    assert.ok(readersOf(threaded).length >= 1, 'the pages were read on reader threads');
  });

  test('the same pages and more links as on the event loop; tenants stay apart', async () => {
    const batch = Array.from({ length: 35 }, (_, i) => st({ result: { score: { raw: i } } }));
    for (const lrs of [threaded, plain]) assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', batch))).status, 200);
    const path = `/xAPI/statements?verb=${encodeURIComponent(VERB.id)}&limit=10&ascending=true`;
    const [a, b] = [await walk(threaded, path), await walk(plain, path)];
    assert.deepEqual(
      a.slice(-35),
      batch.map((s) => s.id),
    );
    assert.deepEqual(
      b,
      batch.map((s) => s.id),
    );
    const other = await threaded.fetch(path, { user: TENANT_B });
    assert.deepEqual(((await other.json()) as { statements: unknown[] }).statements, [], 'another tenant sees none of them');
  });

  test('a reader that stops is replaced: later queries are answered', async () => {
    const before = readersOf(threaded);
    assert.ok(before.length >= 1);
    await Promise.all(before.map((w) => w.terminate()));
    const res = await threaded.fetch(`/xAPI/statements?verb=${encodeURIComponent(VERB.id)}&limit=5`);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { statements: unknown[] }).statements.length, 5);
    for (const w of readersOf(threaded)) assert.ok(!before.includes(w), 'a new thread reads');
  });
});

test('closing the store while a reader query runs answers it (result or 503), never leaves it hanging', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-readers-'));
  const store = new SqliteStore({ path: join(dir, 'r.sqlite'), readers: 1 });
  try {
    await store.migrate();
    await store.insertStatements('', prepareBatch([st() as unknown as Statement], { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
    const query = {
      filter: { verb: VERB.id, relatedAgents: false, relatedActivities: false },
      limit: 10,
      maxBytes: 4 * 1024 * 1024,
      ascending: false,
      format: 'exact' as const,
      attachments: false,
    };
    await store.queryStatements('', query); // the reader is up
    const answered = Promise.all(Array.from({ length: 20 }, () => store.queryStatements('', query))).then(
      () => 'answered',
      (e: unknown) => (e instanceof LrsError && e.status === 503 ? 'unavailable' : `other: ${String(e)}`),
    );
    await store.close();
    const outcome = await Promise.race([answered, new Promise((r) => setTimeout(() => r('hanging'), 5000).unref())]);
    assert.ok(outcome === 'answered' || outcome === 'unavailable', String(outcome));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
