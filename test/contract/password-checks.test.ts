/**
 * Password checks are bounded and fair (issue 27, item 4): bcrypt runs at most
 * LECTERN_AUTH_BCRYPT_CONCURRENCY at once, in turns by client address, so a flood of unknown users
 * from one address does not push a real user's sign-in back; an address that keeps failing gets
 * 429 without any bcrypt. Shown by counting and holding bcrypt checks (a mock), never by timing.
 * Clients connect from other loopback addresses (Linux routes all of 127.0.0.0/8 to lo).
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import bcrypt from 'bcrypt';
import { ADMIN, basic, OTHER, sqliteBackend, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import type { Socket } from 'node:net';
import { rawRequest, serverSockets, until, type RawAnswer } from '../helpers/raw.ts';

const REAL: TestUser = { username: 'real', password: 'real-pass', scopes: ['all'], agent: { mbox: 'mailto:real@example.com' } };

interface Check {
  password: string;
  resolve(good: boolean): void;
}

/** bcrypt.compare replaced: each check waits in `held` until the test answers it (or answers at once when `holding` is off). */
function holdChecks() {
  const state = { holding: true, calls: [] as string[], held: [] as Check[] };
  const original = bcrypt.compare.bind(bcrypt) as (p: string, h: string) => Promise<boolean>;
  const compare = mock.method(bcrypt, 'compare', ((password: string, hash: string) => {
    state.calls.push(password);
    if (!state.holding) return original(password, hash);
    return new Promise<boolean>((resolve) => state.held.push({ password, resolve }));
  }) as typeof bcrypt.compare);
  return { state, restore: () => compare.mock.restore() };
}

const whoami = (t: TestLrs, from: string, user: TestUser, headers: Record<string, string> = {}): Promise<RawAnswer> =>
  rawRequest(t, new Map(), { method: 'GET', path: '/whoami', headers: { authorization: basic(user), ...headers }, localAddress: from }).answer;

/**
 * Waits until the server has read `n` requests from `address`, then for one more round trip: by
 * then each of them has reached its password check (nothing but microtasks lies between).
 */
async function arrived(t: TestLrs, sockets: Map<string, Socket>, address: string, n: number): Promise<void> {
  await until(() => [...sockets.values()].filter((s) => s.remoteAddress === address && s.bytesRead > 0).length >= n, `${n} requests from ${address}`);
  assert.equal((await t.fetch('/xAPI/about', { user: null })).status, 200);
}

