/** Unit tests of the document rules (xAPI-Communication §2.2-§2.7, §3.1) and the Person object (§2.4). */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { LrsError, ValidationFailed } from '../../src/errors.ts';
import type { StoredDocument } from '../../src/store/types.ts';
import { checkJsonDocument, checkPrecondition, etagOf, mergeJsonDocuments, parseDocumentParams, parsePreconditions, planDocumentWrite } from '../../src/xapi/documents.ts';
import { personOf } from '../../src/xapi/person.ts';
import { isJsonType } from '../../src/xapi/media.ts';

const jsonDoc = (v: unknown, contentType = 'application/json') => ({ content: Buffer.from(JSON.stringify(v)), contentType });
const kindOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    assert.ok(err instanceof LrsError, `expected an LrsError, got ${String(err)}`);
    return err.kind;
  }
};
const locs = (fn: () => unknown): string[] => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ValidationFailed, `expected a ValidationFailed, got ${String(err)}`);
    return err.issues!.map((i) => i.loc.join('.'));
  }
  assert.fail('expected a ValidationFailed');
};

describe('etag and content types', () => {
  test('the ETag is the quoted lower-case SHA-1 hex of the bytes', () => {
    const bytes = Buffer.from('hello');
    assert.equal(etagOf(bytes), `"${createHash('sha1').update(bytes).digest('hex')}"`);
    assert.match(etagOf(Buffer.alloc(0)), /^"[0-9a-f]{40}"$/);
  });

  test('application/json with or without parameters is JSON; other types are not', () => {
    assert.ok(isJsonType('application/json'));
    assert.ok(isJsonType('Application/JSON; charset=utf-8'));
    for (const t of ['text/plain', 'application/ld+json', 'application/jsonx', '']) assert.ok(!isJsonType(t), t);
  });

  test('a document labelled JSON must parse; other documents are not looked at', () => {
    assert.equal(
      kindOf(() => checkJsonDocument({ content: Buffer.from('{"a":'), contentType: 'application/json' })),
      'bad_request',
    );
    assert.equal(
      kindOf(() => checkJsonDocument({ content: Buffer.from('{"a":'), contentType: 'text/plain' })),
      undefined,
    );
    assert.equal(
      kindOf(() => checkJsonDocument({ content: Buffer.from('[1, "x"]'), contentType: 'application/json' })),
      undefined,
    );
  });
});

describe('merging (§2.2.s7)', () => {
  test('top-level properties of the new object replace the stored ones, whole', () => {
    const merged = mergeJsonDocuments(jsonDoc({ x: 'foo', y: 'bar', deep: { a: 1, b: 2 } }), jsonDoc({ x: 'bash', z: 'faz', deep: { c: 3 } }));
    assert.deepEqual(JSON.parse(merged.toString()), { x: 'bash', y: 'bar', z: 'faz', deep: { c: 3 } });
  });

  test('either side not application/json, or not a JSON object, is a 400', () => {
    const text = { content: Buffer.from('{"a":1}'), contentType: 'text/plain' };
    assert.equal(
      kindOf(() => mergeJsonDocuments(text, jsonDoc({ b: 1 }))),
      'bad_request',
    );
    assert.equal(
      kindOf(() => mergeJsonDocuments(jsonDoc({ b: 1 }), text)),
      'bad_request',
    );
    assert.equal(
      kindOf(() => mergeJsonDocuments(jsonDoc([1]), jsonDoc({ b: 1 }))),
      'bad_request',
    );
    assert.equal(
      kindOf(() => mergeJsonDocuments(jsonDoc({ a: 1 }), jsonDoc('str'))),
      'bad_request',
    );
    assert.equal(
      kindOf(() => mergeJsonDocuments(jsonDoc({ a: 1 }), jsonDoc(null))),
      'bad_request',
    );
  });
});

