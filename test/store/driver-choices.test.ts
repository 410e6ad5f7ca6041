/**
 * The combined filters' driver choices kept by the stores (DriverChoices in src/store/sql.ts):
 * per tenant and filter values, for a while, never across tenants or related_* flags.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DriverChoices } from '../../src/store/sql.ts';
import type { StatementFilter } from '../../src/xapi/query.ts';

const filter = (f: Partial<StatementFilter> = {}): StatementFilter => ({
  agent: 'mbox:mailto:a@example.com',
  verb: 'http://example.com/verbs/did',
  activity: 'http://example.com/course',
  relatedAgents: false,
  relatedActivities: true,
  ...f,
});

describe('driver choices', () => {
  test('are kept for the same tenant and values until they expire', () => {
    const c = new DriverChoices(1000);
    assert.equal(c.get(1, filter(), 0), undefined);
    c.set(1, filter(), 'activity', 0);
    assert.equal(c.get(1, filter(), 999), 'activity');
    // since/until are not part of the counts, nor of the key.
    assert.equal(c.get(1, { ...filter(), since: 5 } as StatementFilter, 999), 'activity');
    assert.equal(c.get(1, filter(), 1000), undefined);
  });

  test('are not shared across tenants, values or related_* flags', () => {
    const c = new DriverChoices(1000);
    c.set(1, filter(), 'agent', 0);
    assert.equal(c.get(2, filter(), 1), undefined);
    assert.equal(c.get(1, filter({ verb: 'http://example.com/verbs/other' }), 1), undefined);
    assert.equal(c.get(1, filter({ relatedActivities: false }), 1), undefined);
    assert.equal(c.get(1, filter({ relatedAgents: true }), 1), undefined);
    assert.equal(c.get(1, filter({ registration: '6f1c0a52-2f0e-4d6a-9b7e-1d2c3b4a5f60' }), 1), undefined);
  });

  test('hold a bounded number of choices', () => {
    const c = new DriverChoices(1000, 2);
    c.set(1, filter({ verb: 'v1' }), 'agent', 0);
    c.set(1, filter({ verb: 'v2' }), 'agent', 0);
    c.set(1, filter({ verb: 'v3' }), 'activity', 0);
    assert.equal(c.get(1, filter({ verb: 'v1' }), 1), undefined);
    assert.equal(c.get(1, filter({ verb: 'v3' }), 1), 'activity');
  });
});
