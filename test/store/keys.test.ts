/**
 * The keys dictionary's searches (src/store/keys.ts) on every backend: a store's verbs,
 * activities and agents containing the typed text, each kind apart from the others, with the
 * names they go by (a verb's display from its newest statement, an activity's canonical name, an
 * agent's name from its newest statement as actor or object), never another store's; exact keys;
 * the typed text's LIKE characters taken literally; a search through more keys than one step
 * reads.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { KEYS_CHUNK, KEYS_MAX, NAMED_STATEMENT_BYTES } from '../../src/store/keys.ts';
import type { Store } from '../../src/store/types.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const AUTHORITY: Actor = { objectType: 'Agent', mbox: 'mailto:authority@example.com' };
const ADLNET = 'http://adlnet.gov/expapi/verbs/';

const made = (s: Partial<Statement>): Statement =>
  ({ id: randomUUID(), actor: { mbox: 'mailto:ben@example.com' }, verb: { id: `${ADLNET}attempted` }, object: { id: 'http://example.com/course' }, ...s }) as Statement;
const write = (store: Store, tenant: string, statements: Partial<Statement>[]) => store.insertStatements(tenant, prepareBatch(statements.map(made), AUTHORITY, '1.0.3'), []);

for (const backend of storeBackends) {
  describe(`the keys dictionary's searches (${backend.name})`, () => {
    let store: Store;
    let dispose: () => Promise<void>;
    before(async () => {
      ({ store, dispose } = await backend.open());
      await write(store, '', [
        { verb: { id: `${ADLNET}passed`, display: { 'en-US': 'old name' } } },
        { actor: { name: 'Ada Lovelace', mbox: 'mailto:ada@example.com' }, verb: { id: `${ADLNET}passed`, display: { 'en-US': 'passed', fr: 'réussi' } } },
        { verb: { id: `${ADLNET}failed` }, object: { id: 'http://example.com/course/quiz_1', definition: { name: { 'en-US': 'The first quiz' } } } },
        { object: { objectType: 'Agent', name: 'Grace', account: { homePage: 'https://lms.example.com', name: 'grace' } } },
        { object: { id: 'http://example.com/100%25-done' } },
        { actor: { objectType: 'Group', name: 'Team', member: [{ name: 'Carl', openid: 'https://id.example.com/carl' }] } },
      ]);
      // A large newest statement: its verb and actor are left unnamed rather than read.
      const big = 'x'.repeat(NAMED_STATEMENT_BYTES);
      await write(store, '', [
        { actor: { name: 'Huge', mbox: 'mailto:huge@example.com' }, verb: { id: 'http://example.com/verbs/bulky', display: { en: 'bulky' } }, result: { response: big } },
      ]);
      // Another store's verb, activity and agent, under names the default store also has in part.
      await write(store, 'b', [{ actor: { name: 'Bea', mbox: 'mailto:bea@example.com' }, verb: { id: `${ADLNET}passed-in-b` }, object: { id: 'http://example.com/course-b' } }]);
    });
    after(() => dispose?.());

    test('verbs containing the text, ignoring case, with the display of their newest statement', async () => {
      assert.deepEqual(await store.findKeys('', { kind: 'verb', contains: 'PASSED', limit: 20 }), [{ key: `${ADLNET}passed`, display: { 'en-US': 'passed', fr: 'réussi' } }]);
      const all = await store.findKeys('', { kind: 'verb', contains: '', limit: 20 });
      assert.deepEqual(
        all.map((k) => k.key),
        [`${ADLNET}attempted`, `${ADLNET}failed`, `${ADLNET}passed`, 'http://example.com/verbs/bulky'],
      );
      assert.equal(all.find((k) => k.key === `${ADLNET}failed`)!.display, undefined, 'no display sent: none');
      assert.equal(all.find((k) => k.key.endsWith('bulky'))!.display, undefined, 'too large a statement is not read');
    });

    test('activities are neither verbs nor agents; their canonical name beside them', async () => {
      const found = await store.findKeys('', { kind: 'activity', contains: 'example.com', limit: 20 });
      assert.deepEqual(found, [
        { key: 'http://example.com/100%25-done' },
        { key: 'http://example.com/course' },
        { key: 'http://example.com/course/quiz_1', display: { 'en-US': 'The first quiz' } },
      ]);
      assert.deepEqual(await store.findKeys('', { kind: 'activity', contains: 'passed', limit: 20 }), [], 'a verb is not an activity');
      assert.deepEqual(await store.findKeys('', { kind: 'activity', contains: 'mailto', limit: 20 }), [], 'an agent is not an activity');
    });

    test('LIKE characters in the text are taken literally', async () => {
      assert.deepEqual(
        (await store.findKeys('', { kind: 'activity', contains: '100%25', limit: 20 })).map((k) => k.key),
        ['http://example.com/100%25-done'],
      );
      assert.deepEqual(await store.findKeys('', { kind: 'activity', contains: 'e%c', limit: 20 }), [], '% is no wildcard');
      assert.deepEqual(
        (await store.findKeys('', { kind: 'activity', contains: 'quiz_', limit: 20 })).map((k) => k.key),
        ['http://example.com/course/quiz_1'],
      );
      assert.deepEqual(await store.findKeys('', { kind: 'activity', contains: 'course_', limit: 20 }), [], '_ is no wildcard');
    });

    test('agents by any part of their identifier, named from their newest statement as actor, object or member', async () => {
      const found = await store.findKeys('', { kind: 'agent', contains: '', limit: 20 });
      assert.deepEqual(found, [
        { key: 'account:["https://lms.example.com","grace"]', name: 'Grace' },
        { key: 'mbox:mailto:ada@example.com', name: 'Ada Lovelace' },
        { key: 'mbox:mailto:authority@example.com' },
        { key: 'mbox:mailto:ben@example.com' },
        { key: 'mbox:mailto:huge@example.com' },
        { key: 'openid:https://id.example.com/carl', name: 'Carl' },
      ]);
      assert.deepEqual(await store.findKeys('', { kind: 'agent', contains: 'ADA@', limit: 20 }), [{ key: 'mbox:mailto:ada@example.com', name: 'Ada Lovelace' }]);
    });

    test('exact keys of a kind; at most the limit; never another store’s', async () => {
      const exact = await store.findKeys('', { kind: 'verb', keys: [`${ADLNET}passed`, `${ADLNET}passed-in-b`, 'http://example.com/course'], limit: 20 });
      assert.deepEqual(exact, [{ key: `${ADLNET}passed`, display: { 'en-US': 'passed', fr: 'réussi' } }]);
      assert.deepEqual(await store.findKeys('', { kind: 'verb', keys: [], limit: 20 }), []);
      assert.equal((await store.findKeys('', { kind: 'agent', contains: '', limit: 2 })).length, 2);
      assert.ok((await store.findKeys('', { kind: 'agent', contains: '', limit: 10_000 })).length <= KEYS_MAX);
      for (const kind of ['verb', 'activity', 'agent'] as const) {
        const keys = (await store.findKeys('', { kind, contains: '', limit: 50 })).map((k) => k.key);
        assert.ok(!keys.some((k) => /-b$|bea@/.test(k)), `${kind}: ${keys.join(' ')}`);
      }
      assert.deepEqual(
        (await store.findKeys('b', { kind: 'verb', contains: 'passed', limit: 20 })).map((k) => k.key),
        [`${ADLNET}passed-in-b`],
      );
      assert.deepEqual(await store.findKeys('nowhere', { kind: 'verb', contains: '', limit: 20 }), []);
    });
  });
}

for (const backend of storeBackends) {
  describe(`a search through more keys than one step reads (${backend.name})`, () => {
    let store: Store;
    let dispose: () => Promise<void>;
    before(async () => {
      ({ store, dispose } = await backend.open());
      for (let i = 0; i < KEYS_CHUNK + 500; i += 1000) {
        const n = Math.min(1000, KEYS_CHUNK + 500 - i);
        await write(
          store,
          '',
          Array.from({ length: n }, (_, j) => ({ actor: { mbox: `mailto:l${String(i + j).padStart(6, '0')}@example.com` } })),
        );
      }
      await write(store, '', [{ actor: { name: 'Zoe', mbox: 'mailto:zoe@example.com' } }]);
    });
    after(() => dispose?.());

    test('a match past the first step is found; the limit holds across steps', async () => {
      assert.deepEqual(await store.findKeys('', { kind: 'agent', contains: 'zoe', limit: 20 }), [{ key: 'mbox:mailto:zoe@example.com', name: 'Zoe' }]);
      assert.deepEqual(await store.findKeys('', { kind: 'agent', contains: 'nobody', limit: 20 }), []);
      // The first step ends at the tenant's 10,000th key (a verb, an activity and the authority sort first): l009996.
      const across = (await store.findKeys('', { kind: 'agent', contains: 'l00999', limit: 20 })).map((k) => k.key);
      assert.deepEqual(
        across,
        Array.from({ length: 10 }, (_, i) => `mbox:mailto:l00999${i}@example.com`),
      );
      const limited = (await store.findKeys('', { kind: 'agent', contains: 'l0099', limit: 50 })).map((k) => k.key);
      assert.equal(limited.length, 50);
      assert.equal(limited[49], 'mbox:mailto:l009949@example.com');
      assert.equal((await store.findKeys('', { kind: 'agent', contains: '@example', limit: 10_000 })).length, KEYS_MAX);
    });
  });
}
