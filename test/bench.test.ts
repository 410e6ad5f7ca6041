/**
 * The benchmark's statement generator (bench/generate.ts): what it makes is valid xAPI the LRS
 * accepts, the same for the same seed, and the query filters it hands the benchmark match what
 * it generated. (The benchmark itself is never timed in tests; `npm run bench -- --quick --check`
 * is its smoke run.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { queryFilters, statement } from '../bench/generate.ts';
import { validateStatements } from '../src/xapi/validate.ts';

const SEED = 20261123;

test('generated statements are valid xAPI, ≈ 1.2 KB, with the promised mix', () => {
  const n = 3000;
  const batch = Array.from({ length: n }, (_, i) => statement(SEED, i)) as Record<string, any>[];
  const { issues } = validateStatements(batch, '1.0.3');
  assert.deepEqual(issues.slice(0, 3), []);
  const bytes = batch.reduce((a, s) => a + Buffer.byteLength(JSON.stringify(s)), 0) / n;
  assert.ok(bytes > 1000 && bytes < 1500, `average ${bytes} bytes`);
  const has = (f: (s: Record<string, any>) => boolean) => batch.some(f);
  assert.ok(has((s) => s.actor.objectType === 'Group' && s.actor.account), 'identified groups');
  assert.ok(has((s) => s.actor.objectType === 'Group' && !s.actor.account), 'anonymous groups');
  assert.ok(has((s) => s.actor.account) && has((s) => s.actor.mbox) && has((s) => s.actor.openid), 'account, mbox and openid agents');
  assert.ok(has((s) => s.verb.id.endsWith('/voided') && s.object.objectType === 'StatementRef'), 'voidings');
  assert.ok(has((s) => !s.verb.id.endsWith('/voided') && s.object.objectType === 'StatementRef'), 'other StatementRefs');
  assert.ok(has((s) => s.context?.contextActivities?.parent && s.context.registration && s.result?.score), 'context activities, registrations, results');
  assert.ok(new Set(batch.map((s) => s.verb.id)).size > 10, 'many verbs');
});

test('the stream is a function of (seed, i): any process makes the same statement', () => {
  assert.deepEqual(statement(SEED, 123_456), statement(SEED, 123_456));
  assert.notEqual(statement(SEED, 1).id, statement(SEED + 1, 1).id);
  const ids = new Set(Array.from({ length: 5000 }, (_, i) => statement(SEED, i).id));
  assert.equal(ids.size, 5000);
});

test('voidings target earlier statements that are not voidings themselves', () => {
  const idx = new Map<string, number>();
  for (let i = 0; i < 8000; i++) {
    const s = statement(SEED, i) as Record<string, any>;
    idx.set(s.id, i);
    if (!s.verb.id.endsWith('/voided')) continue;
    const target = idx.get(s.object.id);
    assert.ok(target !== undefined && target < i, `statement ${i} voids an earlier statement`);
    assert.ok(!(statement(SEED, target) as Record<string, any>).verb.id.endsWith('/voided'));
  }
});

test('every benchmark query filter matches statements among the first 2,000', () => {
  const batch = Array.from({ length: 2000 }, (_, i) => JSON.stringify(statement(SEED, i)));
  for (const [name, params] of Object.entries(queryFilters(SEED))) {
    for (const [key, value] of Object.entries(params)) {
      if (key.startsWith('related_')) continue;
      const needle = key === 'agent' ? value.slice(1, -1) : JSON.stringify(value);
      assert.ok(batch.some((s) => s.includes(needle)), `${name}: ${key}=${value} occurs`);
    }
  }
});
