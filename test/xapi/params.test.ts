/** The table of query parameters and its parser (src/xapi/params.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ValidationFailed } from '../../src/errors.ts';
import { parseParams } from '../../src/xapi/params.ts';

const issues = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ValidationFailed);
    return err.issues!.map((i) => `${i.loc.join('.')}: ${i.msg}`);
  }
  assert.fail('no error');
};

test('values are parsed by kind', () => {
  const p = parseParams('statements', 'GET', {
    agent: '{"mbox":"mailto:a@example.com"}',
    registration: 'AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE',
    since: '2020-01-01T00:00:00 01:00',
    limit: '5',
    ascending: 'true',
    format: 'ids',
    pit_id: 'anything',
  });
  assert.deepEqual(p.agent, { mbox: 'mailto:a@example.com' });
  assert.equal(p.registration, 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee');
  assert.equal(p.since, Date.UTC(2019, 11, 31, 23));
  assert.equal(p.limit, 5);
  assert.equal(p.ascending, true);
  assert.equal(p.format, 'ids');
});

test('every problem is reported at once, saying where and what', () => {
  assert.deepEqual(
    issues(() => parseParams('statements', 'GET', { Verb: 'x', limit: '-1', format: 'xml', attachments: 'yes', agent: '{' })),
    [
      'query.Verb: unknown parameter (parameter names are case-sensitive: did you mean verb?)',
      'query.agent: must be an Agent as JSON (or an identified Group)',
      'query.limit: must be a non-negative integer',
      'query.format: must be one of ids, exact, canonical',
      'query.attachments: must be true or false',
    ],
  );
  assert.deepEqual(
    issues(() => parseParams('statements', 'POST', { statementId: 'x' })),
    ['query.statementId: only GET/HEAD/PUT take statementId, not POST'],
  );
  assert.deepEqual(
    issues(() => parseParams('statements', 'PUT', {})),
    ['query.statementId: field required'],
  );
  assert.deepEqual(
    issues(() => parseParams('agents', 'GET', { agent: '{"objectType":"Group","mbox":"mailto:g@example.com"}' })),
    ["query.agent.objectType: must be an Agent, not a Group (use the Group's identifier in an Agent object)"],
  );
  assert.deepEqual(
    issues(() => parseParams('about', 'GET', { x: '1' })),
    ['query.x: unknown parameter'],
  );
});
