/** Unit tests of the statement insert rules (src/xapi/insert.ts), the one decision both backends write. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { LrsError } from '../../src/errors.ts';
import { type KnownStatement, planInsert, rowsToRead } from '../../src/xapi/insert.ts';
import { prepareBatch, stamp } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';

const AUTH: Actor = { mbox: 'mailto:admin@example.com' };
const STORED = '2024-01-01T00:00:00.000Z';
const VOIDED = 'http://adlnet.gov/expapi/verbs/voided';
const make = (extra: Partial<Statement> = {}): Statement =>
  ({ id: randomUUID(), actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/o' }, ...extra }) as Statement;
const voiding = (target: string) => make({ verb: { id: VOIDED }, object: { objectType: 'StatementRef', id: target } });
const known = (...entries: [Statement, boolean][]) =>
  new Map<string, KnownStatement>(entries.map(([s, isVoiding]) => [s.id!, { isVoiding, statement: stamp(prepareBatch([s], AUTH, '1.0.3')[0], STORED) }]));
const kind = (fn: () => unknown) => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return (err as LrsError).kind;
  }
};

describe('planInsert', () => {
  test('new statements are stored, stamped with the default version of their request', () => {
    const a = make();
    for (const [v, version] of [['1.0.3', '1.0.0'], ['2.0.0', '2.0.0']] as const) {
      const plan = planInsert(prepareBatch([a], AUTH, v), [], new Map(), new Set(), STORED);
      assert.deepEqual(plan.outcome, { ids: [a.id], inserted: 1 });
      assert.equal(plan.fresh[0].full.version, version);
      assert.equal(plan.fresh[0].full.stored, STORED);
    }
  });

  test('a stored id: no-op when the same statement, 409 when not', () => {
    const a = make();
    const batch = prepareBatch([a], AUTH, '1.0.3');
    assert.deepEqual(planInsert(batch, [], known([a, false]), new Set(), STORED).outcome, { ids: [a.id], inserted: 0 });
    const changed = prepareBatch([{ ...a, object: { id: 'http://example.com/other' } }], AUTH, '1.0.3');
    assert.equal(kind(() => planInsert(changed, [], known([a, false]), new Set(), STORED)), 'conflict');
  });

  test('voiding a voiding statement (stored or in the batch) is a 400', () => {
    const target = make();
    const v1 = voiding(target.id!);
    assert.equal(kind(() => planInsert(prepareBatch([voiding(v1.id!)], AUTH, '1.0.3'), [], known([v1, true]), new Set(), STORED)), 'bad_request');
    assert.equal(kind(() => planInsert(prepareBatch([v1, voiding(v1.id!)], AUTH, '1.0.3'), [], new Map(), new Set(), STORED)), 'bad_request');
  });

  test('voided on arrival: by a stored voiding statement, or by one in the batch; unknown targets are fine', () => {
    const a = make();
    const b = make();
    const plan = planInsert(prepareBatch([a, voiding(b.id!), b, voiding(randomUUID())], AUTH, '2.0.0'), [], new Map(), new Set([a.id!]), STORED);
    assert.deepEqual(plan.fresh.map((f) => f.voided), [true, false, true, false]);
    assert.equal(plan.voids.length, 2);
    assert.ok(plan.voids.includes(b.id!));
  });

  test('attachments: only the data a newly stored statement points to', () => {
    const sha2 = 'a'.repeat(64);
    const att = { usageType: 'http://example.com/u', display: { en: 'x' }, contentType: 'text/plain', length: 1, sha2 };
    const a = make({ attachments: [att] });
    const blob = { sha2, contentType: 'text/plain', content: Buffer.from('x') };
    assert.equal(planInsert(prepareBatch([a], AUTH, '1.0.3'), [blob], new Map(), new Set(), STORED).attachments.length, 1);
    assert.equal(planInsert(prepareBatch([a], AUTH, '1.0.3'), [blob], known([a, false]), new Set(), STORED).attachments.length, 0, 're-sent: no orphan');
  });

  test('rowsToRead: the batch ids and the voided targets', () => {
    const a = make();
    const v = voiding(a.id!);
    assert.deepEqual(rowsToRead(prepareBatch([v], AUTH, '1.0.3')).sort(), [v.id!, a.id!].map((x) => x.toLowerCase()).sort());
  });
});
