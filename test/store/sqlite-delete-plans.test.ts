/**
 * Erase and prune delete a statement's rows by its seq, one statement at a time, so each DELETE
 * must search an index on seq. SQLite's planner would take the reach link tables' primary-key
 * prefix (the tenant) — a walk of every reach row of the store per statement, which made a prune
 * of a 10M store remove 22 statements/s — so those statements name the (tenant, seq) index; the
 * forwarding outbox (a target down for a day holds every statement since) has its own seq index.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { openStore } from '../../src/store/index.ts';
import { REACH_FORGET_SQL } from '../../src/store/sqlite/dialect.ts';
import { FORGET_BY_SEQ_SQL } from '../../src/store/sqlite/maintenance.ts';

test("a deleted statement's rows are found through an index on its seq, never a walk of the tenant or the outbox", async () => {
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
      for (const sql of FORGET_BY_SEQ_SQL) {
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(1) as { detail: string }[]).map((r) => r.detail).join('; ');
        assert.match(plan, /^SEARCH .*\((rowid|seq)=\?\)$/, `${sql}: ${plan}`);
      }
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
