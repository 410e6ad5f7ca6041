/**
 * A statement received again under a stored id (xAPI-Communication §2.1.1.s2.b2-b3, §2.1.2.s2.b4-b5)
 * is compared by xAPI-Data §2.3.1: differences the immutability exceptions allow are a no-op, any
 * other difference a 409; either way nothing changes. Through HTTP, on every backend.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, jsonInit, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';

const base = (): Record<string, unknown> =>
  statement({
    actor: { objectType: 'Group', name: 'Pair', member: [{ mbox: 'mailto:one@Example.COM' }, { mbox: 'mailto:two@example.com' }] },
    verb: { id: 'http://adlnet.gov/expapi/verbs/completed', display: { 'en-US': 'completed' } },
    object: { id: 'http://example.com/activities/immutable', definition: { name: { 'en-US': 'Original name' } } },
    result: { duration: 'PT1H', success: true },
    context: { registration: 'ec531277-b57b-4c15-8d91-d292c5b2b8f7', contextActivities: { parent: { id: 'http://example.com/activities/parent' } } },
    timestamp: '2024-05-01T12:00:00.000Z',
  });

for (const backend of BACKENDS) {
  describe(`statement immutability and comparison [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const post = (body: unknown) => t.fetch('/xAPI/statements', jsonInit('POST', body));
    const put = (id: string, body: unknown) => t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', body));
    const getText = async (id: string) => (await t.fetch(`/xAPI/statements?statementId=${id}`)).text();

    const same: [string, (s: Record<string, unknown>) => Record<string, unknown>][] = [
      ['the verb display differs', (s) => ({ ...s, verb: { id: 'http://adlnet.gov/expapi/verbs/completed', display: { fr: 'a terminé' } } })],
      ['the activity definition differs', (s) => ({ ...s, object: { id: 'http://example.com/activities/immutable', definition: { name: { fr: 'Autre nom' } } } })],
      ['the timestamp is written in another time zone', (s) => ({ ...s, timestamp: '2024-05-01T14:00:00+02:00' })],
      [
        'group members come in another order',
        (s) => ({ ...s, actor: { objectType: 'Group', name: 'Pair', member: [{ mbox: 'mailto:two@example.com' }, { mbox: 'mailto:one@example.com' }] } }),
      ],
      [
        'the single context activity is an array',
        (s) => ({ ...s, context: { registration: 'EC531277-B57B-4C15-8D91-D292C5B2B8F7', contextActivities: { parent: [{ id: 'http://example.com/activities/parent' }] } } }),
      ],
      ['objectType is written out', (s) => ({ ...s, object: { objectType: 'Activity', id: 'http://example.com/activities/immutable' } })],
      [
        'attachments differ',
        (s) => ({
          ...s,
          attachments: [{ usageType: 'http://example.com/u', display: { en: 'x' }, contentType: 'text/plain', length: 1, sha2: 'a'.repeat(64), fileUrl: 'http://example.com/x' }],
        }),
      ],
      ['the authority and stored the client sent differ', (s) => ({ ...s, authority: { mbox: 'mailto:someone@example.com' }, stored: '2000-01-01T00:00:00Z' })],
      ['the version is given as the 1.0.0 the LRS assigned', (s) => ({ ...s, version: '1.0.0' })],
    ];
    for (const [name, change] of same) {
      test(`the same statement again, where ${name}: accepted, nothing changes`, async () => {
        const id = randomUUID();
        assert.equal((await post({ ...base(), id })).status, 200);
        const before = await getText(id);
        const again = change({ ...base(), id: id.toUpperCase() });
        const res = await post(again);
        assert.equal(res.status, 200, await res.clone().text());
        assert.deepEqual(await res.json(), [id]);
        assert.equal((await put(id, again)).status, 204);
        assert.equal(await getText(id), before, 'the stored statement is untouched');
      });
    }

    const different: [string, (s: Record<string, unknown>) => Record<string, unknown>][] = [
      ['the result differs', (s) => ({ ...s, result: { duration: 'PT1H', success: false } })],
      ['the duration is written differently (PT60M)', (s) => ({ ...s, result: { duration: 'PT60M', success: true } })],
      [
        'the local part of an mbox differs in case',
        (s) => ({ ...s, actor: { objectType: 'Group', name: 'Pair', member: [{ mbox: 'mailto:ONE@example.com' }, { mbox: 'mailto:two@example.com' }] } }),
      ],
      ['the timestamp is another instant', (s) => ({ ...s, timestamp: '2024-05-01T12:00:00.001Z' })],
      ['a version other than the assigned one is given', (s) => ({ ...s, version: '1.0.3' })],
    ];
    for (const [name, change] of different) {
      test(`a different statement under a stored id, where ${name}: 409, nothing changes`, async () => {
        const id = randomUUID();
        assert.equal((await put(id, base())).status, 204);
        const before = await getText(id);
        const res = await post([statement({ id: randomUUID() }), change({ ...base(), id })]);
        assert.equal(res.status, 409);
        assert.match((await res.json()).detail, new RegExp(id));
        assert.equal((await put(id, change(base()))).status, 409);
        assert.equal(await getText(id), before);
      });
    }

    test('a re-sent statement does not update the canonical activity definition', async () => {
      const id = randomUUID();
      const activity = `http://example.com/activities/${randomUUID()}`;
      assert.equal((await put(id, statement({ object: { id: activity, definition: { name: { 'en-US': 'First' } } } }))).status, 204);
      assert.equal((await put(id, statement({ object: { id: activity, definition: { name: { fr: 'Deuxième' } } } }))).status, 204);
      const got = await (await t.fetch(`/xAPI/statements?statementId=${id}&format=canonical`, { headers: { 'accept-language': 'fr' } })).json();
      assert.deepEqual(got.object.definition.name, { 'en-US': 'First' });
    });

    test('ids are UUIDs in any case: kept lower-case, found in any case', async () => {
      const id = randomUUID();
      const res = await post(statement({ id: id.toUpperCase() }));
      assert.deepEqual(await res.json(), [id]);
      for (const asked of [id, id.toUpperCase()]) {
        const got = await t.fetch(`/xAPI/statements?statementId=${asked}`);
        assert.equal(got.status, 200);
        assert.equal((await got.json()).id, id);
      }
      const put1 = randomUUID();
      assert.equal((await put(put1.toUpperCase(), statement({ id: put1 }))).status, 204, 'statementId and id compared case-insensitively');
      assert.equal((await (await t.fetch(`/xAPI/statements?statementId=${put1}`)).json()).id, put1);
    });

    test('a batch repeating an id in another case is a 400', async () => {
      const id = randomUUID();
      const res = await post([statement({ id }), statement({ id: id.toUpperCase() })]);
      assert.equal(res.status, 400);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);
    });
  });
}
