/** validateStatementsLax (docs/validation.md): what is recorded, what is still refused, and the issue cap. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { validateStatements, validateStatementsLax } from '../../src/xapi/validate.ts';

const base = (over: Record<string, unknown> = {}) => ({
  actor: { mbox: 'mailto:ann@example.com' },
  verb: { id: 'http://example.com/verbs/did' },
  object: { id: 'http://example.com/a' },
  ...over,
});

test('a valid batch is what strict returns, with no violations', () => {
  const body = [base(), base({ context: { contextActivities: { parent: { id: 'http://example.com/p' } } } })];
  const lax = validateStatementsLax(body, '1.0.3');
  assert.deepEqual(lax.statements, validateStatements(body, '1.0.3').statements);
  assert.deepEqual(lax.issues, []);
  assert.deepEqual(lax.violations, []);
});

test("each statement of a large batch keeps its own violations: the batch's cap does not hide them", () => {
  const body = Array.from({ length: 150 }, (_, i) => base({ result: { extensions: { [`key-${i}`]: i } } }));
  const lax = validateStatementsLax(body, '1.0.3');
  assert.deepEqual(lax.issues, []);
  assert.equal(lax.violations.length, 150);
  lax.violations.forEach((v, i) => assert.deepEqual(v, [{ loc: ['result', 'extensions', `key-${i}`], msg: 'an extension key must be an absolute IRI', type: 'value_error.iri' }]));
  // Kept exactly as sent, not the validator's copy (which leaves the bad key out).
  assert.deepEqual(lax.statements[149], body[149]);
  assert.notEqual(lax.statements[149], body[149], 'a copy');
});

test("one statement's violations beyond 100 end with a count", () => {
  const extensions = Object.fromEntries(Array.from({ length: 130 }, (_, i) => [`k${i}`, i]));
  const { violations, issues } = validateStatementsLax(base({ result: { extensions } }), '1.0.3');
  assert.deepEqual(issues, []);
  assert.equal(violations[0]!.length, 101);
  assert.deepEqual(violations[0]![100], { loc: [], msg: 'and 30 more problems not listed', type: 'value_error.more_issues' });
});

test("a Group's members are only violations; the member list and the group's identity are the minimal form", () => {
  const member = [{ name: 'no identifier' }];
  let r = validateStatementsLax(base({ actor: { objectType: 'Group', member } }), '1.0.3');
  assert.deepEqual(r.issues, []);
  assert.equal(r.violations[0]![0].type, 'value_error.ifi');
  r = validateStatementsLax(base({ actor: { objectType: 'Group', member: 'everyone' } }), '1.0.3');
  assert.deepEqual(
    r.issues.map((i) => i.loc),
    [[0, 'actor', 'member']],
  );
  r = validateStatementsLax(base({ actor: { objectType: 'Group', member: [], name: 'x' } }), '1.0.3');
  assert.deepEqual(
    r.issues.map((i) => i.type),
    ['value_error.empty'],
  );
});

test('a SubStatement needs the minimal form too; its other problems are violations', () => {
  const sub = (over: Record<string, unknown>) => base({ object: { objectType: 'SubStatement', ...base(), ...over } });
  let r = validateStatementsLax(sub({ result: { duration: '5 minutes' } }), '1.0.3');
  assert.deepEqual(r.issues, []);
  assert.deepEqual(
    r.violations[0]!.map((v) => v.loc),
    [['object', 'result', 'duration']],
  );
  r = validateStatementsLax(sub({ verb: { id: 'did' } }), '1.0.3');
  assert.deepEqual(
    r.issues.map((i) => i.loc),
    [[0, 'object', 'verb', 'id']],
  );
  r = validateStatementsLax(sub({ object: { objectType: 'SubStatement', ...base() } }), '1.0.3');
  assert.deepEqual(
    r.issues.map((i) => i.loc),
    [[0, 'object', 'object', 'objectType']],
  );
});

test('a signed statement that breaks a rule is refused; one id twice in a batch is refused', () => {
  const signature = {
    usageType: 'http://adlnet.gov/expapi/attachments/signature',
    display: { 'en-US': 's' },
    contentType: 'application/octet-stream',
    length: 1,
    sha2: 'a'.repeat(64),
  };
  const r = validateStatementsLax(base({ attachments: [signature], lms: 1 }), '1.0.3');
  assert.deepEqual(
    r.issues.map((i) => i.type),
    ['value_error.signed'],
  );
  const id = randomUUID();
  const d = validateStatementsLax([base({ id, lms: 1 }), base({ id, lms: 2 })], '1.0.3');
  assert.deepEqual(
    d.issues.map((i) => [i.loc, i.type]),
    [[[1, 'id'], 'value_error.duplicate']],
  );
});

test('a 2.0 property under 1.0.3 is a violation; the version is still checked', () => {
  let r = validateStatementsLax(base({ context: { contextAgents: [{ objectType: 'contextAgent', agent: { mbox: 'mailto:b@example.com' } }] } }), '1.0.3');
  assert.deepEqual(r.issues, []);
  assert.equal(r.violations[0]![0].type, 'value_error.extra');
  r = validateStatementsLax(base({ version: '0.9', lms: 1 }), '1.0.3');
  assert.deepEqual(
    r.issues.map((i) => i.loc),
    [[0, 'version']],
  );
});
