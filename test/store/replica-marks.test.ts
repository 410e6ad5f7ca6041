/** The pieces of a replica's Consistent-Through (src/store/postgres/replicas.ts) that need no server. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tenantLockKey } from '../../src/store/postgres/locks.ts';
import { markLsn, markThrough, serverOf } from '../../src/store/postgres/replicas.ts';

test('a WAL insert position just past an empty page header is the end of the page before it', () => {
  const block = 8192n;
  const segment = 16n * 1024n * 1024n;
  // Inside a page: as is.
  assert.equal(markLsn(5n * block + 100n, block, segment), 5n * block + 100n);
  // A fresh page: its short header (24 bytes) is not WAL a standby replays.
  assert.equal(markLsn(5n * block + 24n, block, segment), 5n * block);
  // A fresh segment: its long header (40 bytes).
  assert.equal(markLsn(3n * segment + 40n, block, segment), 3n * segment);
});

test("a mark's Consistent-Through: its moment, or just before a tenant's oldest insert in flight", () => {
  const mark = { nowMs: 10_000, busy: new Map([[tenantLockKey('busy'), 7_000]]), lsn: 1n };
  assert.equal(markThrough(mark, 'idle').getTime(), 9_999);
  assert.equal(markThrough(mark, 'busy').getTime(), 6_999);
});

test('a replica is named by host, port and database, never its credentials', () => {
  assert.equal(serverOf('postgres://lectern:s3cret@db2.example:6432/lrs?sslmode=require'), 'db2.example:6432/lrs');
  assert.equal(serverOf('postgresql://db3/lrs'), 'db3:5432/lrs');
});
