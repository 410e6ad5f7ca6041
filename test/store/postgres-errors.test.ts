/** Which PostgreSQL failures are "the database is unavailable" (503) and which are bugs (500). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LrsError } from '../../src/errors.ts';
import { describe as describeError, isRetryable, isUnavailable, toLrsError } from '../../src/store/postgres/errors.ts';

const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });

test('connection-level failures are unavailable; SQL errors are not', () => {
  for (const e of [
    pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'),
    pgError('ECONNRESET'),
    pgError('57P01', 'terminating connection due to administrator command'),
    pgError('57P03', 'the database system is starting up'),
    pgError('08006'),
    pgError('53300', 'sorry, too many clients already'),
    pgError('57014', 'canceling statement due to statement timeout'),
    pgError('25006', 'cannot execute INSERT in a read-only transaction'),
    new Error('Connection terminated unexpectedly'),
    new Error('timeout exceeded when trying to connect'),
    new Error('Client has encountered a connection error and is not queryable'),
    new AggregateError([pgError('ECONNREFUSED', 'connect ECONNREFUSED ::1:5432'), pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')], ''),
  ]) {
    assert.ok(isUnavailable(e), String((e as Error).message || (e as { code?: string }).code));
    const mapped = toLrsError(e);
    assert.ok(mapped instanceof LrsError && mapped.status === 503);
    assert.match((mapped as LrsError).message, /the database is unavailable/);
  }
  for (const e of [pgError('42P01', 'relation "x" does not exist'), pgError('22P02', 'invalid input syntax for type uuid'), new TypeError('boom'), 'text']) {
    assert.equal(isUnavailable(e), false);
    assert.equal(toLrsError(e), e, 'passed through unchanged: a 500');
  }
  const known = new LrsError('conflict', 'x');
  assert.equal(toLrsError(known), known);
});

test('a full disk (53100) is a 503 saying so, without taking the connection for broken', () => {
  const full = pgError('53100', 'could not extend file "base/16384/16385": No space left on device');
  assert.equal(isUnavailable(full), false, 'the connection is sound: it goes back to the pool');
  const mapped = toLrsError(full);
  assert.ok(mapped instanceof LrsError && mapped.status === 503);
  assert.match(mapped.message, /disk is full.*nothing of this request was stored/);
  assert.doesNotMatch(mapped.message, /base\/16384/, 'no file names for clients');
});

test('messages are one line, even for an AggregateError without a message', () => {
  const agg = new AggregateError([pgError('ECONNREFUSED', 'connect ECONNREFUSED ::1:5432'), pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')], '');
  assert.equal(describeError(agg), 'connect ECONNREFUSED ::1:5432; connect ECONNREFUSED 127.0.0.1:5432');
  assert.equal(describeError(pgError('28P01', 'password authentication failed for user "x"\nDETAIL: y')), 'password authentication failed for user "x" (28P01)');
});

test('serialization failures, deadlocks and unique violations rerun the transaction', () => {
  for (const code of ['40001', '40P01', '23505']) assert.ok(isRetryable(pgError(code)));
  assert.equal(isRetryable(pgError('42P01')), false);
});
