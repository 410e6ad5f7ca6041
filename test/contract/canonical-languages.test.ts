/**
 * `format=canonical` with a long Accept-Language (hardening round 2, item 3), through HTTP, on
 * every backend: a writer with only `statements/write` and `statements/read/mine` reads its own
 * statement of 48,000 language-map keys with a header of 3,876 ranges. Another client's request
 * is answered while that statement is rewritten (the rewrite gives the event loop back every
 * CANONICAL_KEYS_PER_STEP keys), and only the header's first ACCEPT_LANGUAGE_MAX_RANGES ranges
 * count. The order of events is recorded through the store object the server uses, never timed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Store } from '../../src/store/types.ts';
import { CANONICAL_KEYS_PER_STEP } from '../../src/xapi/formats.ts';
import { ACCEPT_LANGUAGE_MAX_RANGES } from '../../src/xapi/languages.ts';
import { BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const WRITER: TestUser = { username: 'writer', password: 'writer-pw', scopes: ['statements/write', 'statements/read/mine'], agent: { mbox: 'mailto:writer@example.com' } };

/** `n` two-letter ranges, none of them `en` or `fr`, comma-separated (3,876 of them: ≈ 11.6 KB). */
function otherRanges(n: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    const tag = String.fromCharCode(97 + (i % 26), 97 + (Math.floor(i / 26) % 26));
    if (tag !== 'en' && tag !== 'fr') out.push(tag);
  }
  return out;
}

type Named = { id: string; definition: { name: Record<string, string>; description: Record<string, string> } };
const activity = (id: string): Named => ({ id, definition: { name: { 'en-US': `name ${id}`, fr: `nom ${id}` }, description: { 'en-US': 'a thing', fr: 'une chose' } } });
/** A statement whose activities have two maps of two keys each. */
const withActivities = (n: number) => {
  const ids = Array.from({ length: n }, (_, i) => `http://example.com/languages/${randomUUID()}/${i}`);
  return statement({ id: randomUUID(), object: activity(ids[0]), context: { contextActivities: { other: ids.slice(1).map(activity) } } });
};

for (const backend of BACKENDS) {
  describe(`format=canonical with a long Accept-Language [${backend.name}]`, () => {
    let t: TestLrs;
    const events: string[] = [];
    /** Called with the id of each statement the server reads by id, once it is read. */
    let onRead: (id: string) => void = () => {};
    before(async () => {
      t = await startTestLrs(backend, { users: [WRITER] });
      // Set on the store object before its first call, read from its prototype (the metrics
      // proxy the server holds wraps a method on first use).
      const store = t.lrs.store;
      const proto = Object.getPrototypeOf(store) as Store;
      store.getStatement = async function (this: Store, ...args: Parameters<Store['getStatement']>) {
        const row = await proto.getStatement.apply(this, args);
        onRead(args[1]);
        return row;
      };
      // Asked right after a single statement's rewrite, for its Consistent-Through header.
      store.consistentThrough = function (this: Store, ...args: Parameters<Store['consistentThrough']>) {
        events.push('rewritten');
        return proto.consistentThrough.apply(this, args);
      };
    });
    after(async () => t?.close());

    const post = async (body: unknown): Promise<string> => {
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', body, { user: WRITER }));
      assert.equal(res.status, 200, await res.clone().text());
      return ((await res.json()) as string[])[0];
    };
    const canonical = (id: string, acceptLanguage: string) =>
      t.fetch(`/xAPI/statements?statementId=${id}&format=canonical`, { user: WRITER, headers: { 'accept-language': acceptLanguage } });

    test('another client is answered while one statement is rewritten for 3,876 ranges; the ranges past the bound are ignored', async () => {
      const activities = 12_000;
      assert.ok((activities * 4) / CANONICAL_KEYS_PER_STEP >= 20, 'the rewrite takes many steps');
      const id = await post(withActivities(activities));
      // `fr` comes after thousands of ranges: ignored, so every map falls back to its first key.
      const header = [...otherRanges(3876), 'fr'].join(',');
      events.length = 0;
      let about: Promise<Response> | undefined;
      onRead = (read) => {
        if (read !== id) return;
        // The rewrite starts now: another client asks for something else meanwhile.
        about = t.fetch('/xAPI/about', { user: null }).then(async (res) => {
          await res.arrayBuffer();
          events.push('about');
          return res;
        });
      };
      const res = await canonical(id, header);
      onRead = () => {};
      assert.equal(res.status, 200);
      assert.ok(about, 'the statement was read by id');
      assert.equal((await about).status, 200);
      assert.deepEqual(events, ['about', 'rewritten'], 'the other client was answered before the rewrite ended');
      const s = (await res.json()) as { object: Named; context: { contextActivities: { other: Named[] } } };
      const all = [s.object, ...s.context.contextActivities.other];
      assert.equal(all.length, activities);
      for (const a of all) {
        assert.deepEqual(Object.keys(a.definition.name), ['en-US']);
        assert.deepEqual(a.definition.description, { 'en-US': 'a thing' });
      }
    });

    test(`the first ${ACCEPT_LANGUAGE_MAX_RANGES} well-formed ranges count, malformed entries do not use up the bound`, async () => {
      const id = await post(withActivities(2));
      const names = async (header: string) => {
        const res = await canonical(id, header);
        assert.equal(res.status, 200);
        const s = (await res.json()) as { object: Named };
        return Object.keys(s.object.definition.name);
      };
      const before = otherRanges(ACCEPT_LANGUAGE_MAX_RANGES - 1);
      assert.deepEqual(await names([...before, 'fr'].join(', ')), ['fr'], 'the last range within the bound');
      assert.deepEqual(await names([...before, 'zz', 'fr'].join(', ')), ['en-US'], 'the first range past the bound');
      assert.deepEqual(await names([...before, 'en_US', 'q=', ';', 'fr'].join(', ')), ['fr'], 'malformed entries are skipped, not counted');
    });
  });
}
