/**
 * SQLite page size: a database Lectern creates uses 8 KB pages (a ≈ 1.4 KB statement row packs
 * better than in 4 KB pages); a database created with another page size keeps it and still works;
 * each connection caches the configured MiB of pages.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { PAGE_SIZE } from '../../src/store/sqlite/migrations.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { jsonInit, sqliteBackend, startTestLrs, statement } from '../helpers/lrs.ts';

const pageSize = (file: string): number => {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return Number((db.prepare('PRAGMA page_size').get() as { page_size: number }).page_size);
  } finally {
    db.close();
  }
};

test('a new SQLite database has 8 KB pages', async () => {
  const lrs = await startTestLrs(sqliteBackend);
  try {
    assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', statement()))).status, 200);
    assert.equal(PAGE_SIZE, 8192);
    assert.equal(pageSize(lrs.env.LECTERN_SQLITE_PATH), PAGE_SIZE);
  } finally {
    await lrs.close();
  }
});

test('an existing database keeps its page size and serves as before', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-pages-'));
  try {
    const file = join(dir, 'old.sqlite');
    const db = new DatabaseSync(file);
    db.exec('PRAGMA page_size = 4096; PRAGMA journal_mode = WAL; CREATE TABLE unrelated (x INTEGER)');
    db.close();
    const lrs = await startTestLrs(sqliteBackend, { env: { LECTERN_SQLITE_PATH: file } });
    try {
      const posted = await lrs.fetch('/xAPI/statements', jsonInit('POST', statement()));
      assert.equal(posted.status, 200);
      const [id] = (await posted.json()) as string[];
      const res = await lrs.fetch(`/xAPI/statements?statementId=${id}`);
      assert.equal(res.status, 200);
      assert.equal(pageSize(file), 4096);
    } finally {
      await lrs.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('LECTERN_SQLITE_WAL_AUTOCHECKPOINT bounds the WAL file; the default lets it hold many commits', async () => {
  const walAfterWrites = async (env: Record<string, string>): Promise<number> => {
    const lrs = await startTestLrs(sqliteBackend, { env });
    try {
      for (let i = 0; i < 30; i++) {
        const batch = Array.from({ length: 50 }, () => statement({ id: randomUUID(), object: { id: `http://example.com/a/${randomUUID()}` } }));
        assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', batch))).status, 200);
      }
      return statSync(`${lrs.env.LECTERN_SQLITE_PATH}-wal`).size;
    } finally {
      await lrs.close();
    }
  };
  const small = await walAfterWrites({ LECTERN_SQLITE_WAL_AUTOCHECKPOINT: '100' });
  const large = await walAfterWrites({});
  // 100 pages: checkpointed and truncated back to 800 KB after each commit past that (a commit's own frames may exceed it).
  assert.ok(small < 3 * 1024 * 1024, `WAL of ${small} bytes with 100 pages`);
  assert.ok(large > 3 * small, `WAL of ${large} bytes with the default, ${small} with 100 pages`);
});

test('the writer caches 6 MiB of pages for a small store, 1 MiB per 312,500 statements held for a large one (at most 32), or LECTERN_SQLITE_CACHE_SIZE', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-cache-'));
  const cacheOf = async (path: string, cacheMiB?: number) => {
    const store = new SqliteStore({ path, cacheMiB });
    try {
      await store.migrate();
      return (store as unknown as { db: DatabaseSync }).db.prepare('PRAGMA cache_size').get() as { cache_size: number };
    } finally {
      await store.close();
    }
  };
  /** The store has held `n` statements: its AUTOINCREMENT counter, which the cache follows. */
  const held = (path: string, n: number) => {
    const db = new DatabaseSync(path);
    try {
      db.prepare("DELETE FROM sqlite_sequence WHERE name = 'statements'").run();
      db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('statements', ?)").run(n);
    } finally {
      db.close();
    }
  };
  try {
    const path = join(dir, 'store.sqlite');
    assert.equal((await cacheOf(path)).cache_size, -6 * 1024);
    held(path, 5_000_000);
    assert.equal((await cacheOf(path)).cache_size, -16 * 1024);
    held(path, 50_000_000);
    assert.equal((await cacheOf(path)).cache_size, -32 * 1024);
    assert.equal((await cacheOf(path, 8)).cache_size, -8 * 1024, 'a size set by the operator stays');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
