/** Unit tests of the version rules: negotiation, defaults, and the pure helpers 2.0 adds. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LrsError } from '../../src/errors.ts';
import { forReader } from '../../src/xapi/formats.ts';
import { duplicateKey, parseJson } from '../../src/xapi/json.ts';
import { centiseconds, statementDifference, toUtc } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { validateStatements } from '../../src/xapi/validate.ts';
import { aboutVersions, acceptsStatementVersion, negotiate, parseServed, responseVersion, statementRules, textWrittenUnder2 } from '../../src/xapi/versions.ts';

const BOTH = ['2.0.0', '1.0.3'] as const;

describe('versions', () => {
  test('a header maps to the rules of its version; anything else is a 400', () => {
    for (const h of ['1.0', '1.0.0', '1.0.3', '1.0.9', ' 1.0.3 ']) assert.equal(negotiate(h, BOTH), '1.0.3', h);
    for (const h of ['2.0', '2.0.0', '2.0.1']) assert.equal(negotiate(h, BOTH), '2.0.0', h);
    for (const h of [undefined, '', '0.95', '1.1', '2.1.0', '3.0', '1.0.', 'x']) assert.throws(() => negotiate(h, BOTH), LrsError, String(h));
    assert.throws(() => negotiate('2.0.0', ['1.0.3']), /1\.0\.3/);
  });

  test('the response version, /about and the setting', () => {
    assert.equal(responseVersion(undefined, BOTH), '2.0.0');
    assert.equal(responseVersion('1.0.3', BOTH), '1.0.3');
    assert.equal(responseVersion(undefined, ['1.0.3']), '1.0.3');
    assert.deepEqual(aboutVersions(['1.0.3']), ['1.0.3', '1.0.2', '1.0.1', '1.0.0']);
    assert.deepEqual(parseServed(['1.0.3', '2.0']), { served: ['2.0.0', '1.0.3'], unknown: [] });
    assert.deepEqual(parseServed(['1.1']).unknown, ['1.1']);
  });

  test('statement versions: 1.0.x always, 2.0.x under 2.0 only', () => {
    assert.ok(acceptsStatementVersion('1.0.3', '1.0.0'));
    assert.ok(!acceptsStatementVersion('1.0.3', '2.0.0'));
    assert.ok(acceptsStatementVersion('2.0.0', '2.0.0'));
    assert.ok(acceptsStatementVersion('2.0.0', '1.0.3'));
    assert.ok(!acceptsStatementVersion('2.0.0', '2.1.0'));
  });
});

describe('the validator takes the version', () => {
  const base = { actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/o' } };
  const issues = (context: unknown, v: '1.0.3' | '2.0.0') => validateStatements({ ...base, context }, v).issues.map((i) => [i.loc.join('.'), i.type]);
  test('contextAgents/contextGroups: 2.0 only, each part checked', () => {
    const ok = { contextAgents: [{ objectType: 'contextAgent', agent: { mbox: 'mailto:b@example.com' }, relevantTypes: ['http://example.com/t'] }] };
    assert.deepEqual(issues(ok, '2.0.0'), []);
    assert.deepEqual(issues(ok, '1.0.3'), [['0.context.contextAgents', 'value_error.extra']]);
    const group = { objectType: 'Group', mbox: 'mailto:g@example.com' };
    assert.deepEqual(issues({ contextAgents: [{ objectType: 'contextAgent', agent: group }] }, '2.0.0'), [
      ['0.context.contextAgents.0.agent.objectType', 'value_error.not_allowed'],
    ]);
    assert.deepEqual(issues({ contextGroups: [{ objectType: 'contextGroup', group }] }, '2.0.0'), []);
    assert.deepEqual(issues({ contextGroups: [{ objectType: 'contextGroup', group: { mbox: 'mailto:g@example.com' } }] }, '2.0.0'), [
      ['0.context.contextGroups.0.group.objectType', 'value_error.missing'],
    ]);
    assert.deepEqual(issues({ contextGroups: [{ objectType: 'contextGroup', group, relevantTypes: [] }] }, '2.0.0'), [
      ['0.context.contextGroups.0.relevantTypes', 'value_error.empty'],
    ]);
  });
});

describe('2.0 helpers', () => {
  test('duplicate keys are found at any depth, with where', () => {
    assert.equal(duplicateKey('{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}'), undefined);
    assert.deepEqual(duplicateKey('{"a":1,"b":{"x":1,"x":2}}'), { key: 'x', path: ['b', 'x'] });
    assert.deepEqual(duplicateKey('[{}, {"c":[1,{"k":1,"k":2}]}]'), { key: 'k', path: [1, 'c', 1, 'k'] });
    assert.deepEqual(duplicateKey('{"\\u0061":1,"a":2}')?.key, 'a', 'escaped spellings of one key');
    assert.equal(duplicateKey('{"a":"\\"a\\"","b":"a"}'), undefined, 'strings that are values');
    assert.throws(() => parseJson(Buffer.from('{"a":1,"a":2}'), '2.0.0'), /more than once/);
    assert.deepEqual(parseJson(Buffer.from('{"a":1,"a":2}'), '1.0.3'), { a: 2 });
  });

  test('timestamps to UTC, fraction digits kept', () => {
    assert.equal(toUtc('2023-05-18T07:32:34.804123+02:00'), '2023-05-18T05:32:34.804123Z');
    assert.equal(toUtc('2023-01-01T00:30:00-01:00'), '2023-01-01T01:30:00Z');
    assert.equal(toUtc('2023-01-01T00:30:00.5+0100'), '2022-12-31T23:30:00.500Z');
    assert.equal(toUtc('2023-01-01T00:30:00Z'), undefined, 'already UTC');
  });

  test('durations at 0.01 s, and statement comparison under each version', () => {
    assert.equal(centiseconds('PT1.2345S'), 'PT1.23S');
    assert.equal(centiseconds('PT1.001S'), 'PT1S');
    assert.equal(centiseconds('P1DT2H'), 'P1DT2H');
    const s = (d: string) => ({ actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/o' }, result: { duration: d } });
    assert.equal(statementDifference(s('PT1.2345S'), s('PT1.23S'), '2.0.0'), undefined, 'the same under 2.0 (re-sent or signed)');
    assert.notEqual(statementDifference(s('PT1.2345S'), s('PT1.23S'), '1.0.3'), undefined);
    assert.notEqual(statementDifference(s('PT1.2345S'), s('PT1.24S'), '2.0.0'), undefined);
  });

  test('forReader converts 2.0 statements for 1.0.3 readers only when strict', () => {
    const st = {
      actor: { mbox: 'mailto:a@example.com' },
      verb: { id: 'http://example.com/v' },
      object: { id: 'http://example.com/o' },
      context: { registration: 'a5b6c7d8-0000-4000-8000-000000000000', contextAgents: [{ objectType: 'contextAgent', agent: { mbox: 'mailto:b@example.com' } }] },
      version: '2.0.0',
    } as Statement;
    assert.equal(forReader(st, '1.0.3', false), st);
    assert.equal(forReader(st, '2.0.0', true), st);
    assert.deepEqual(forReader(st, '1.0.3', true), { ...st, version: '1.0.0', context: { registration: st.context!.registration } });
    const old = { ...st, version: '1.0.3', context: {} } as Statement;
    assert.equal(forReader(old, '1.0.3', true), old);
  });
});

describe('statements written under 2.0', () => {
  const actor = { mbox: 'mailto:a@example.com' };
  const base = { actor, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } };
  const contextAgents = [{ objectType: 'contextAgent', agent: { mbox: 'mailto:coach@example.com' } }];
  test('are known by their version or by what only 2.0 has, even when they say 1.0.0', () => {
    const cases: [unknown, '1.0.3' | '2.0.0'][] = [
      [{ ...base, version: '2.0.0' }, '2.0.0'],
      [{ ...base, version: '1.0.0', context: { contextAgents } }, '2.0.0'],
      [{ ...base, version: '1.0.0', object: { objectType: 'SubStatement', ...base, context: { contextGroups: [] } } }, '2.0.0'],
      [{ ...base, version: '1.0.3' }, '1.0.3'],
      [{ ...base }, '1.0.3'],
      ['not a statement', '1.0.3'],
    ];
    for (const [s, rules] of cases) {
      assert.equal(statementRules(s), rules, JSON.stringify(s));
      if (typeof s === 'object') assert.equal(textWrittenUnder2(JSON.stringify(s)), rules === '2.0.0', JSON.stringify(s));
    }
  });
  test('a statement sent under 2.0 with version 1.0.0 and contextAgents imports under 2.0 rules and converts for strict 1.0.3 readers', () => {
    const s = { ...base, version: '1.0.0', context: { contextAgents } };
    assert.deepEqual(validateStatements(s, statementRules(s)).issues, []);
    const converted = forReader({ ...s, id: '3c1e2a7e-7d5e-4b8e-9d3a-0d1f1f0c2b11' } as unknown as Statement, '1.0.3', true);
    assert.equal(converted.context?.contextAgents, undefined);
  });
});