describe('preconditions (§3.1)', () => {
  const E = '"aaaa"';
  const cases: [string, string | undefined, ReturnType<typeof parsePreconditions>, string | undefined][] = [
    ['If-Match matching', E, { ifMatch: [E] }, undefined],
    ['If-Match one of a list', E, { ifMatch: ['"b"', E] }, undefined],
    ['If-Match mismatching', E, { ifMatch: ['"b"'] }, 'precondition_failed'],
    ['If-Match on no document', undefined, { ifMatch: [E] }, 'precondition_failed'],
    ['If-Match * on a document', E, { ifMatch: ['*'] }, undefined],
    ['If-Match * on no document', undefined, { ifMatch: ['*'] }, 'precondition_failed'],
    ['If-None-Match * on no document', undefined, { ifNoneMatchAny: true }, undefined],
    ['If-None-Match * on a document', E, { ifNoneMatchAny: true }, 'precondition_failed'],
    ['If-None-Match listing the ETag', E, { ifNoneMatch: [E] }, 'precondition_failed'],
    ['If-None-Match listing another ETag', E, { ifNoneMatch: ['"b"'] }, undefined],
    ['no header, profile PUT, no document', undefined, { conflictIfExists: true, headerRequiredIfNew: true }, 'bad_request'],
    ['no header, 2.0 PUT, no document', undefined, { conflictIfExists: true }, undefined],
    ['no header, profile PUT, a document', E, { conflictIfExists: true }, 'conflict'],
    ['nothing', E, {}, undefined],
  ];
  for (const [name, current, pre, expected] of cases) {
    test(name, () =>
      assert.equal(
        kindOf(() => checkPrecondition(current, pre)),
        expected,
      ),
    );
  }

  test('the 409 explains how to resolve the conflict', () => {
    try {
      checkPrecondition(E, { conflictIfExists: true });
      assert.fail('expected a conflict');
    } catch (err) {
      assert.match((err as Error).message, /If-Match/);
      assert.match((err as Error).message, /GET/);
    }
  });

  test('headers parse into preconditions; bare tags are quoted; the 409 rule only without either header', () => {
    assert.deepEqual(parsePreconditions(undefined, undefined), {});
    assert.deepEqual(parsePreconditions(undefined, undefined, 'conflict-or-missing'), { conflictIfExists: true, headerRequiredIfNew: true });
    assert.deepEqual(parsePreconditions(undefined, undefined, 'conflict'), { conflictIfExists: true });
    assert.deepEqual(parsePreconditions('"a", "b"', undefined, 'conflict'), { ifMatch: ['"a"', '"b"'] });
    assert.deepEqual(parsePreconditions('abc', undefined), { ifMatch: ['"abc"'] });
    assert.deepEqual(parsePreconditions('W/"a"', undefined), { ifMatch: ['W/"a"'] });
    assert.deepEqual(parsePreconditions(undefined, '*', 'conflict'), { ifNoneMatchAny: true });
    assert.deepEqual(parsePreconditions(undefined, '"a"'), { ifNoneMatch: ['"a"'] });
    assert.deepEqual(parsePreconditions('', ' ', 'conflict-or-missing'), { conflictIfExists: true, headerRequiredIfNew: true }, 'empty values count as absent');
  });
});

describe('planDocumentWrite', () => {
  const stored: StoredDocument = { ...jsonDoc({ a: 1, b: 1 }), etag: etagOf(Buffer.from('{"a":1,"b":1}')), updatedMs: 1 };

  test('PUT replaces; the ETag and time are the new ones', () => {
    const next = planDocumentWrite(stored, jsonDoc({ c: 1 }), { merge: false, pre: {} }, 42);
    assert.deepEqual(JSON.parse(next.content.toString()), { c: 1 });
    assert.equal(next.etag, etagOf(next.content));
    assert.equal(next.updatedMs, 42);
  });

  test('POST merges onto a stored document and stores as a PUT would onto none', () => {
    const merged = planDocumentWrite(stored, jsonDoc({ b: 2 }), { merge: true, pre: {} }, 2);
    assert.deepEqual(JSON.parse(merged.content.toString()), { a: 1, b: 2 });
    assert.equal(merged.etag, etagOf(merged.content));
    const labelled = planDocumentWrite({ ...stored, contentType: 'application/json; charset=utf-8' }, jsonDoc({ b: 2 }), { merge: true, pre: {} }, 2);
    assert.equal(labelled.contentType, 'application/json; charset=utf-8', 'a merge keeps the stored Content-Type');
    const text = { content: Buffer.from('plain'), contentType: 'text/plain' };
    assert.deepEqual(planDocumentWrite(undefined, text, { merge: true, pre: {} }, 2).content, text.content);
  });

  test('maxSize bounds what the write leaves stored: the merged document, not only the body', () => {
    const big = jsonDoc({ c: 'x'.repeat(20) });
    assert.equal(
      kindOf(() => planDocumentWrite(stored, big, { merge: true, pre: {}, maxSize: 30 }, 2)),
      'too_large',
    );
    assert.equal(planDocumentWrite(stored, big, { merge: false, pre: {}, maxSize: 30 }, 2).content.length, big.content.length, 'a PUT of the body alone fits');
    assert.equal(
      kindOf(() => planDocumentWrite(undefined, big, { merge: true, pre: {}, maxSize: 20 }, 2)),
      'too_large',
    );
  });

  test('the precondition is checked before anything else', () => {
    assert.equal(
      kindOf(() => planDocumentWrite(stored, jsonDoc({ b: 2 }), { merge: true, pre: { ifMatch: ['"x"'] } }, 2)),
      'precondition_failed',
    );
  });
});

