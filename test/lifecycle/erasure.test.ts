/** The pure erasure rules (src/xapi/erasure.ts): where a person can stand in a statement, and their pseudonym. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mentionsPerson, personKey, pseudonymFor, pseudonymizeStatement } from '../../src/xapi/erasure.ts';
import type { Statement } from '../../src/xapi/types.ts';

const ben = { mbox: 'mailto:ben@example.com' };
const key = personKey(ben)!;
const ann = { mbox: 'mailto:ann@example.com' };
const base = (extra: Record<string, unknown>): Statement =>
  ({ actor: ann, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' }, ...extra }) as unknown as Statement;

test('finds the person in every place an Agent or Group can stand, xAPI 2.0 context agents included', () => {
  const places: Record<string, unknown>[] = [
    { actor: { name: 'Ben', mbox: 'mailto:ben@EXAMPLE.com' } },
    { object: { objectType: 'Agent', ...ben } },
    { authority: { objectType: 'Group', member: [ben, { account: { homePage: 'http://x.example.com', name: 'app' } }] } },
    { context: { instructor: ben } },
    { context: { team: { objectType: 'Group', member: [ann, ben] } } },
    { context: { contextAgents: [{ objectType: 'contextAgent', agent: ben, relevantTypes: ['http://example.com/t'] }] } },
    { context: { contextGroups: [{ objectType: 'contextGroup', group: { objectType: 'Group', member: [ben] } }] } },
    { object: { objectType: 'SubStatement', actor: ann, verb: { id: 'http://example.com/v' }, object: { objectType: 'Agent', ...ben } } },
    { object: { objectType: 'SubStatement', actor: ann, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' }, context: { instructor: ben } } },
  ];
  for (const p of places) {
    const s = base(p);
    assert.ok(mentionsPerson(s, key), JSON.stringify(p));
    const pseudonym = pseudonymFor(key, 'k'.repeat(16));
    const out = pseudonymizeStatement(s, key, pseudonym);
    assert.ok(!mentionsPerson(out, key), JSON.stringify(out));
    assert.ok(JSON.stringify(out).includes(pseudonym.account!.name));
    assert.ok(!JSON.stringify(out).includes('ben@'), JSON.stringify(out));
  }
});

test('the local part of an mbox is case-sensitive, the domain is not; other people are left alone', () => {
  assert.ok(!mentionsPerson(base({ actor: { mbox: 'mailto:Ben@example.com' } }), key));
  assert.ok(!mentionsPerson(base({ context: { extensions: { 'http://example.com/e': ben } } }), key), 'extensions are opaque data');
  const s = base({ context: { instructor: ann } });
  assert.equal(pseudonymizeStatement(s, key, pseudonymFor(key, 'k'.repeat(16))), s, 'unchanged statements are the same object');
});

test('pseudonyms: stable for a key, different across keys and people, not the identifier', () => {
  const a = pseudonymFor(key, 'first-secret-key-1');
  assert.deepEqual(pseudonymFor(key, 'first-secret-key-1'), a);
  assert.notDeepEqual(pseudonymFor(key, 'other-secret-key-2'), a);
  assert.notDeepEqual(pseudonymFor(personKey(ann)!, 'first-secret-key-1'), a);
  assert.match(a.account!.name, /^[0-9a-f]{64}$/);
});
