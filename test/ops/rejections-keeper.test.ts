/**
 * The RejectionKeeper (src/ops/rejections.ts) on its own: it never throws nor waits on the
 * caller's path, keeps none under LECTERN_REJECTIONS_MAX=0, drops and counts what arrives while
 * its queue is full — the flooder's own, never a quiet writer's (a queue per store and
 * credential, served in turn) — counts a failed write, and cuts each body to LECTERN_REJECTIONS_MAX_BODY as a
 * copy (the request's buffer is not held).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { FairQueue, QUEUE_MAX, RAW_MAX, RejectionKeeper, type RefusedWrite } from '../../src/ops/rejections.ts';
import type { NewRejection, RejectionStore } from '../../src/store/types.ts';

const refused = (body = Buffer.from('{"verb":{"id":"not an iri"}}'), username = 'u', target = ''): RefusedWrite => ({
  user: { username, scopes: ['all'], agent: { mbox: 'mailto:u@example.com' }, target },
  method: 'POST',
  path: '/xAPI/statements',
  query: {},
  headers: { 'content-type': 'application/json', 'x-experience-api-version': '1.0.3', authorization: 'Basic secret' },
  status: 400,
  reasons: [{ loc: ['verb', 'id'], msg: 'not an IRI', type: 'value_error.iri' }],
  body,
});

function fakeStore(opts: { fail?: boolean; slow?: Promise<void> } = {}) {
  const written: NewRejection[][] = [];
  const store = {
    async keepRejections(items: NewRejection[]) {
      await opts.slow;
      if (opts.fail) throw new Error('disk full');
      written.push(items);
    },
  } as Pick<RejectionStore, 'keepRejections'> as RejectionStore;
  return { store, written };
}

const counter = () => {
  const counts = { kept: 0, dropped: 0, failed: 0 };
  return { counts, onCount: (o: keyof typeof counts, n: number) => (counts[o] += n) };
};

test('keeps after the answer, in a batch, the body cut to a copy of maxBody bytes, no credentials', async () => {
  const { store, written } = fakeStore();
  const { counts, onCount } = counter();
  const keeper = new RejectionKeeper({ store, max: 10, maxBody: 5, keepDays: 7, clock: new ManualClock(1_000), onCount });
  const body = Buffer.from('0123456789');
  keeper.keep(refused(body));
  keeper.keep(refused());
  assert.equal(written.length, 0, "nothing is written on the caller's turn");
  await keeper.flush();
  assert.equal(written.length, 1);
  const [first] = written[0];
  assert.equal(first.body!.toString(), '01234');
  assert.notEqual(first.body!.buffer, body.buffer);
  assert.equal(first.bodyBytes, 10);
  assert.equal(first.atMs, 1_000);
  assert.deepEqual(first.headers, { 'content-type': 'application/json' });
  assert.ok(!JSON.stringify(first).includes('secret'));
  assert.deepEqual(counts, { kept: 2, dropped: 0, failed: 0 });
});

test('LECTERN_REJECTIONS_MAX=0 keeps none', async () => {
  const { store, written } = fakeStore();
  const keeper = new RejectionKeeper({ store, max: 0, maxBody: 100, keepDays: 7 });
  keeper.keep(refused());
  await keeper.flush();
  assert.equal(written.length, 0);
});

test('a flood beyond the queue is dropped and counted; a failed write is counted, never thrown', async () => {
  let release!: () => void;
  const slow = new Promise<void>((resolve) => (release = resolve));
  const { store, written } = fakeStore({ slow });
  const { counts, onCount } = counter();
  const keeper = new RejectionKeeper({ store, max: 10, maxBody: 100, keepDays: 7, onCount });
  for (let wave = 0; wave < 40; wave++) {
    for (let i = 0; i < 100; i++) keeper.keep(refused());
    await new Promise((resolve) => setImmediate(resolve));
  }
  release();
  await keeper.flush();
  const kept = written.flat().length;
  assert.ok(counts.dropped > 0);
  assert.equal(kept + counts.dropped, 4000);
  assert.equal(counts.kept, kept);
  assert.ok(kept <= 1200, `${kept}: the queue holds at most 1,000 (+ a batch being written)`);

  const failing = fakeStore({ fail: true });
  const c2 = counter();
  const warned: unknown[] = [];
  const k2 = new RejectionKeeper({ store: failing.store, max: 10, maxBody: 100, keepDays: 7, onCount: c2.onCount, logger: { warn: (o: unknown) => warned.push(o) } as never });
  k2.keep(refused());
  await k2.flush();
  assert.deepEqual(c2.counts, { kept: 0, dropped: 0, failed: 1 });
  assert.equal(warned.length, 1);
});

test("a fair queue: taken one of each key in turn; when full, the longest queue's oldest makes room", () => {
  const q = new FairQueue<string>(6);
  for (const item of ['f1', 'f2', 'f3', 'f4', 'q1', 'r1']) assert.equal(q.push(item[0], item), false);
  assert.equal(q.push('q', 'q2'), true, 'full: an item was dropped');
  assert.equal(q.push('f', 'f5'), true);
  assert.equal(q.size, 6);
  assert.deepEqual(q.take(4), ['f3', 'q1', 'r1', 'f4'], "f's two oldest made room; one of each key in turn");
  assert.deepEqual(q.take(10), ['q2', 'f5']);
  assert.equal(q.size, 0);
});

test('a flood from one credential drops its own: every refused write of a quiet credential and of another store is kept', async () => {
  let release!: () => void;
  const slow = new Promise<void>((resolve) => (release = resolve));
  const { store, written } = fakeStore({ slow });
  const { counts, onCount } = counter();
  const keeper = new RejectionKeeper({ store, max: 10, maxBody: 100, keepDays: 7, onCount });
  const flood = 4000;
  for (let wave = 0; wave < 40; wave++) {
    // More than RAW_MAX in one turn of the event loop, then the quiet ones among them.
    for (let i = 0; i < 100; i++) keeper.keep(refused(undefined, 'flood'));
    if (wave % 10 === 5) {
      keeper.keep(refused(undefined, 'quiet'));
      keeper.keep(refused(undefined, 'b-writer', 'b'));
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  release();
  await keeper.flush();
  const kept = written.flat();
  const of = (u: string) => kept.filter((r) => r.username === u);
  assert.equal(of('quiet').length, 4);
  assert.deepEqual(
    of('b-writer').map((r) => r.tenant),
    ['b', 'b', 'b', 'b'],
  );
  assert.ok(counts.dropped >= flood - QUEUE_MAX - RAW_MAX - 200, `${counts.dropped} dropped`);
  assert.equal(kept.length + counts.dropped, flood + 8, 'each one kept or counted as dropped');
  assert.equal(of('flood').length + counts.dropped, flood, "only the flooder's were dropped");
});