describe('document parameters', () => {
  const agent = JSON.stringify({ mbox: 'mailto:a@example.com' });
  const state = { activityId: 'http://example.com/a', agent, stateId: 's' };

  test('State: the scope keys the agent by IFI and lower-cases the registration', () => {
    const t = parseDocumentParams('state', 'PUT', { ...state, registration: 'AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE' });
    assert.deepEqual(t.scope, { kind: 'state', activityId: 'http://example.com/a', agent: 'mbox:mailto:a@example.com', registration: 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee' });
    assert.equal(t.docId, 's');
    const group = JSON.stringify({ objectType: 'Group', mbox: 'mailto:a@example.com' });
    assert.equal(parseDocumentParams('state', 'GET', { ...state, agent: group }).scope.agent, 'mbox:mailto:a@example.com');
  });

  test('missing required parameters are listed together', () => {
    assert.deepEqual(
      locs(() => parseDocumentParams('state', 'PUT', {})),
      ['query.activityId', 'query.agent', 'query.stateId'],
    );
    assert.deepEqual(
      locs(() => parseDocumentParams('activity_profile', 'POST', {})),
      ['query.activityId', 'query.profileId'],
    );
    assert.deepEqual(
      locs(() => parseDocumentParams('agent_profile', 'DELETE', {})),
      ['query.agent', 'query.profileId'],
    );
  });

  test('the id is optional for GET, and for DELETE on State only', () => {
    const { stateId: _s, ...noId } = state;
    assert.equal(parseDocumentParams('state', 'GET', noId).docId, undefined);
    assert.equal(parseDocumentParams('state', 'DELETE', noId).docId, undefined);
    assert.deepEqual(
      locs(() => parseDocumentParams('activity_profile', 'DELETE', { activityId: 'http://example.com/a' })),
      ['query.profileId'],
    );
    assert.equal(parseDocumentParams('agent_profile', 'GET', { agent }).docId, undefined);
  });

  test('malformed values', () => {
    const bad: [Record<string, string>, string][] = [
      [{ ...state, activityId: 'not an iri' }, 'query.activityId'],
      [{ ...state, agent: 'not json' }, 'query.agent'],
      [{ ...state, agent: '{"name":"no ifi"}' }, 'query.agent'],
      [{ ...state, agent: '{"mbox":"a@example.com"}' }, 'query.agent.mbox'],
      [{ ...state, registration: 'nope' }, 'query.registration'],
      [{ ...state, stateId: '' }, 'query.stateId'],
      [{ ...state, Agent: agent }, 'query.Agent'],
      [{ ...state, profileId: 'p' }, 'query.profileId'],
    ];
    for (const [params, loc] of bad)
      assert.deepEqual(
        locs(() => parseDocumentParams('state', 'PUT', params)),
        [loc],
        JSON.stringify(params),
      );
  });

  test('since is a GET parameter: a timestamp, in ms', () => {
    const { stateId: _s, ...noId } = state;
    assert.equal(parseDocumentParams('state', 'GET', { ...noId, since: '2020-01-01T00:00:00.123+01:00' }).since, Date.UTC(2019, 11, 31, 23, 0, 0, 123));
    assert.deepEqual(
      locs(() => parseDocumentParams('state', 'GET', { ...noId, since: 'yesterday' })),
      ['query.since'],
    );
    assert.deepEqual(
      locs(() => parseDocumentParams('state', 'PUT', { ...state, since: '2020-01-01T00:00:00Z' })),
      ['query.since'],
    );
    assert.equal(parseDocumentParams('state', 'HEAD', { ...state, since: '2020-01-01T00:00:00Z' }).docId, 's', 'accepted with an id');
  });

  test('the Agent Profile agent is an Agent, not a Group; Activity Profile takes no agent', () => {
    const group = JSON.stringify({ objectType: 'Group', mbox: 'mailto:g@example.com' });
    assert.deepEqual(
      locs(() => parseDocumentParams('agent_profile', 'GET', { agent: group, profileId: 'p' })),
      ['query.agent.objectType'],
    );
    assert.deepEqual(
      locs(() => parseDocumentParams('activity_profile', 'GET', { activityId: 'http://example.com/a', agent, profileId: 'p' })),
      ['query.agent'],
    );
  });
});

describe('Person (§2.4)', () => {
  test("arrays of the agent's name and identifier only", () => {
    assert.deepEqual(personOf({ objectType: 'Agent', name: 'Ann', mbox: 'mailto:ann@example.com' }), { objectType: 'Person', name: ['Ann'], mbox: ['mailto:ann@example.com'] });
    assert.deepEqual(personOf({ account: { homePage: 'http://example.com', name: 'ann' } }), {
      objectType: 'Person',
      account: [{ homePage: 'http://example.com', name: 'ann' }],
    });
    assert.deepEqual(personOf({ openid: 'http://openid.example.com/ann' }), { objectType: 'Person', openid: ['http://openid.example.com/ann'] });
    const sha = 'a'.repeat(40);
    assert.deepEqual(personOf({ mbox_sha1sum: sha }), { objectType: 'Person', mbox_sha1sum: [sha] });
  });
});
