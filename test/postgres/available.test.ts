/**
 * PostgreSQL is part of the suite: when no server can be had, this fails (with how to install one)
 * so the run counts a failure, not only cancelled contract tests. LECTERN_TEST_SKIP_POSTGRES=1 opts out.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { adminUrl, postgresSkipped } from '../helpers/postgres.ts';

test('a PostgreSQL server is available to the tests', { skip: postgresSkipped() && 'LECTERN_TEST_SKIP_POSTGRES=1' }, async () => {
  const c = new pg.Client({ connectionString: await adminUrl() });
  await c.connect();
  try {
    const r = await c.query<{ v: string }>("SELECT current_setting('server_version_num') AS v");
    assert.ok(Number(r.rows[0].v) >= 130000, 'the tests need PostgreSQL 13 or later (DROP DATABASE ... WITH (FORCE)); Lectern itself needs 11');
  } finally {
    await c.end();
  }
});
