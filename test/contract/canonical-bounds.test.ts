/**
 * `format=canonical` on statements naming more activities than one response reads definitions
 * for (issue 27 item 3), through HTTP, on every backend: answered, the first
 * CANONICAL_DEFINITIONS_MAX activities canonical and the rest as the statement gave them, the
 * store asked once for at most that many, another client answered meanwhile. Work is counted
 * through the store object the server uses, never timed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Store } from '../../src/store/types.ts';
import { CANONICAL_DEFINITIONS_MAX } from '../../src/xapi/formats.ts';
import { BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const user = (username: string, scopes: string[]): TestUser => ({ username, password: `${username}-pw`, scopes, agent: { mbox: `mailto:${username}@example.com` } });
const DEFINER = user('definer', ['statements/write', 'define']);
/** Writes without `define`: its definitions are kept in its statements only. */
const WRITER = user('writer', ['statements/write']);
const READER = user('reader', ['statements/read']);
const MINE = user('mine', ['statements/read/mine', 'statements/write']);

type Activity = { id: string; definition?: { name: Record<string, string> } };

for (const backend of BACKENDS) {
  describe(`format=canonical reads a bounded number of definitions [${backend.name}]`, () => {
    let t: TestLrs;
    /** getActivityDefinitions as the server calls it: the number of ids of each call. */
    const calls: number[] = [];
    before(async () => {
      t = await startTestLrs(backend, { users: [DEFINER, WRITER, READER, MINE] });
      // Set on the store object before its first call, read from its prototype: the metrics
      // proxy the server holds wraps a method on first use (a read through it would wrap the original).
      const store = t.lrs.store;
      const original = (Object.getPrototypeOf(store) as Store).getActivityDefinitions;
      store.getActivityDefinitions = function (this: Store, tenant: string, ids: string[]) {
        calls.push(ids.length);
        return original.call(this, tenant, ids);
      };
    });
    after(async () => t?.close());

    test('more activities than the cap: 200, the first ones canonical, the rest their own; one bounded store call', async () => {
      const base = `http://example.com/activities/many-${randomUUID()}/`;
      const ids = Array.from({ length: CANONICAL_DEFINITIONS_MAX + 300 }, (_, i) => `${base}${i}`);
      const withName =
        (name: string) =>
        (id: string): Activity => ({ id, definition: { name: { en: name } } });
      const shaped = (make: (id: string) => Activity) => statement({ object: make(ids[0]), context: { contextActivities: { other: ids.slice(1).map(make) } } });
      const post = async (u: TestUser, body: unknown) => {
        const res = await t.fetch('/xAPI/statements', jsonInit('POST', body, { user: u }));
        assert.equal(res.status, 200, await res.clone().text());
        return ((await res.json()) as string[])[0];
      };
      await post(DEFINER, shaped(withName('canonical')));
      const own = await post(WRITER, shaped(withName('own')));

      calls.length = 0;
      // Another client's read while the canonical one is in flight is answered too.
      const [res, other] = await Promise.all([
        t.fetch(`/xAPI/statements?statementId=${own}&format=canonical`, { user: READER }),
        t.fetch('/xAPI/statements?limit=1', { user: READER }),
      ]);
      assert.equal(other.status, 200);
      assert.equal(res.status, 200);
      const s = await res.json();
      const names = [s.object as Activity, ...(s.context.contextActivities.other as Activity[])].map((a) => a.definition?.name.en);
      assert.equal(names.length, ids.length);
      assert.deepEqual(names.slice(0, CANONICAL_DEFINITIONS_MAX), Array(CANONICAL_DEFINITIONS_MAX).fill('canonical'));
      assert.deepEqual(names.slice(CANONICAL_DEFINITIONS_MAX), Array(ids.length - CANONICAL_DEFINITIONS_MAX).fill('own'));
      assert.deepEqual(calls, [CANONICAL_DEFINITIONS_MAX], 'one call, for the first CANONICAL_DEFINITIONS_MAX ids only');

      // A page of such statements: still one call for at most the cap.
      calls.length = 0;
      const page = await t.fetch(`/xAPI/statements?limit=2&format=canonical&activity=${encodeURIComponent(ids[0])}`, { user: READER });
      assert.equal(page.status, 200);
      assert.equal((await page.json()).statements.length, 2);
      assert.deepEqual(calls, [CANONICAL_DEFINITIONS_MAX]);
    });

    test('a reader restricted to its own statements costs no definition read at all', async () => {
      const ids = Array.from({ length: 2000 }, (_, i) => `http://example.com/activities/mine-${i}`);
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', statement({ context: { contextActivities: { other: ids.map((id) => ({ id })) } } }), { user: MINE }));
      assert.equal(res.status, 200);
      calls.length = 0;
      const page = await t.fetch('/xAPI/statements?limit=10&format=canonical', { user: MINE });
      assert.equal(page.status, 200);
      assert.deepEqual(calls, []);
    });
  });
}
