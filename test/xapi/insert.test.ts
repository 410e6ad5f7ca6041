/** Unit tests of the statement insert rules (src/xapi/insert.ts), the one decision both backends write. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import type { LrsError } from '../../src/errors.ts';
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
    for (const [v, version] of [
      ['1.0.3', '1.0.0'],
      ['2.0.0', '2.0.0'],
    ] as const) {
      const plan = planInsert(prepareBatch([a], AUTH, v), [], new Map(), new Map(), STORED);
      assert.deepEqual(plan.outcome, { ids: [a.id], inserted: 1 });
      assert.equal(plan.fresh[0].full.version, version);
      assert.equal(plan.fresh[0].full.stored, STORED);
    }
  });

  test('a stored id: no-op when the same statement, 409 when not', () => {
    const a = make();
    const batch = prepareBatch([a], AUTH, '1.0.3');
    assert.deepEqual(planInsert(batch, [], known([a, false]), new Map(), STORED).outcome, { ids: [a.id], inserted: 0 });
    const changed = prepareBatch([{ ...a, object: { id: 'http://example.com/other' } }], AUTH, '1.0.3');
    assert.equal(
      kind(() => planInsert(changed, [], known([a, false]), new Map(), STORED)),
      'conflict',
    );
  });

  test('voiding a voiding statement (stored or in the batch) is a 400', () => {
    const target = make();
    const v1 = voiding(target.id!);
    assert.equal(
      kind(() => planInsert(prepareBatch([voiding(v1.id!)], AUTH, '1.0.3'), [], known([v1, true]), new Map(), STORED)),
      'bad_request',
    );
    assert.equal(
      kind(() => planInsert(prepareBatch([v1, voiding(v1.id!)], AUTH, '1.0.3'), [], new Map(), new Map(), STORED)),
      'bad_request',
    );
  });

  test('voided on arrival: by a stored voiding statement, or by one in the batch; unknown targets are fine', () => {
    const a = make();
    const b = make();
    const plan = planInsert(
      prepareBatch([a, voiding(b.id!), b, voiding(randomUUID())], AUTH, '2.0.0'),
      [],
      new Map(),
      new Map([[a.id!, [{ authorityKey: 'mbox::mailto:someone@example.com', mineOnly: false }]]]),
      STORED,
    );
    assert.deepEqual(
      plan.fresh.map((f) => f.voided),
      [true, false, true, false],
    );
    assert.equal(plan.voids.length, 2);
    assert.ok(plan.voids.includes(b.id!));
  });

  test('attachments: only the data a newly stored statement points to', () => {
    const sha2 = 'a'.repeat(64);
    const att = { usageType: 'http://example.com/u', display: { en: 'x' }, contentType: 'text/plain', length: 1, sha2 };
    const a = make({ attachments: [att] });
    const blob = { sha2, contentType: 'text/plain', content: Buffer.from('x') };
    assert.equal(planInsert(prepareBatch([a], AUTH, '1.0.3', { define: true, received: new Set([sha2]) }), [blob], new Map(), new Map(), STORED).attachments.length, 1);
    assert.equal(
      planInsert(prepareBatch([a], AUTH, '1.0.3', { define: true, received: new Set([sha2]) }), [blob], known([a, false]), new Map(), STORED).attachments.length,
      0,
      're-sent: no orphan',
    );
  });

  test('attachments: a statement carried the data its request brought, not what it only declared', () => {
    const att = (sha2: string) => ({ usageType: 'http://example.com/u', display: { en: 'x' }, contentType: 'text/plain', length: 1, sha2, fileUrl: 'http://example.com/f' });
    const [x, y] = ['a'.repeat(64), 'b'.repeat(64)];
    const blob = { sha2: x, contentType: 'text/plain', content: Buffer.from('x') };
    const batch = prepareBatch([make({ attachments: [att(x), att(y)] }), make({ attachments: [att(y)] })], AUTH, '1.0.3', { define: true, received: new Set([x]) });
    assert.deepEqual(
      batch.map((p) => p.carried),
      [[x], []],
    );
    // Data kept: only what a new statement carried.
    assert.deepEqual(planInsert(batch, [blob, { ...blob, sha2: y }], new Map(), new Map(), STORED).attachments, [blob]);
  });

  describe('a writer restricted to its own statements (mineOnly)', () => {
    const MINE: Actor = { mbox: 'mailto:mine@example.com' };
    const mineBatch = (...statements: Statement[]) => prepareBatch(statements, MINE, '1.0.3', { define: false, mineOnly: true });

    test("another authority's id: 409 whatever the content; its own: the usual comparison", () => {
      const a = make();
      assert.equal(
        kind(() => planInsert(mineBatch(a), [], known([a, false]), new Map(), STORED)),
        'conflict',
      );
      const own = new Map<string, KnownStatement>([[a.id!, { isVoiding: false, statement: stamp(mineBatch(a)[0], STORED) }]]);
      assert.equal(planInsert(mineBatch(a), [], own, new Map(), STORED).outcome.inserted, 0);
    });

    test("voiding another authority's stored statement: 403; its own, or an unknown id: accepted", () => {
      const a = make();
      assert.equal(
        kind(() => planInsert(mineBatch(voiding(a.id!)), [], known([a, false]), new Map(), STORED)),
        'forbidden',
      );
      const own = new Map<string, KnownStatement>([[a.id!, { isVoiding: false, statement: stamp(mineBatch(a)[0], STORED) }]]);
      assert.deepEqual(planInsert(mineBatch(voiding(a.id!)), [], own, new Map(), STORED).voids, [a.id]);
      assert.equal(planInsert(mineBatch(voiding(randomUUID())), [], new Map(), new Map(), STORED).outcome.inserted, 1);
    });

    test('its voiding statement stored before the target voids only a target of its own authority', () => {
      const a = make();
      const earlier = new Map([[a.id!, [{ authorityKey: mineBatch(make())[0].authorityKey, mineOnly: true }]]]);
      assert.equal(planInsert(prepareBatch([a], AUTH, '1.0.3'), [], new Map(), earlier, STORED).fresh[0].voided, false);
      assert.equal(planInsert(mineBatch(a), [], new Map(), earlier, STORED).fresh[0].voided, true);
    });
  });

  test('rowsToRead: the batch ids and the voided targets', () => {
    const a = make();
    const v = voiding(a.id!);
    assert.deepEqual(rowsToRead(prepareBatch([v], AUTH, '1.0.3')).sort(), [v.id!, a.id!].map((x) => x.toLowerCase()).sort());
  });
});