describe('password checks: bounded, fair between addresses, failures limited per address', () => {
  let t: TestLrs;
  let sockets: Map<string, Socket>;
  let checks: ReturnType<typeof holdChecks>;
  beforeEach(async () => {
    t = await startTestLrs(sqliteBackend, { users: [ADMIN, OTHER, REAL] });
    sockets = serverSockets(t);
    checks = holdChecks();
  });
  afterEach(async () => {
    checks.restore();
    await t.close();
  });

  test("a flood of unknown users from one address: bounded, and a real user's check from another starts next", async () => {
    const { state } = checks;
    // 32 concurrent unknown users from 127.0.0.2, each with its own password.
    const flood = Array.from({ length: 32 }, (_, i) => whoami(t, '127.0.0.2', { ...ADMIN, username: `nobody-${i}`, password: `guess-${i}` }));
    const early: RawAnswer[] = [];
    for (const f of flood) void f.then((r) => early.push(r));
    // Two checks run (LECTERN_AUTH_BCRYPT_CONCURRENCY), six wait: eight per address; the rest is refused unchecked.
    await until(() => state.held.length === 2 && early.length === 24, 'the flood to be checked or refused');
    assert.equal(state.calls.length, 2, 'only the pool runs bcrypt');
    assert.ok(
      early.every((r) => r.status === 429 && r.headers['retry-after']),
      JSON.stringify(early.map((r) => r.status)),
    );

    const real = whoami(t, '127.0.0.3', REAL);
    await arrived(t, sockets, '127.0.0.3', 1);
    assert.equal(state.calls.length, 2, 'the pool is full: the real user waits');

    // Answer the checks one by one, as bcrypt would.
    while (state.held.length) {
      const check = state.held.shift()!;
      const before = state.calls.length;
      check.resolve(check.password === REAL.password);
      await until(() => state.calls.length > before || state.calls.length === 2 + 6 + 1, 'the next check to start');
    }
    const realIndex = state.calls.indexOf(REAL.password);
    assert.ok(realIndex >= 0 && realIndex <= 2, `the real user's check started after ${realIndex} others (the pool is 2)`);
    assert.equal((await real).status, 200);
    for (const r of await Promise.all(flood)) assert.ok(r.status === 401 || r.status === 429, String(r.status));
  });

  test('an address that failed LECTERN_AUTH_MAX_FAILURES times gets 429 without bcrypt; others, and its cached credentials, still pass', async () => {
    const { state } = checks;
    state.holding = false;
    assert.equal((await whoami(t, '127.0.0.2', REAL)).status, 200, 'cached from now on');
    for (let i = 0; i < 10; i++) assert.equal((await whoami(t, '127.0.0.2', { ...ADMIN, username: `nobody-${i}` })).status, 401);
    const spent = state.calls.length;
    for (const user of [{ ...ADMIN, username: 'nobody-else' }, { ...ADMIN, password: 'wrong' }, OTHER]) {
      const res = await whoami(t, '127.0.0.2', user);
      assert.equal(res.status, 429, user.username);
      assert.ok(Number(res.headers['retry-after']) >= 1 && Number(res.headers['retry-after']) <= 60);
      assert.match(JSON.parse(res.body).detail, /too many failed sign-ins/);
    }
    assert.equal(state.calls.length, spent, 'no bcrypt for a limited address');
    assert.equal((await whoami(t, '127.0.0.2', REAL)).status, 200, 'cached credentials need no bcrypt: they pass');
    assert.equal((await whoami(t, '127.0.0.3', OTHER)).status, 200, 'another address signs in');
    assert.equal(state.calls.length, spent + 1);
  });

  test('concurrent requests with the same credentials wait for one check', async () => {
    const { state } = checks;
    const same = Array.from({ length: 20 }, () => whoami(t, '127.0.0.4', OTHER));
    await arrived(t, sockets, '127.0.0.4', 20);
    assert.equal(state.calls.length, 1);
    state.held.shift()!.resolve(true);
    for (const r of await Promise.all(same)) assert.equal(r.status, 200);
    assert.equal(state.calls.length, 1);
  });

  test('the queue of all addresses is bounded: beyond it 503 with Retry-After, unchecked', async () => {
    const { state } = checks;
    // Ten addresses, eight unknown users each: 2 running and 64 waiting at most.
    const all = [];
    const answered: RawAnswer[] = [];
    for (let a = 0; a < 10; a++) {
      for (let i = 0; i < 8; i++) {
        const r = whoami(t, `127.0.1.${a + 1}`, { ...ADMIN, username: `nobody-${a}-${i}`, password: `p-${a}-${i}` });
        void r.then((x) => answered.push(x));
        all.push(r);
      }
    }
    await until(() => answered.length === 80 - 66, 'the requests beyond the queue to be refused');
    assert.ok(
      answered.every((r) => r.status === 503 && r.headers['retry-after']),
      JSON.stringify(answered.map((r) => r.status)),
    );
    assert.equal(state.calls.length, 2);
    state.holding = false;
    while (state.held.length) state.held.shift()!.resolve(false);
    await Promise.all(all);
  });

  test("a queue full of addresses that failed: a clean address's check takes the place of the newest of theirs; refused only when every waiter is clean", async () => {
    const { state } = checks;
    // Nine addresses fail once each (under LECTERN_AUTH_MAX_FAILURES: not yet limited).
    state.holding = false;
    const failing = Array.from({ length: 9 }, (_, a) => `127.0.2.${a + 1}`);
    for (const from of failing) assert.equal((await whoami(t, from, { ...ADMIN, password: 'wrong' })).status, 401);
    state.holding = true;
    state.calls.length = 0;
    // Then 8 unknown users each (the review: 72 addresses × 2): 2 checks run, 64 wait, 6 refused.
    const answered: RawAnswer[] = [];
    const flood = failing.flatMap((from, a) =>
      Array.from({ length: 8 }, (_, i) => {
        const r = whoami(t, from, { ...ADMIN, username: `nobody-${a}-${i}`, password: `p-${a}-${i}` });
        void r.then((x) => answered.push(x));
        return r;
      }),
    );
    await until(() => answered.length === 72 - 66, 'the requests beyond the queue to be refused');
    assert.ok(answered.every((r) => r.status === 503));

    // A real user from a clean address is queued, in the place of a failing address's newest check.
    const real = whoami(t, '127.0.0.3', REAL);
    await until(() => answered.length === 7, 'a failing check to give its place');
    assert.equal(answered[6].status, 503);
    assert.ok(answered[6].headers['retry-after']);
    // A failing address's new check, with the queue full, is refused: the real user keeps its place.
    const late = await whoami(t, failing[0], { ...ADMIN, username: 'nobody-late', password: 'p-late' });
    assert.ok(late.status === 503 || late.status === 429, String(late.status));

    // Answered one by one: the clean address's check starts first.
    state.holding = false;
    state.held.shift()!.resolve(false);
    await until(() => state.calls.includes(REAL.password), "the real user's check");
    assert.equal(state.calls.indexOf(REAL.password), 2, 'next after the two running');
    assert.equal((await real).status, 200);
    while (state.held.length) state.held.shift()!.resolve(false);
    await Promise.all(flood);
    assert.equal(state.calls.length, 2 + 64, 'no bcrypt for the refused');
  });

  test('a queue full of clean addresses: a clean newcomer is refused (nobody to give way)', async () => {
    const { state } = checks;
    const answered: RawAnswer[] = [];
    const all = Array.from({ length: 9 * 8 }, (_, n) => {
      const r = whoami(t, `127.0.3.${Math.floor(n / 8) + 1}`, { ...ADMIN, username: `nobody-${n}`, password: `p-${n}` });
      void r.then((x) => answered.push(x));
      return r;
    });
    await until(() => answered.length === 72 - 66, 'the requests beyond the queue to be refused');
    const real = await whoami(t, '127.0.0.3', REAL);
    assert.equal(real.status, 503);
    assert.equal(answered.length, 6, 'no waiter gave its place');
    state.holding = false;
    while (state.held.length) state.held.shift()!.resolve(false);
    await Promise.all(all);
  });
});

describe('behind a reverse proxy (LECTERN_RUNSERVER_TRUST_PROXY)', () => {
  for (const [setting, separate] of [
    ['false', false],
    ['loopback', true],
  ] as const) {
    test(`${setting}: failures count against ${separate ? 'the forwarded client' : 'the connecting address'}`, async () => {
      const t = await startTestLrs(sqliteBackend, { env: { LECTERN_RUNSERVER_TRUST_PROXY: setting, LECTERN_AUTH_MAX_FAILURES: '2' } });
      try {
        const wrong = { ...ADMIN, password: 'wrong' };
        for (let i = 0; i < 2; i++) assert.equal((await whoami(t, '127.0.0.5', wrong, { 'x-forwarded-for': '203.0.113.7' })).status, 401);
        assert.equal((await whoami(t, '127.0.0.5', wrong, { 'x-forwarded-for': '203.0.113.7' })).status, 429);
        const other = await whoami(t, '127.0.0.5', ADMIN, { 'x-forwarded-for': '203.0.113.8' });
        assert.equal(other.status, separate ? 200 : 429);
      } finally {
        await t.close();
      }
    });
  }
});
