/**
 * A replay stores each kept statement once, through the admin API and the console on every
 * backend: two replays of "all" at once (both calls in flight together, or the console's Replay
 * all clicked twice) share the rejections out, the second finding the first's `claimed`; an id
 * listed three times is replayed once; a replay cut after storing, before removing its rejection,
 * run again re-sends the same ids (derived from the rejection: nothing stored twice); and a claim
 * left by a replay that died holds only until it expires.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { replayedStatementId } from '../../src/ops/rejections.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { signIn } from '../console/sign-in.ts';
import { countRows, runSql } from '../lifecycle/helpers.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };

type Json = Record<string, unknown>;
interface Replayed {
  results: { id: string; outcome: string }[];
  stored: number;
  claimed: number;
}

for (const backend of BACKENDS) {
  describe(`a replay stores each kept statement once (${backend.name})`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, OPERATOR] });
    });
    after(() => t?.close());

    /** `n` batches of two statements without ids, refused under strict validation (a property xAPI does not define): their kept rejections. */
    const refuse = async (n: number): Promise<string[]> => {
      const before = new Set((await t.lrs.store.listRejections({ limit: 10_000 })).map((r) => r.id));
      for (let i = 0; i < n; i++) {
        const res = await t.fetch('/xAPI/statements', jsonInit('POST', [statement({ lms_course_code: `BIO-${i}` }), statement({ result: { response: `r${i}` } })]));
        assert.equal(res.status, 400);
      }
      await t.lrs.rejections.flush();
      const ids = (await t.lrs.store.listRejections({ limit: 10_000 })).map((r) => r.id).filter((id) => !before.has(id));
      assert.equal(ids.length, n);
      return ids;
    };
    const replay = async (body: Json, status = 200): Promise<Replayed> => {
      const res = await t.fetch('/admin/api/rejections/replay', jsonInit('POST', body, { user: OPERATOR, version: null }));
      const text = await res.text();
      assert.equal(res.status, status, text);
      return JSON.parse(text) as Replayed;
    };
    const kept = async () => (await t.lrs.store.listRejections({ limit: 10_000 })).length;

    test('two replays of all at once: every statement stored once, what one holds the other leaves (claimed)', async () => {
      const ids = await refuse(20);
      const statements = await countRows(t, 'statements');
      const both = await Promise.all([replay({ all: true, validation: 'lax' }), replay({ all: true, validation: 'lax' })]);
      assert.equal(await countRows(t, 'statements'), statements + 40, 'two statements per rejection, once');
      const stored = both.flatMap((r) => r.results.filter((x) => x.outcome === 'stored').map((x) => x.id));
      assert.deepEqual(stored.sort(), [...ids].sort(), 'each rejection stored by one replay');
      for (const r of both) {
        assert.deepEqual(
          r.results.filter((x) => x.outcome !== 'stored' && x.outcome !== 'claimed'),
          [],
        );
        assert.equal(r.claimed, r.results.filter((x) => x.outcome === 'claimed').length);
      }
      assert.equal(await kept(), 0);
    });

    test('an id listed three times is replayed once', async () => {
      const [id] = await refuse(1);
      const statements = await countRows(t, 'statements');
      const r = await replay({ ids: [id, id, id], validation: 'lax' });
      assert.deepEqual(
        r.results.map((x) => [x.id, x.outcome]),
        [[id, 'stored']],
      );
      assert.equal(await countRows(t, 'statements'), statements + 2);
      const [, start] = await t.lrs.store.listAudit({ action: 'rejections.replay', limit: 2 });
      assert.deepEqual(start.details, { phase: 'start', ids: [id], validation: 'lax' });
    });

    test('a replay cut after storing, before removing its rejection: run again, it sends the same ids and stores nothing twice', async () => {
      const [id] = await refuse(1);
      const rejection = (await t.lrs.store.getRejection(id))!;
      const statements = await countRows(t, 'statements');
      const sqlite = t.config.backend === 'sqlite';
      await runSql(
        t,
        sqlite
          ? ["CREATE TRIGGER keep_rejections BEFORE DELETE ON rejections BEGIN SELECT RAISE(ABORT, 'kept'); END"]
          : [
              "CREATE FUNCTION keep_rejections() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'kept'; END $$",
              'CREATE TRIGGER keep_rejections BEFORE DELETE ON rejections FOR EACH ROW EXECUTE FUNCTION keep_rejections()',
            ],
      );
      try {
        const res = await t.fetch('/admin/api/rejections/replay', jsonInit('POST', { ids: [id], validation: 'lax' }, { user: OPERATOR, version: null }));
        assert.equal(res.status, 500, await res.text());
      } finally {
        await runSql(t, sqlite ? ['DROP TRIGGER keep_rejections'] : ['DROP TRIGGER keep_rejections ON rejections', 'DROP FUNCTION keep_rejections()']);
      }
      assert.equal(await countRows(t, 'statements'), statements + 2, 'stored, its rejection kept');
      const [failed] = await t.lrs.store.listAudit({ action: 'rejections.replay', limit: 1 });
      assert.equal(failed.details.failed, true, 'the end entry says the replay failed');

      assert.deepEqual(
        (await replay({ ids: [id], validation: 'lax' })).results.map((x) => x.outcome),
        ['stored'],
      );
      assert.equal(await countRows(t, 'statements'), statements + 2, 'nothing stored twice');
      for (const i of [0, 1]) {
        const res = await t.fetch(`/xAPI/statements?statementId=${replayedStatementId(rejection, i)}`);
        assert.equal(res.status, 200, `statement ${i} under the id its rejection gives it`);
      }
      assert.equal(await kept(), 0);
    });

    test('a claim left by a replay that died: claimed until it expires, then replayed', async () => {
      const [id] = await refuse(1);
      await runSql(t, [`UPDATE rejections SET claim = 'died', claimed_until_ms = ${Date.now() + 600_000} WHERE id = ${id}`]);
      const held = await replay({ ids: [id], validation: 'lax' });
      assert.deepEqual([held.results, held.stored, held.claimed], [[{ id, outcome: 'claimed' }], 0, 1]);
      assert.equal(await kept(), 1, 'left as it was');
      await runSql(t, [`UPDATE rejections SET claimed_until_ms = ${Date.now() - 1} WHERE id = ${id}`]);
      assert.deepEqual((await replay({ ids: [id], validation: 'lax' })).results, [{ id, outcome: 'stored' }]);
      assert.equal(await kept(), 0);
    });

    test("the console's Replay all clicked twice: every statement stored once", async () => {
      await refuse(20);
      const statements = await countRows(t, 'statements');
      const s = await signIn(t, OPERATOR);
      const click = async () => {
        const res = await fetch(`${t.url}/console/rejections/replay`, {
          method: 'POST',
          redirect: 'manual',
          headers: { cookie: s.cookie, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ csrf: s.csrf, all: 'on', validation: 'lax' }),
        });
        const page = await res.text();
        assert.equal(res.status, 200, page);
        const m = /(\d+) replayed as lax: (\d+) stored/.exec(page);
        assert.ok(m, page);
        return Number(m[2]);
      };
      const [first, second] = await Promise.all([click(), click()]);
      assert.equal(first + second, 20);
      assert.equal(await countRows(t, 'statements'), statements + 40);
      assert.equal(await kept(), 0);
    });
  });
}
