/**
 * A backend's options (src/store/index.ts): its own tuning defaults, which the settings table
 * documents (docs/configuration.md), and the injected clock, on the writer thread too (ThreadedSqliteOptions).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { SETTINGS } from '../../src/config.ts';
import { openStore, type Store, type StoreOptions } from '../../src/store/index.ts';
import { CACHE_MIB, WAL_AUTOCHECKPOINT } from '../../src/store/sqlite/migrations.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';

const ADMIN: Actor = { objectType: 'Agent', mbox: 'mailto:admin@example.com' };
const made = (): Statement => ({ id: randomUUID(), actor: ADMIN, verb: { id: 'http://example.com/verbs/did' }, object: { id: 'http://example.com/o' } }) as Statement;
const START = Date.UTC(2020, 0, 1);

test("the settings document the SQLite backend's own tuning defaults", () => {
  assert.equal(Number(SETTINGS.sqliteWalAutocheckpoint.default), WAL_AUTOCHECKPOINT);
  // Empty: CACHE_MIB, and for the writer writerCacheMiB (test/store/sqlite-pages.test.ts).
  assert.equal(SETTINGS.sqliteCacheSize.default, '');
  assert.equal(CACHE_MIB, 6);
  assert.equal(SETTINGS.sqliteCacheSize.parse('', 'LECTERN_SQLITE_CACHE_SIZE'), undefined);
  assert.equal(SETTINGS.sqliteCacheSize.parse('64', 'LECTERN_SQLITE_CACHE_SIZE'), 64);
  assert.throws(() => SETTINGS.sqliteCacheSize.parse('0', 'LECTERN_SQLITE_CACHE_SIZE'), /LECTERN_SQLITE_CACHE_SIZE/);
});

async function storedTimes(options: (path: string) => StoreOptions): Promise<{ stored: number[]; updated: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-options-'));
  let store: Store | undefined;
  try {
    store = await openStore(options(join(dir, 'x.sqlite')));
    const stored: number[] = [];
    for (let i = 0; i < 3; i++) {
      const s = made();
      await store.insertStatements('', prepareBatch([s], ADMIN, '1.0.3'), []);
      stored.push((await store.getStatement('', s.id!, false))!.storedMs);
    }
    const key = { kind: 'state' as const, activityId: 'http://example.com/a', agent: 'mbox:mailto:a@example.com', registration: '', docId: 'd' };
    const doc = await store.putDocument('', key, { content: Buffer.from('x'), contentType: 'text/plain' }, { merge: false, pre: {} });
    return { stored, updated: doc.updatedMs };
  } finally {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const writerThread of [false, true]) {
  test(`SQLite reads \`stored\` and document times from its clock${writerThread ? ' (on the writer thread: a ManualClock built from plain data)' : ''}`, async () => {
    const { stored, updated } = await storedTimes((path) =>
      writerThread
        ? { backend: 'sqlite', writerThread: true, path, synchronous: 'NORMAL', manualClock: { startMs: START, stepMs: 1000 } }
        : { backend: 'sqlite', path, synchronous: 'NORMAL', clock: new ManualClock(START, 1000) },
    );
    for (const ms of [...stored, updated]) assert.ok(ms >= START && ms < START + 3_600_000, new Date(ms).toISOString());
    assert.equal(new Set(stored).size, 3, 'each group reads the clock once: distinct stored times without sleeping');
    assert.deepEqual(
      [...stored].sort((a, b) => a - b),
      stored,
    );
  });
}
