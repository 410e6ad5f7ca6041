/**
 * The SQLite writer thread (src/store/sqlite/writer.ts): what the design adds beyond the contract
 * suite. Requests that arrive together share one transaction but keep their own outcome, and a
 * writer that dies turns writes into 503s (reads go on), never into a hang or a lost ack.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { jsonInit, sqliteThreadBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';

const writerOf = (lrs: TestLrs): Worker => {
  const thread = (lrs.lrs.store as unknown as { writerThread?: Worker }).writerThread;
  assert.ok(thread, 'the SQLite store writes on a thread of its own');
  return thread;
};

const VOIDED = { id: 'http://adlnet.gov/expapi/verbs/voided' };
const st = (o: Record<string, unknown> = {}) => statement({ id: randomUUID(), ...o });
const voiding = (target: unknown) => st({ verb: VOIDED, object: { objectType: 'StatementRef', id: target } });

const post = (lrs: TestLrs, body: unknown) => lrs.fetch('/xAPI/statements', jsonInit('POST', body));

describe('SQLite writer thread', () => {
  let lrs: TestLrs;
  before(async () => {
    lrs = await startTestLrs(sqliteThreadBackend);
  });
  after(async () => lrs?.close());

  test('requests that arrive together: each keeps its own outcome, stored order is seq order', async () => {
    const taken = st();
    assert.equal((await post(lrs, taken)).status, 200);
    const batches = Array.from({ length: 12 }, () => [st(), st()]);
    const conflicting = [st(), st({ id: taken.id, result: { completion: true } })];
    const first = voiding(randomUUID());
    const voidingAVoiding = [first, voiding(first.id)];
    const all = [...batches.slice(0, 6), conflicting, voidingAVoiding, ...batches.slice(6)];
    const statuses = await Promise.all(all.map(async (b) => (await post(lrs, b)).status));
    assert.deepEqual(statuses, [...Array(6).fill(200), 409, 400, ...Array(6).fill(200)]);

    // Nothing of the refused requests is stored; everything of the others is.
    for (const s of [conflicting[0], ...voidingAVoiding]) {
      assert.equal((await lrs.fetch(`/xAPI/statements?statementId=${s.id}`)).status, 404);
    }
    const res = await lrs.fetch('/xAPI/statements?ascending=true&limit=100');
    const served = ((await res.json()) as { statements: { id: string; stored: string }[] }).statements;
    const ids = new Set(served.map((s) => s.id));
    for (const b of batches) for (const s of b) assert.ok(ids.has(s.id as string));
    const stored = served.map((s) => Date.parse(s.stored));
    assert.deepEqual(
      stored,
      [...stored].sort((a, b) => a - b),
      'stored never decreases in seq order',
    );
  });

  test("bytes sent to the writer are the request's own, and the caller's memory stays usable", async () => {
    // A request body is a view into a larger read buffer: only the view's bytes may be stored,
    // and moving a copy to the writer must not detach the caller's buffer.
    const backing = Buffer.alloc(65_536, 0x2a);
    const body = backing.subarray(1_000, 1_100).fill(0x61);
    const key = { kind: 'state' as const, activityId: 'http://example.com/a', agent: 'mbox:mailto:bytes@example.com', registration: '', docId: 'bytes' };
    const stored = await lrs.lrs.store.putDocument('', key, { content: body, contentType: 'text/plain' }, { merge: false, pre: {} });
    assert.equal(body.byteLength, 100, "the caller's buffer is not detached");
    assert.equal(body.toString(), 'a'.repeat(100));
    assert.ok(Buffer.isBuffer(stored.content));
    assert.equal(stored.content.toString(), 'a'.repeat(100));
    const res = await lrs.fetch(
      `/xAPI/activities/state?activityId=${encodeURIComponent(key.activityId)}&agent=${encodeURIComponent(JSON.stringify({ mbox: 'mailto:bytes@example.com' }))}&stateId=bytes`,
    );
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'a'.repeat(100));
  });

  test('a writer that dies: acknowledged writes are stored, the rest get 503, reads go on, close does not hang', async () => {
    const inFlight = Array.from({ length: 20 }, () => [st()]);
    const responses = inFlight.map((b) => post(lrs, b));
    // Let the first requests reach the writer, then stop it under them.
    await new Promise((r) => setTimeout(r, 5));
    await writerOf(lrs).terminate();
    const statuses = await Promise.all(responses.map(async (r) => (await r).status));
    for (const s of statuses) assert.ok(s === 200 || s === 503, `status ${s}`);
    for (const [i, s] of statuses.entries()) {
      if (s === 200) assert.equal((await lrs.fetch(`/xAPI/statements?statementId=${inFlight[i][0].id}`)).status, 200, 'an acknowledged write is stored');
    }

    const later = await post(lrs, st());
    assert.equal(later.status, 503);
    assert.match(JSON.stringify(await later.json()), /SQLite writer thread stopped/);
    const doc = await lrs.fetch(
      `/xAPI/activities/state?activityId=${encodeURIComponent('http://example.com/a')}&agent=${encodeURIComponent(JSON.stringify({ mbox: 'mailto:a@example.com' }))}&stateId=s`,
      { method: 'PUT', body: '{}', headers: { 'content-type': 'application/json' } },
    );
    assert.equal(doc.status, 503);

    const beat = await lrs.fetch('/heartbeat', { user: null });
    assert.equal(beat.status, 500);
    assert.match(JSON.stringify(await beat.json()), /writer thread stopped/);
    assert.equal((await lrs.fetch('/xAPI/statements?limit=1')).status, 200, 'reads are served from their own connection');
  });
});
