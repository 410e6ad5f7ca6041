/**
 * PostgreSQL stopping under load and coming back (its own cluster, so stopping it disturbs no
 * other test): requests get 503 with a JSON detail while it is down, /heartbeat 500, never a 500
 * on the xAPI routes; the same server process serves again once PostgreSQL is back; every
 * acknowledged statement is stored, and no batch is half-written.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { jsonInit, postgresAt, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { findPgBin, type PgCluster, postgresSkipped, startCluster } from '../helpers/postgres.ts';

const until = async (_what: string, check: () => Promise<boolean>) => {
  // Bounded by the test's own timeout, not by a clock assertion.
  while (!(await check())) await new Promise((r) => setTimeout(r, 20));
};

// This test stops and starts its own server, so it needs the binaries even when the others use
// a server given by LECTERN_TEST_POSTGRES_URL.
const skip = postgresSkipped() || (process.env.LECTERN_TEST_POSTGRES_URL && !findPgBin() ? 'needs initdb and pg_ctl to run its own server' : false);

describe('PostgreSQL going away and coming back', { skip, timeout: 120_000 }, () => {
  let cluster: PgCluster;
  let url: string;
  let t: TestLrs;
  before(async () => {
    cluster = await startCluster();
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query('CREATE DATABASE lrs');
    await admin.end();
    url = cluster.url.replace(/\/postgres$/, '/lrs');
    t = await startTestLrs(postgresAt(url, { LECTERN_POSTGRES_POOL_SIZE: '4', LECTERN_POSTGRES_CONNECT_TIMEOUT: '2000' }));
  });
  after(async () => {
    await t?.close();
    cluster?.destroy();
  });

  test('503 while down, 500 heartbeat, recovery without restart, acknowledged statements all stored', async () => {
    const acked: string[] = [];
    const unacked: string[][] = [];
    const statuses = new Map<number, number>();
    let stop = false;
    const poster = async () => {
      while (!stop) {
        const ids = [randomUUID(), randomUUID(), randomUUID()];
        const res = await t.fetch(
          '/xAPI/statements',
          jsonInit(
            'POST',
            ids.map((id) => statement({ id })),
          ),
        );
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const body = await res.json();
        if (res.status === 200) acked.push(...ids);
        else {
          unacked.push(ids);
          if (res.status === 503) assert.match(body.detail, /database is unavailable/);
          await new Promise((r) => setTimeout(r, 10));
        }
      }
    };
    const posters = [poster(), poster(), poster()];
    try {
      await until('some statements stored', async () => acked.length >= 30);
      await cluster.stop('fast');

      const hb = await fetch(`${t.url}/heartbeat`);
      assert.equal(hb.status, 500);
      assert.equal((await hb.json()).database, 'error');
      const get = await t.fetch(`/xAPI/statements?statementId=${acked[0]}`);
      assert.equal(get.status, 503);
      assert.match((await get.json()).detail, /database is unavailable/);
      await until('posters see the outage', async () => (statuses.get(503) ?? 0) >= 5);

      await cluster.start();
      await until('heartbeat recovers', async () => (await fetch(`${t.url}/heartbeat`)).status === 200);
      const before = acked.length;
      await until('writes flow again', async () => acked.length >= before + 30);
    } finally {
      stop = true;
      await Promise.all(posters);
    }

    assert.deepEqual(
      [...statuses.keys()].filter((s) => s !== 200 && s !== 503),
      [],
      `unexpected statuses: ${JSON.stringify([...statuses])}`,
    );
    for (const id of acked) assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 200, `acknowledged ${id} lost`);

    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      // A batch whose answer was lost (503 after COMMIT was sent) may be stored, but only whole.
      const stored = new Set((await db.query<{ id: string }>('SELECT id::text AS id FROM statements')).rows.map((r) => r.id));
      for (const ids of unacked) {
        const n = ids.filter((id) => stored.has(id)).length;
        assert.ok(n === 0 || n === ids.length, `batch half-written: ${n} of ${ids.length}`);
      }
      const r = await db.query<{ bad: number }>(
        'SELECT count(*)::int AS bad FROM statements s WHERE ' +
          '(SELECT count(*) FROM statement_agents x WHERE x.seq = s.seq) <> 2 OR (SELECT count(*) FROM statement_activities x WHERE x.seq = s.seq) <> 1',
      );
      assert.equal(r.rows[0].bad, 0, 'statements without all their index rows');
    } finally {
      await db.end();
    }
  });
});
