/**
 * Read replicas (LECTERN_POSTGRES_READ_URLS) on a real primary and streaming hot standby of this
 * test's own (pg_basebackup -R on loopback): queries served by the standby (shown by a statement
 * only the primary has while replay is paused), a truthful Consistent-Through that stops
 * advancing while replay is paused, GET by id and `more` cursors the standby lacks answered by
 * the primary, a stopped standby costing no 5xx and used again once back, a replica too far
 * behind skipped, a promoted one left alone, and /heartbeat and /metrics showing each replica's
 * state without its password. Conditions are polled (with generous caps), never timed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { PgCluster } from '../helpers/postgres.ts';
import { jsonInit, postgresAt, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { findPgBin, postgresSkipped } from '../helpers/postgres.ts';
import { createReplicatedDatabase, pauseReplay, type ReplicaPair, resumeReplay, sqlOn, startReplicaPair, until, urlOf } from '../helpers/replica.ts';

const skip = postgresSkipped() || (!findPgBin() ? 'needs initdb, pg_ctl and pg_basebackup to run its own primary and standby' : false);
const PASSWORD = 'replica-secret-s3cr3t';

interface Heartbeat {
  database: string;
  replicas?: { replica: number; state: string; lag_ms: number | null }[];
}

describe('read replicas', { skip, timeout: 600_000 }, () => {
  let pair: ReplicaPair;
  let db: string;
  let t: TestLrs;
  /** The same database with no replicas: what "another server" answered. */
  let plain: TestLrs;

  const heartbeat = async (lrs: TestLrs = t): Promise<Heartbeat> => {
    const res = await lrs.fetch('/heartbeat', { user: null, version: null });
    assert.equal(res.status, 200);
    return (await res.json()) as Heartbeat;
  };
  const replicaState = async (lrs: TestLrs = t) => (await heartbeat(lrs)).replicas?.[0];
  const post = async (lrs: TestLrs = t): Promise<{ id: string; stored: string }> => {
    const id = randomUUID();
    const res = await lrs.fetch('/xAPI/statements', jsonInit('POST', statement({ id })));
    assert.equal(res.status, 200, await res.clone().text());
    const got = await plain.fetch(`/xAPI/statements?statementId=${id}`);
    assert.equal(got.status, 200);
    return { id, stored: ((await got.json()) as { stored: string }).stored };
  };
  /** GET /statements (newest first, every statement of the test: the page holds them all). */
  const list = async (lrs: TestLrs = t) => {
    const res = await lrs.fetch('/xAPI/statements?limit=500');
    assert.equal(res.status, 200);
    const body = (await res.json()) as { statements: { id: string; stored: string }[] };
    return { ids: body.statements.map((s) => s.id), statements: body.statements, through: res.headers.get('x-experience-api-consistent-through')! };
  };
  /**
   * A page the paused standby answered: one without `missing`, the newest statement written
   * (only the primary has it). On a loaded machine a check may time out and the primary answer
   * for a moment: asked again.
   */
  const standbyPage = async (missing: string) => {
    let page!: Awaited<ReturnType<typeof list>>;
    await until(async () => !(page = await list()).ids.includes(missing), 'a query served by the standby');
    return page;
  };
  /** Waits for the next check of the replica while it falls behind (its lag grows with each). */
  const nextCheck = async () => {
    const lag = (await replicaState())?.lag_ms ?? 0;
    await until(async () => ((await replicaState())?.lag_ms ?? 0) > lag, 'another check');
  };
  const onStandby = async (id: string) => (await sqlOn(pair.standby, db, 'SELECT 1 FROM statements WHERE id = $1::uuid', [id])).length === 1;

  before(async () => {
    pair = await startReplicaPair();
    db = await createReplicatedDatabase(pair);
    const settings = { LECTERN_POSTGRES_POOL_SIZE: '4', LECTERN_POSTGRES_CONNECT_RETRIES: '0' };
    plain = await startTestLrs(postgresAt(urlOf(pair.primary, db), settings));
    // Lag is never too much here (the lag test has a server of its own).
    t = await startTestLrs(
      postgresAt(urlOf(pair.primary, db), { ...settings, LECTERN_POSTGRES_READ_URLS: urlOf(pair.standby, db, PASSWORD), LECTERN_POSTGRES_REPLICA_MAX_LAG: '86400000' }),
    );
    await until(async () => (await replicaState())?.state === 'up', 'the replica is up');
  });
  after(async () => {
    await t?.close();
    await plain?.close();
    pair?.standby.destroy();
    pair?.primary.destroy();
  });

  test('caught up: Consistent-Through follows the primary and queries come from the standby', async () => {
    const a = await post();
    await until(() => onStandby(a.id), 'the standby shows A');
    // A check after the replay: the replica's mark covers A.
    await until(async () => Date.parse((await list()).through) >= Date.parse(a.stored), 'Consistent-Through reaches A');
    assert.ok((await list()).ids.includes(a.id));

    await pauseReplay(pair.standby);
    try {
      const b = await post();
      // B only on the primary: a query that lacks it was answered by the standby.
      assert.equal(await onStandby(b.id), false);
      // A page without B: served by the standby (which a page without the feature never is).
      const page = await standbyPage(b.id);
      assert.ok(page.ids.includes(a.id));
      assert.ok(Date.parse(page.through) < Date.parse(b.stored), 'Consistent-Through is not later than what the standby replayed');
      // GET by id of a statement the standby lacks: the primary answers.
      const byId = await t.fetch(`/xAPI/statements?statementId=${b.id}`);
      assert.equal(byId.status, 200);
      assert.equal(((await byId.json()) as { id: string }).id, b.id);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${randomUUID()}`)).status, 404);
    } finally {
      await resumeReplay(pair.standby);
    }
  });

  test('replay paused while writes go on: Consistent-Through stops, and everything at or before it is returned', async () => {
    const count = async (cluster: PgCluster) => (await sqlOn<{ n: string }>(cluster, db, 'SELECT count(*) AS n FROM statements'))[0].n;
    await until(async () => (await count(pair.standby)) === (await count(pair.primary)), 'the standby has every statement');
    await pauseReplay(pair.standby);
    try {
      const written = [await post()];
      // Two more checks (each grows the lag): the second began after the write, so it judged the
      // paused standby against every mark it can ever reach (a check in flight during the pause
      // may still have seen it replaying).
      for (let i = 0; i < 2; i++) await nextCheck();
      const first = await standbyPage(written[0].id);
      for (let i = 0; i < 3; i++) {
        written.push(await post());
        await nextCheck();
        const page = await standbyPage(written.at(-1)!.id);
        assert.equal(page.through, first.through, 'Consistent-Through does not advance while replay is paused');
        // Every statement stored at or before it is in the answer.
        const all = await list(plain);
        const due = all.statements.filter((s) => Date.parse(s.stored) <= Date.parse(page.through)).map((s) => s.id);
        assert.ok(due.length > 0);
        for (const id of due) assert.ok(page.ids.includes(id), `${id}, stored before Consistent-Through, is returned`);
        for (const w of written) {
          assert.ok(!page.ids.includes(w.id), 'new statements are not on the paused standby');
          assert.equal((await t.fetch(`/xAPI/statements?statementId=${w.id}`)).status, 200, 'GET by id of a new statement');
        }
      }
      // A `more` cursor another server gave (the primary's newest statement): the standby does not
      // know it, and the primary answers the page.
      const primaryPage = await plain.fetch('/xAPI/statements?limit=1');
      const more = ((await primaryPage.json()) as { more: string }).more;
      assert.ok(more);
      const next = await t.fetch(more);
      assert.equal(next.status, 200, await next.clone().text());
      assert.equal(((await next.json()) as { statements: { id: string }[] }).statements[0].id, written.at(-2)!.id);
      // A `more` cursor of the standby's own pages works on it.
      const own = await t.fetch('/xAPI/statements?limit=1');
      assert.equal(own.status, 200, await own.clone().text());
      const ownBody = await own.clone().text();
      const ownMore = ((await own.json()) as { more: string }).more;
      assert.ok(ownMore, ownBody);
      assert.equal((await t.fetch(ownMore)).status, 200);
    } finally {
      await resumeReplay(pair.standby);
    }
    await until(async () => {
      const page = await list();
      return Date.parse(page.through) > Date.parse((await list(plain)).statements[0].stored);
    }, 'Consistent-Through advances again once replay resumes');
  });

  test('standby stopped: reads go on from the primary with no 5xx; used again once back', async () => {
    const a = await post();
    await pair.standby.stop('fast');
    let stopped = true;
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const page = await t.fetch('/xAPI/statements?limit=500');
        statuses.push(page.status);
        assert.ok(page.headers.get('x-experience-api-consistent-through'));
        if (page.status === 200) assert.ok(((await page.json()) as { statements: { id: string }[] }).statements.some((s) => s.id === a.id));
        statuses.push((await t.fetch(`/xAPI/statements?statementId=${a.id}`)).status);
        statuses.push((await t.fetch(`/xAPI/activities?activityId=${encodeURIComponent('http://example.com/activities/explosives-training')}`)).status);
        statuses.push((await t.fetch(`/xAPI/agents?agent=${encodeURIComponent(JSON.stringify({ mbox: 'mailto:ben@example.com' }))}`)).status);
      }
      assert.deepEqual([...new Set(statuses)], [200]);
      await until(async () => (await replicaState())?.state === 'down', 'the heartbeat shows the replica down');
      const hb = await heartbeat();
      assert.equal(hb.database, 'ok');
      const metrics = await (await t.fetch('/metrics', { version: null })).text();
      assert.match(metrics, /lectern_db_replica_state\{replica="1",server="127\.0\.0\.1:\d+\/lectern_replica_\w+",state="down"\} 1/);
      assert.ok(!metrics.includes(PASSWORD), 'no password in /metrics');
      assert.ok(!JSON.stringify(hb).includes(PASSWORD));

      await pair.standby.start();
      stopped = false;
      await until(async () => (await replicaState())?.state === 'up', 'the replica is up again');
      await until(() => onStandby(a.id), 'the standby caught up');
      await pauseReplay(pair.standby);
      const b = await post();
      await until(async () => {
        const page = await list();
        return page.ids.includes(a.id) && !page.ids.includes(b.id);
      }, 'queries are served by the standby again');
      const metricsUp = await (await t.fetch('/metrics', { version: null })).text();
      assert.match(metricsUp, /lectern_db_replica_lag_seconds\{replica="1",server="[^"]+"\} \d/);
    } finally {
      if (stopped) await pair.standby.start();
      await resumeReplay(pair.standby).catch(() => undefined);
    }
  });

  test('a replica further behind than LECTERN_POSTGRES_REPLICA_MAX_LAG is skipped until it catches up', async () => {
    const strict = await startTestLrs(
      postgresAt(urlOf(pair.primary, db), { LECTERN_POSTGRES_POOL_SIZE: '2', LECTERN_POSTGRES_READ_URLS: urlOf(pair.standby, db), LECTERN_POSTGRES_REPLICA_MAX_LAG: '1000' }),
    );
    try {
      await until(async () => (await replicaState(strict))?.state === 'up', 'the replica is up');
      await pauseReplay(pair.standby);
      try {
        let last = await post();
        // Writes go on until the replica is seen too far behind.
        await until(async () => {
          if ((await replicaState(strict))?.state === 'lagging') return true;
          last = await post();
          return false;
        }, 'the replica is lagging');
        const page = await list(strict);
        assert.ok(page.ids.includes(last.id), 'the primary answered');
        assert.ok(Date.parse(page.through) >= Date.parse(last.stored));
      } finally {
        await resumeReplay(pair.standby);
      }
      await until(async () => (await replicaState(strict))?.state === 'up', 'the replica is read from again once caught up');
    } finally {
      await strict.close();
    }
  });

  test('a promoted replica is no longer read from', async () => {
    await until(async () => (await replicaState())?.state === 'up', 'the replica is up');
    await sqlOn(pair.standby, 'postgres', 'SELECT pg_promote()');
    await until(async () => (await replicaState())?.state === 'promoted', 'the heartbeat shows it promoted');
    const c = await post();
    const page = await list();
    assert.ok(page.ids.includes(c.id), 'the primary answers');
  });
});
