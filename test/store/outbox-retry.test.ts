/**
 * A failed forwarding batch is retried as one: the forwarder gives all its items one delay
 * (src/forwarding/forwarder.ts), and the outbox makes them due at one moment, so the claim that
 * finds the first of them due takes them all (on PostgreSQL each row's due time was read from the
 * clock again, so a claim between two of them split the batch). On every store backend.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import type { OutboxItem } from '../../src/store/types.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const TARGET = 'http://127.0.0.1:9/xAPI/statements';
/** Enough rows that writing their due times takes the database clock past a millisecond. */
const N = 2000;
const statement = (): Statement =>
  ({ id: randomUUID(), actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } }) as Statement;

for (const backend of storeBackends) {
  describe(`a retried forwarding batch [${backend.name}]`, async () => {
    const { store, dispose } = await backend.open({ forwardTargets: [TARGET] });
    after(async () => {
      await store.close();
      await dispose();
    });

    test('its items come due together: the first claim that finds one due takes them all', async () => {
      for (let i = 0; i < N; i += 500) await store.insertStatements('', prepareBatch(Array.from({ length: 500 }, statement), { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
      const batch = await store.outbox.claim(TARGET, 'first', N, 60_000);
      assert.equal(batch.length, N);
      await store.outbox.settle(TARGET, 'first', { retry: batch.map((i) => ({ id: i.id, delayMs: 200, error: 'HTTP 503' })) });
      // Claims back to back from before the delay ends (the deadline only bounds a broken store).
      let again: OutboxItem[] = [];
      for (const end = Date.now() + 60_000; !again.length && Date.now() < end; ) again = await store.outbox.claim(TARGET, 'second', N, 60_000);
      assert.equal(again.length, N, 'the whole batch again, not the part of it due first');
      assert.deepEqual(new Set(again.map((i) => i.id)), new Set(batch.map((i) => i.id)));
      assert.ok(again.every((i) => i.attempts === 1));
    });
  });
}
