/** The password-check throttle's pieces: what an address counts as, and the order checks start in. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CheckThrottle, clientKey } from '../../src/auth/throttle.ts';

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
