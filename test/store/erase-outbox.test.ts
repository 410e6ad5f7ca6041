/**
 * Erasing statements removes their queued forwarding too: nothing stays queued for a statement
 * that no longer exists, and a later statement taking the same seq is forwarded once.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const TARGET = 'http://127.0.0.1:9/xAPI/statements';
const statement = (id: string): Statement =>
  ({ id, actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } }) as Statement;

for (const backend of storeBackends) {
  describe(`erase and the forwarding outbox [${backend.name}]`, async () => {
    const { store, dispose } = await backend.open({ forwardTargets: [TARGET] });
    after(async () => {
      await store.close();
      await dispose();
    });
    const insert = (id: string) => store.insertStatements('', prepareBatch([statement(id)], { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
    const queued = async () => (await store.outbox.stats()).find((s) => s.target === TARGET)?.queued ?? 0;

    test('deleting a statement deletes its queued forwarding; the next statement is queued once', async () => {
      const first = randomUUID();
      await insert(first);
      assert.equal(await queued(), 1);
      assert.deepEqual(await store.deleteStatements('', [first]), { statements: 1, attachments: 0 });
      assert.equal(await queued(), 0, 'nothing left queued for the erased statement');
      await insert(randomUUID());
      assert.equal(await queued(), 1);
    });
  });
}
