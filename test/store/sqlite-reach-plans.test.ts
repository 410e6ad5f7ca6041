/**
 * Erase and prune delete a statement's reach rows by its seq. SQLite's planner would take the
 * link tables' primary-key prefix (the tenant) for those DELETEs — a walk of every reach row of
 * the store per statement, which made a prune of a 10M store remove 22 statements/s — so the
 * statements name the (tenant, seq) index; this checks each plan searches by seq.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { openStore } from '../../src/store/index.ts';
import { REACH_FORGET_SQL } from '../../src/store/sqlite/store.ts';

test('the reach rows of a statement are deleted through an index on its seq, never a walk of the tenant', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-reach-plans-'));
  try {
    const path = join(dir, 'lectern.sqlite');
    await (await openStore({ backend: 'sqlite', path })).close();
    const db = new DatabaseSync(path);
    try {
      for (const sql of REACH_FORGET_SQL) {
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(1, 1) as { detail: string }[]).map((r) => r.detail).join('; ');
        assert.match(plan, /\(tenant=\? AND seq=\?\)/, `${sql}: ${plan}`);
      }
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
