/** The password-check throttle's pieces: what an address counts as, the order checks start in, and the admin sign-in failure rule. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ADDRESS_CHECKS, CheckThrottle, clientKey, QUEUED_CHECKS, SignInFailures, type CheckRefused } from '../../src/auth/throttle.ts';

test('an address counts as itself (IPv4, IPv4-mapped) or by its /64 (IPv6)', () => {
  assert.equal(clientKey('203.0.113.7'), '203.0.113.7');
  assert.equal(clientKey('::ffff:203.0.113.7'), '203.0.113.7');
  assert.equal(clientKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  assert.equal(clientKey('2001:0db8:0001:0002:ffff::1'), '2001:db8:1:2::/64');
  assert.equal(clientKey('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(clientKey('2001:db8:1:2::'), '2001:db8:1:2::/64');
  assert.equal(clientKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
  assert.equal(clientKey('::1'), '0:0:0:0::/64');
  assert.equal(clientKey('::'), '0:0:0:0::/64');
});

test('checks start in turns by address, addresses without a failure first', async () => {
  const throttle = new CheckThrottle({ concurrency: 1, maxFailures: 0, failureWindowMs: 60_000 });
  const started: string[] = [];
  const gates: (() => void)[] = [];
  const check = (name: string) => () =>
    new Promise<void>((resolve) => {
      started.push(name);
      gates.push(resolve);
    });
  throttle.failed('10.0.0.1');
  const all = [
    ...['a1', 'a2', 'a3'].map((n) => throttle.run('10.0.0.1', check(n))),
    ...['b1', 'b2'].map((n) => throttle.run('10.0.0.2', check(n))),
    throttle.run('10.0.0.3', check('c1')),
  ];
  throttle.failed('10.0.0.3');
  while (started.length < 6) {
    const n = started.length;
    gates[n - 1]();
    await new Promise((r) => setImmediate(r));
    assert.equal(started.length, n + 1);
  }
  gates[5]();
  await Promise.all(all);
  // a1 ran at once; b (clean) before the addresses that failed, which then take turns.
  assert.deepEqual(started, ['a1', 'b1', 'b2', 'a2', 'c1', 'a3']);
});

test('a full queue gives the place of the newest check of an address that failed to a clean address, never a clean one', async () => {
  const throttle = new CheckThrottle({ concurrency: 1, maxFailures: 0, failureWindowMs: 60_000 });
  const gates: (() => void)[] = [];
  const outcomes = new Map<string, string>();
  const run = (address: string, name: string) =>
    throttle
      .run(address, () => new Promise<void>((resolve) => gates.push(resolve)))
      .then(
        () => outcomes.set(name, 'ran'),
        (err: CheckRefused) => outcomes.set(name, String(err.status)),
      );
  throttle.failed('10.0.1.1');
  throttle.failed('10.0.1.2');
  const all: Promise<unknown>[] = [];
  // One runs; 7 + 7 × 8 + 1 = 64 wait: the queue is full.
  for (let i = 0; i < ADDRESS_CHECKS; i++) all.push(run('10.0.1.1', `f1-${i}`));
  for (let a = 1; a <= 7; a++) for (let i = 0; i < ADDRESS_CHECKS; i++) all.push(run(`10.0.2.${a}`, `c${a}-${i}`));
  all.push(run('10.0.1.2', 'f2-0'));
  await new Promise((r) => setImmediate(r));
  assert.equal(outcomes.size, 0);
  // A failing address is refused outright; a clean one takes the newest failing check's place.
  all.push(run('10.0.1.2', 'f2-1'), run('10.0.3.1', 'n1'), run('10.0.3.2', 'n2'));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(
    [...outcomes],
    [
      ['f2-1', '503'],
      ['f2-0', '503'],
      [`f1-${ADDRESS_CHECKS - 1}`, '503'],
    ],
  );
  // Only clean checks and older failing ones wait now: failing ones give way until none is left, then 503.
  for (let i = 3; i <= ADDRESS_CHECKS + 1; i++) all.push(run(`10.0.3.${i}`, `n${i}`));
  await new Promise((r) => setImmediate(r));
  assert.equal([...outcomes.values()].filter((o) => o === '503').length, 3 + ADDRESS_CHECKS - 2 + 1);
  assert.equal(outcomes.get(`n${ADDRESS_CHECKS + 1}`), '503', 'every waiter clean: refused');
  const refused = [...outcomes].filter(([, o]) => o === '503').map(([name]) => name);
  assert.ok(
    refused.every((name) => name.startsWith('f') || name === `n${ADDRESS_CHECKS + 1}`),
    refused.join(' '),
  );
  while (gates.length) {
    gates.shift()!();
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(all);
  assert.equal(QUEUED_CHECKS, 64);
});

test('admin sign-in failures: a blocked user name is refused at addresses that failed, never at a clean one', () => {
  const f = new SignInFailures(3, 60_000);
  for (const at of ['10.0.0.1', '10.0.0.1', '10.0.0.2']) f.failed(at, 'op');
  assert.ok(f.blocked('10.0.0.1', 'op') > 0);
  assert.ok(f.blocked('10.0.0.2', 'op') > 0);
  assert.equal(f.blocked('10.0.0.3', 'op'), 0, 'a clean address is checked');
  assert.equal(f.blocked('10.0.0.1', 'another'), 0, 'the address is not blocked itself (2 < 3)');
  f.failed('10.0.0.1', 'another');
  assert.ok(f.blocked('10.0.0.1', undefined) > 0, 'the address is blocked whatever it sends');
  // One failure from a new address: it is refused for that name from then on.
  f.failed('10.0.0.4', 'op');
  assert.ok(f.blocked('10.0.0.4', 'op') > 0);
  assert.equal(f.blocked('10.0.0.4', 'someone'), 0);
  // IPv6 by /64, as everywhere.
  f.failed('2001:db8:1:2::1', 'op');
  assert.ok(f.blocked('2001:db8:1:2::99', 'op') > 0);
  assert.equal(new SignInFailures(0, 60_000).blocked('10.0.0.1', 'op'), 0, '0: no limit');
});
