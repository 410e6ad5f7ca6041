/**
 * The console reads through the read replica view (LECTERN_POSTGRES_READ_URLS), as GET /statements
 * does, on a real primary and streaming standby of this test's own: while replay is paused, a
 * statement written since is not in the console's list, download or live tail (so the standby
 * answered them) and the Consistent-Through they carry stops; one statement's page still finds
 * it (the primary answers what the standby lacks); after resume it appears. Conditions are
 * polled, never timed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { jsonInit, postgresAt, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { findPgBin, postgresSkipped } from '../helpers/postgres.ts';
import { createReplicatedDatabase, pauseReplay, type ReplicaPair, resumeReplay, sqlOn, startReplicaPair, until, urlOf } from '../helpers/replica.ts';
import { type Signed, signIn } from '../console/sign-in.ts';

const skip = postgresSkipped() || (!findPgBin() ? 'needs initdb, pg_ctl and pg_basebackup to run its own primary and standby' : false);
const VERB = 'http://example.com/verbs/replicated';

describe('the console reads through the read replicas', { skip, timeout: 600_000 }, () => {
  let pair: ReplicaPair;
  let db: string;
  let t: TestLrs;
  let s: Signed;

  const page = async (path: string) => {
    const res = await fetch(`${t.url}${path}`, { headers: { cookie: s.cookie } });
    assert.equal(res.status, 200, path);
    return { text: await res.text(), through: res.headers.get('x-experience-api-consistent-through')! };
  };
  const list = () => page(`/console/statements?verb=${encodeURIComponent(VERB)}`);
  const post = async (): Promise<{ id: string; stored: string }> => {
    const id = randomUUID();
    assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ id, verb: { id: VERB } })))).status, 200);
    // By id: what the standby lacks, the primary answers.
    const got = await t.fetch(`/xAPI/statements?statementId=${id}`);
    assert.equal(got.status, 200);
    return { id, stored: ((await got.json()) as { stored: string }).stored };
  };
  const onStandby = async (id: string) => (await sqlOn(pair.standby, db, 'SELECT 1 FROM statements WHERE id = $1::uuid', [id])).length === 1;

  before(async () => {
    pair = await startReplicaPair();
    db = await createReplicatedDatabase(pair);
    t = await startTestLrs(
      postgresAt(urlOf(pair.primary, db), {
        LECTERN_POSTGRES_POOL_SIZE: '4',
        LECTERN_POSTGRES_CONNECT_RETRIES: '0',
        LECTERN_POSTGRES_READ_URLS: urlOf(pair.standby, db),
        LECTERN_POSTGRES_REPLICA_MAX_LAG: '86400000',
      }),
    );
    await until(
      async () => ((await (await t.fetch('/heartbeat', { user: null })).json()) as { replicas?: { state: string }[] }).replicas?.[0]?.state === 'up',
      'the replica is up',
    );
    s = await signIn(t);
  });
  after(async () => {
    await t?.close();
    pair?.standby.destroy();
    pair?.primary.destroy();
  });

  test('replay paused: the list, download and tail come from the standby, their Consistent-Through stops; after resume the statement shows', async () => {
    const a = await post();
    await until(() => onStandby(a.id), 'the standby shows A');
    await until(async () => Date.parse((await list()).through) >= Date.parse(a.stored), 'the console’s Consistent-Through reaches A');

    await pauseReplay(pair.standby);
    let b: { id: string; stored: string };
    try {
      b = await post();
      assert.equal(await onStandby(b.id), false, 'B is on the primary only');
      // A list without B was read on the standby (the primary has B). On a loaded machine a check
      // may time out and the primary answer for a moment: asked again.
      let first!: Awaited<ReturnType<typeof list>>;
      await until(async () => !(first = await list()).text.includes(b.id), 'a console list served by the standby');
      assert.match(first.text, new RegExp(a.id));
      assert.ok(Date.parse(first.through) < Date.parse(b.stored), 'its Consistent-Through is before B');
      assert.match(first.text, new RegExp(`<time id="consistent-through" datetime="${first.through}">`), 'the page says it');
      // More writes: the standby's pages keep the same Consistent-Through.
      const c = await post();
      let again!: Awaited<ReturnType<typeof list>>;
      await until(async () => !(again = await list()).text.includes(c.id), 'another list served by the standby');
      assert.equal(again.through, first.through, 'Consistent-Through stops while replay is paused');
      // The download and the live tail read there too.
      let csv!: Awaited<ReturnType<typeof page>>;
      await until(
        async () => !(csv = await page(`/console/statements/download?verb=${encodeURIComponent(VERB)}&format=csv&fields=id`)).text.includes(b.id),
        'a download served by the standby',
      );
      assert.match(csv.text, new RegExp(a.id));
      assert.equal(csv.through, first.through);
      const since = encodeURIComponent(new Date(Date.parse(a.stored) - 1).toISOString());
      let tail!: Awaited<ReturnType<typeof page>>;
      await until(async () => !(tail = await page(`/console/statements/tail?verb=${encodeURIComponent(VERB)}&after=${since}`)).text.includes(b.id), 'a tail served by the standby');
      assert.match(tail.text, new RegExp(a.id));
      // One statement's page: what the standby lacks, the primary answers.
      assert.match((await page(`/console/statements/${b.id}`)).text, new RegExp(b.id));
    } finally {
      await resumeReplay(pair.standby);
    }
    await until(async () => (await list()).text.includes(b.id), 'B in the console’s list after resume');
    await until(async () => Date.parse((await list()).through) >= Date.parse(b.stored), 'Consistent-Through moves on past B');
  });
});
