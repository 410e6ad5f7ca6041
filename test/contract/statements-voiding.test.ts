/** Voiding (xAPI-Data §2.3.2, xAPI-Communication §2.1.4), through HTTP, on every backend. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { REPLICA_BACKENDS, jsonInit, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';

const VOIDED = 'http://adlnet.gov/expapi/verbs/voided';
const voiding = (target: string, extra: Record<string, unknown> = {}) =>
  statement({ actor: { mbox: 'mailto:admin@example.com' }, verb: { id: VOIDED, display: { 'en-US': 'voided' } }, object: { objectType: 'StatementRef', id: target }, ...extra });

for (const backend of REPLICA_BACKENDS) {
  describe(`voiding [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const post = (body: unknown) => t.fetch('/xAPI/statements', jsonInit('POST', body));
    const put = (id: string, body: unknown) => t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', body));
    const byId = (id: string) => t.fetch(`/xAPI/statements?statementId=${id}`);
    const byVoidedId = (id: string) => t.fetch(`/xAPI/statements?voidedStatementId=${id}`);
    const ids = async (qs: string): Promise<string[]> => {
      const res = await t.fetch(`/xAPI/statements?${qs}`);
      assert.equal(res.status, 200, qs);
      return (await res.json()).statements.map((s: { id: string }) => s.id);
    };
    const activity = () => `http://example.com/activities/${randomUUID()}`;

    test('voiding by POST: the target is only found by voidedStatementId, and no longer in queries', async () => {
      const act = activity();
      const target = randomUUID();
      assert.equal((await post(statement({ id: target, object: { id: act } }))).status, 200);
      assert.deepEqual(await ids(`activity=${encodeURIComponent(act)}`), [target]);
      assert.equal((await byVoidedId(target)).status, 404, 'not voided yet');

      const v = randomUUID();
      assert.equal((await post(voiding(target, { id: v }))).status, 200);
      const nf = await byId(target);
      assert.equal(nf.status, 404);
      assert.ok(nf.headers.get('x-experience-api-consistent-through'));
      const got = await byVoidedId(target);
      assert.equal(got.status, 200);
      assert.ok(got.headers.get('last-modified'));
      assert.equal((await got.json()).id, target);
      assert.equal((await byVoidedId(v)).status, 404, 'a voiding statement is not voided');
      assert.equal((await byId(v)).status, 200);
      // Only the voiding statement, which targets the matching (voided) one, is left.
      assert.deepEqual(await ids(`activity=${encodeURIComponent(act)}`), [v]);
      assert.ok(!(await ids('limit=0')).includes(target), 'never in an unfiltered query either');
    });

    test('voiding by PUT works the same; voidedStatementId also answers HEAD', async () => {
      const target = randomUUID();
      assert.equal((await put(target, statement())).status, 204);
      const v = randomUUID();
      assert.equal((await put(v, voiding(target))).status, 204);
      assert.equal((await byId(target)).status, 404);
      assert.equal((await byVoidedId(target)).status, 200);
      const head = await t.fetch(`/xAPI/statements?voidedStatementId=${target}`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(await head.text(), '');
    });

    test('a voiding statement cannot be voided: 400, and nothing of the batch is stored', async () => {
      const target = randomUUID();
      const v = randomUUID();
      assert.equal((await post([statement({ id: target }), voiding(target, { id: v })])).status, 200);
      const other = randomUUID();
      const vv = randomUUID();
      const res = await post([statement({ id: other }), voiding(v, { id: vv })]);
      assert.equal(res.status, 400);
      assert.match((await res.json()).detail, /voiding statement/);
      assert.equal((await byId(v)).status, 200, 'the voiding statement stays');
      assert.equal((await byId(vv)).status, 404);
      assert.equal((await byId(other)).status, 404, 'the whole batch is rejected');
      assert.equal((await put(vv, voiding(v))).status, 400, 'by PUT too');
      assert.equal((await byId(vv)).status, 404);
    });

    test('voiding a voiding statement of the same batch is a 400 as well', async () => {
      const a = randomUUID();
      const v1 = randomUUID();
      const v2 = randomUUID();
      const res = await post([statement({ id: a }), voiding(a, { id: v1 }), voiding(v1, { id: v2 })]);
      assert.equal(res.status, 400);
      for (const id of [a, v1, v2]) assert.equal((await byId(id)).status, 404);
    });

    test('voiding an unknown statement is stored and voids nothing; the target arriving later is stored voided', async () => {
      const act = activity();
      const target = randomUUID();
      const v = randomUUID();
      assert.equal((await post(voiding(target, { id: v }))).status, 200);
      assert.equal((await byId(v)).status, 200);
      assert.equal((await byVoidedId(target)).status, 404);

      assert.equal((await put(target, statement({ object: { id: act } }))).status, 204);
      assert.equal((await byId(target)).status, 404, 'arrived voided');
      assert.equal((await byVoidedId(target)).status, 200);
      assert.deepEqual(await ids(`activity=${encodeURIComponent(act)}`), [v]);
      // Sending it again is still the same statement: a no-op, not a conflict.
      assert.equal((await put(target, statement({ object: { id: act } }))).status, 204);
    });

    test('target and voiding statement in one batch, in either order', async () => {
      for (const order of ['target first', 'voiding first']) {
        const target = randomUUID();
        const v = randomUUID();
        const batch = [statement({ id: target }), voiding(target, { id: v })];
        if (order === 'voiding first') batch.reverse();
        assert.equal((await post(batch)).status, 200, order);
        assert.equal((await byId(target)).status, 404, order);
        assert.equal((await byVoidedId(target)).status, 200, order);
      }
    });

    test('a statement is voided only by the voided verb: another StatementRef to it voids nothing', async () => {
      const target = randomUUID();
      assert.equal((await put(target, statement())).status, 204);
      const comment = statement({ verb: { id: 'http://example.com/verbs/commented' }, object: { objectType: 'StatementRef', id: target } });
      assert.equal((await post(comment)).status, 200);
      assert.equal((await byId(target)).status, 200);
      assert.equal((await byVoidedId(target)).status, 404);
    });

    test('a voiding statement must reference a StatementRef: 400', async () => {
      const res = await post(statement({ verb: { id: VOIDED }, object: { id: 'http://example.com/activities/a' } }));
      assert.equal(res.status, 400);
    });

    test('paging respects voiding at once: a statement voided between two pages is not on the next one', async () => {
      const verb = `http://example.com/verbs/${randomUUID()}`;
      const posted: string[] = await (await post(Array.from({ length: 6 }, () => statement({ verb: { id: verb } })))).json();
      const first = await (await t.fetch(`/xAPI/statements?verb=${encodeURIComponent(verb)}&limit=3`)).json();
      assert.deepEqual(
        first.statements.map((s: { id: string }) => s.id),
        posted.slice(3).reverse(),
      );
      assert.ok(first.more);
      // Void one from the next page.
      assert.equal((await post(voiding(posted[1]))).status, 200);
      const second = await (await t.fetch(`/xAPI/statements?${first.more.split('?')[1]}`)).json();
      assert.deepEqual(
        second.statements.map((s: { id: string }) => s.id),
        [posted[2], posted[0]],
      );
      assert.equal(second.more, '');
    });
  });
}
