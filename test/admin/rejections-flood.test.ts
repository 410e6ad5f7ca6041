/**
 * A flood of refused writes shares the kept rejections fairly (hardening round 2, item 4), on
 * every backend, through HTTP: one credential sends thousands of refused writes, many at once,
 * while another credential of its store and one of another store send a few before, during and
 * after it. Every one of the few is kept (listed through the admin API): the keeper's queues
 * drop the flooder's own (counted in /metrics) and the store's trim to LECTERN_REJECTIONS_MAX
 * evicts the flooder's oldest, not the quiet producers'.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, OTHER, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const MAX = 50;
const FLOOD = 2500;
const AT_ONCE = 64;

const refuse = async (lrs: TestLrs, user: TestUser, mark: string): Promise<void> => {
  const res = await lrs.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'not an iri' }, result: { response: mark } }), { user }));
  assert.equal(res.status, 400);
};

async function rejectionCounts(lrs: TestLrs): Promise<Record<'kept' | 'dropped' | 'failed', number>> {
  const text = await (await lrs.fetch('/metrics')).text();
  const of = (outcome: string) => Number(new RegExp(`^lectern_rejections_total\\{outcome="${outcome}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { kept: of('kept'), dropped: of('dropped'), failed: of('failed') };
}

for (const backend of BACKENDS) {
  describe(`kept rejections under one credential's flood (${backend.name})`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend, { users: [ADMIN, OTHER, TENANT_B, OPERATOR], env: { LECTERN_REJECTIONS_MAX: String(MAX) } });
    });
    after(() => lrs?.close());

    test('the few refused writes of another credential of the store and of another store are all kept', async () => {
      const quiet = async (round: string) => {
        for (let i = 0; i < 2; i++) await Promise.all([refuse(lrs, OTHER, `${round}${i}`), refuse(lrs, TENANT_B, `${round}${i}`)]);
      };
      await quiet('before');
      let sent = 0;
      const during: Promise<void>[] = [];
      // AT_ONCE requests in flight at every moment; the quiet ones go out a third and two thirds in.
      await Promise.all(
        Array.from({ length: AT_ONCE }, async () => {
          while (sent < FLOOD) {
            const n = ++sent;
            if (n === Math.floor(FLOOD / 3) || n === Math.floor((2 * FLOOD) / 3)) during.push(quiet(`during${n}-`));
            await refuse(lrs, ADMIN, `flood${n}`);
          }
        }),
      );
      await Promise.all(during);
      await quiet('after');
      await lrs.lrs.rejections.flush();

      const listed = async (target: string) => {
        const res = await lrs.fetch(`/admin/api/rejections?target=${target}&limit=1000`, { user: OPERATOR, version: null });
        assert.equal(res.status, 200);
        return ((await res.json()) as { rejections: { username: string }[] }).rejections;
      };
      const mine = await listed('');
      const quietSent = 2 * 4;
      assert.equal(mine.filter((r) => r.username === OTHER.username).length, quietSent, "every one of the quiet credential's is kept");
      assert.equal((await listed('b')).filter((r) => r.username === TENANT_B.username).length, quietSent, "every one of the other store's is kept");
      assert.equal(mine.length, MAX, 'the store holds LECTERN_REJECTIONS_MAX');
      assert.equal(mine.filter((r) => r.username === ADMIN.username).length, MAX - quietSent, 'the flooder keeps the rest');

      const counts = await rejectionCounts(lrs);
      assert.equal(counts.failed, 0);
      assert.equal(counts.kept + counts.dropped, FLOOD + 2 * quietSent, 'each refused write kept or counted as dropped');
    });
  });
}
