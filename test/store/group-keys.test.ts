/**
 * Dictionary ids and group commit: requests written in one transaction, one of them rolled back
 * (a conflict), must not take a key row that another request of the group — or a later one, by a
 * cached id — relies on. Both requests below introduce the same new agent, verb and activity.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import type { InsertOutcome } from '../../src/store/types.ts';
import type { StatementQuery } from '../../src/xapi/query.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const AUTHORITY = { mbox: 'mailto:auth@example.com' };

for (const backend of storeBackends) {
  describe(`new keys in a group with a rolled-back request [${backend.name}]`, async () => {
    const { store, dispose } = await backend.open();
    after(async () => {
      await store.close();
      await dispose();
    });
    const made = (agent: string, verb: string, activity: string, id = randomUUID()): Statement =>
      ({ id, actor: { mbox: agent }, verb: { id: verb }, object: { id: activity } }) as Statement;
    const insert = (statements: Statement[]) => store.insertStatements('', prepareBatch(statements, AUTHORITY, '1.0.3'), []);
    const ids = async (filter: StatementQuery['filter']) =>
      (await store.queryStatements('', { limit: 10, maxBytes: 4 * 1024 * 1024, ascending: true, format: 'exact', attachments: false, filter })).rows.map(
        (r) => (JSON.parse(r.json) as Statement).id,
      );

    test('the committed request is found by its new keys; the conflicting one left nothing', async () => {
      const taken = made('mailto:first@example.com', 'http://example.com/verbs/first', 'http://example.com/first');
      await insert([taken]);
      const agent = `mailto:new-${randomUUID()}@example.com`;
      const verb = `http://example.com/verbs/${randomUUID()}`;
      const activity = `http://example.com/activities/${randomUUID()}`;
      // Issued together: one group on SQLite. The first conflicts (same id, other content) after its new statement.
      const conflicting = insert([made(agent, verb, activity), { ...taken, verb: { id: verb } }]);
      const fine = made(agent, verb, activity);
      const ok = insert([fine]);
      const [a, b] = await Promise.allSettled([conflicting, ok]);
      assert.equal(a.status, 'rejected');
      assert.equal((b as PromiseFulfilledResult<InsertOutcome>).value?.inserted, 1);
      const rel = { relatedAgents: false, relatedActivities: false };
      for (const f of [{ agent: `mbox:${agent}` }, { verb }, { activity }]) assert.deepEqual(await ids({ ...rel, ...f }), [fine.id], JSON.stringify(f));
      // A later write of the same keys (cached ids on SQLite) is found too.
      const later = made(agent, verb, activity);
      await insert([later]);
      assert.deepEqual(await ids({ ...rel, agent: `mbox:${agent}`, verb, activity }), [fine.id, later.id]);
    });

    test('a definition brought by the rolled-back request is not kept, and counts when it comes again', async () => {
      const taken = made('mailto:second@example.com', 'http://example.com/verbs/second', 'http://example.com/second');
      await insert([taken]);
      const activity = `http://example.com/activities/${randomUUID()}`;
      const defined = (name: string): Statement =>
        ({ ...made('mailto:d@example.com', 'http://example.com/verbs/d', activity), object: { id: activity, definition: { name: { en: name } } } }) as Statement;
      await insert([defined('first')]);
      // Issued together: one group on SQLite; the conflicting request's definition is rolled back.
      const [a, b] = await Promise.allSettled([
        insert([defined('rolled back'), { ...taken, result: { success: true } }]),
        insert([made('mailto:e@example.com', 'http://example.com/verbs/e', activity)]),
      ]);
      assert.equal(a.status, 'rejected');
      assert.equal(b.status, 'fulfilled');
      assert.deepEqual((await store.getActivityDefinitions('', [activity])).get(activity), { name: { en: 'first' } });
      // The same definition again, now in a request that is stored: merged (the rolled-back one was not remembered as merged).
      await insert([defined('rolled back')]);
      assert.deepEqual((await store.getActivityDefinitions('', [activity])).get(activity), { name: { en: 'rolled back' } });
      // Back to the first, then the second again: each change is kept (the cache follows the table).
      await insert([defined('first')]);
      await insert([defined('rolled back')]);
      assert.deepEqual((await store.getActivityDefinitions('', [activity])).get(activity), { name: { en: 'rolled back' } });
    });
  });
}
