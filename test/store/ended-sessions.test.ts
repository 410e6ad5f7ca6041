/**
 * The console's ended sessions on every backend: a session ended is found by its id; each sign-out
 * deletes the rows of sessions past their own expiry (their cookies are refused then anyway), and
 * only those. (Across processes: test/console/sign-out.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { storeBackends } from '../helpers/stores.ts';

for (const backend of storeBackends) {
  describe(`ended console sessions [${backend.name}]`, async () => {
    const { store, dispose } = await backend.open();
    after(async () => {
      await store.close();
      await dispose();
    });

    test('an ended session is found by its id; ending it twice keeps one row', async () => {
      assert.equal(await store.sessionEnded('s-1'), false);
      await store.endSession('s-1', 10_000, 1_000);
      await store.endSession('s-1', 10_000, 2_000);
      assert.equal(await store.sessionEnded('s-1'), true);
      assert.equal(await store.sessionEnded('s-2'), false);
    });

    test('a sign-out deletes the rows of sessions past their expiry, and keeps the others', async () => {
      await store.endSession('old', 20_000, 15_000);
      await store.endSession('later', 40_000, 15_000);
      assert.equal(await store.sessionEnded('old'), true);
      await store.endSession('now', 60_000, 20_000);
      assert.equal(await store.sessionEnded('old'), false, 'past its expiry: deleted');
      assert.equal(await store.sessionEnded('s-1'), false, 'past its expiry: deleted');
      assert.equal(await store.sessionEnded('later'), true);
      assert.equal(await store.sessionEnded('now'), true);
    });
  });
}
