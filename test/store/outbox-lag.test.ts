/**
 * The outbox's oldest queued statement per target (what the console's forwarding lag is measured
 * from): the statement of the lowest queued seq, its `stored` time; nothing for a target once its
 * queue is empty. On every store backend.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const [A, B] = ['http://127.0.0.1:9/a/xAPI/statements', 'http://127.0.0.1:9/b/xAPI/statements'];
const statement = (id: string): Statement =>
  ({ id, actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } }) as Statement;

for (const backend of storeBackends) {
  describe(`the outbox's oldest queued statement [${backend.name}]`, async () => {
    const { store, dispose } = await backend.open({ forwardTargets: [A, B] });
    after(async () => {
      await store.close();
      await dispose();
    });
    const insert = async (tenant: string) => {
      const id = randomUUID();
      await store.insertStatements(tenant, prepareBatch([statement(id)], { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
      const row = await store.getStatement(tenant, id, false);
      return { id, storedMs: row!.storedMs };
    };

    test('per target, the first statement still queued; none once delivered', async () => {
      assert.deepEqual(await store.outbox.oldestQueued(), []);
      const first = await insert('');
      await insert('b');
      const byTarget = (rows: { target: string; storedMs: number }[]) => Object.fromEntries(rows.map((r) => [r.target, r.storedMs]));
      assert.deepEqual(byTarget(await store.outbox.oldestQueued()), { [A]: first.storedMs, [B]: first.storedMs });
      // A delivers the first; B still waits for it.
      const claimed = await store.outbox.claim(A, 'test', 1, 60_000);
      await store.outbox.settle(A, 'test', { delivered: claimed.map((c) => c.id) });
      const later = byTarget(await store.outbox.oldestQueued());
      assert.equal(later[B], first.storedMs);
      assert.ok(later[A] >= first.storedMs);
      const rest = await store.outbox.claim(A, 'test', 10, 60_000);
      await store.outbox.settle(A, 'test', { delivered: rest.map((c) => c.id) });
      assert.deepEqual(Object.keys(byTarget(await store.outbox.oldestQueued())), [B]);
    });
  });
}
