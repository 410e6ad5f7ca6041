/**
 * Two servers on one PostgreSQL share the forwarding outbox: both deliver, and no statement is ever
 * sent by both (nor twice at once): claims lock with SKIP LOCKED and lease what they take.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonInit, postgresBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { eventually, Receiver } from '../helpers/receiver.ts';

const forwardings = (url: string, username: string) => JSON.stringify([{ is_active: true, url, basic_username: username, basic_password: 'pw', max_retries: 5, timeout: 5 }]);

test('two servers on one PostgreSQL deliver one shared queue, each statement exactly once', { skip: postgresSkipped() }, async () => {
  const rec = await new Receiver().listen();
  const inFlight = new Set<string>();
  let overlapped = false;
  rec.respond = (r) => {
    for (const s of r.statements) {
      if (inFlight.has(s.id)) overlapped = true;
      inFlight.add(s.id);
    }
    setTimeout(() => r.statements.forEach((s) => inFlight.delete(s.id)), 30);
    return { status: 200, delayMs: 30 };
  };
  // Each server signs its requests with its own user name, so the receiver tells them apart.
  const env = (user: string) => ({ LECTERN_XAPI_FORWARDINGS: forwardings(rec.url, user), LECTERN_XAPI_FORWARDING_BACKOFF: '20', LECTERN_XAPI_FORWARDING_BATCH_SIZE: '2' });
  const a = await startTestLrs(postgresBackend, { env: env('a') });
  let b: TestLrs | undefined;
  try {
    b = await startTestLrs(postgresBackend, { shareWith: a, env: env('b') });
    const ids: string[] = [];
    const post = async (lrs: TestLrs) => {
      const res = await lrs.fetch(
        '/xAPI/statements',
        jsonInit(
          'POST',
          Array.from({ length: 5 }, () => statement()),
        ),
      );
      assert.equal(res.status, 200);
      ids.push(...((await res.json()) as string[]));
    };
    await Promise.all([a, b, a, b, a, b].map(post));
    await eventually('every statement delivered', () => new Set(rec.ids()).size === ids.length);
    const hb = await eventually('an empty queue', async () => {
      const [s] = await a.lrs.forwarder.stats();
      return s.queued === 0 && s;
    });
    assert.equal(hb.delivered, 30);
    assert.equal(rec.ids().length, ids.length, 'no statement sent twice');
    assert.deepEqual(new Set(rec.ids()), new Set(ids));
    assert.equal(overlapped, false);
    const senders = new Set(rec.requests.map((r) => Buffer.from(String(r.headers.authorization).slice(6), 'base64').toString().split(':')[0]));
    assert.deepEqual(senders, new Set(['a', 'b']), 'both servers delivered');
  } finally {
    await b?.close();
    await a.close();
    await rec.close();
  }
});
