/**
 * Database credential keys (hardening round 2, items 9 and 10), through HTTP, on every backend:
 * a known key with a wrong secret is answered exactly as an unknown name is (one bcrypt check at
 * the users' cost, counted by a mock; the same status, headers and body; the same 429 once the
 * address is throttled), a stranger who knows an admin key cannot lock it out of the admin API
 * from a clean address, and a rotation (or a creation) on one server works at once on another
 * on the same database without a failure counted there. Clients stand at distinct addresses
 * (LECTERN_RUNSERVER_TRUST_PROXY with X-Forwarded-For). Nothing is timed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import bcrypt from 'bcrypt';
import { createCredential } from '../../src/ops/credentials.ts';
import { BACKENDS, jsonInit, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'operator-pw', scopes: ['admin'], agent: { mbox: 'mailto:operator@example.com' } };
const agent = { objectType: 'Agent' as const, mbox: 'mailto:fleet@example.com' };
const keyUser = (key: string, secret: string): TestUser => ({ username: key, password: secret, scopes: [], agent: {} });

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Headers that differ between any two answers (times, the request's own id). */
const VARYING = new Set(['date', 'x-request-id', 'keep-alive', 'connection', 'x-experience-api-consistent-through']);

async function answer(t: TestLrs, path: string, user: TestUser, address: string): Promise<Answer> {
  const res = await t.fetch(path, { user, version: path.startsWith('/xAPI') ? '1.0.3' : null, headers: { 'x-forwarded-for': address } });
  const headers = Object.fromEntries([...res.headers].filter(([name]) => !VARYING.has(name)));
  return { status: res.status, headers, body: await res.text() };
}

for (const backend of BACKENDS) {
  describe(`database credential keys: not told from unknown names, not locked out, rotated across servers [${backend.name}]`, () => {
    let a: TestLrs;
    let b: TestLrs;
    before(async () => {
      // The change counter is read once an hour: whatever another server does is seen by a re-read only.
      const env = { LECTERN_RUNSERVER_TRUST_PROXY: 'true', LECTERN_AUTH_CREDENTIALS_REFRESH: '3600', LECTERN_AUTH_MAX_FAILURES: '3', LECTERN_ADMIN_MAX_FAILURES: '3' };
      a = await startTestLrs(backend, { users: [OPERATOR], env });
      // One counted failure would block the next sign-in: none may be counted there.
      b = await startTestLrs(backend, { shareWith: a, env: { ...env, LECTERN_AUTH_MAX_FAILURES: '1', LECTERN_ADMIN_MAX_FAILURES: '1' } });
    });
    after(async () => {
      await b?.close();
      await a?.close();
    });

    test("a known key with a wrong secret costs one bcrypt check at the users' cost and gets the answer an unknown name gets", async () => {
      const made = await createCredential(a.lrs.store, { scopes: ['all'], agent });
      const compare = mock.method(bcrypt, 'compare');
      try {
        const answers: Answer[] = [];
        for (const [i, user] of [keyUser(made.key, `${made.secret}x`), keyUser('lk_AAAAAAAAAAAAAAAA', made.secret), keyUser(made.key, 'short')].entries()) {
          compare.mock.resetCalls();
          answers.push(await answer(a, '/xAPI/statements?limit=1', user, `10.1.0.${i}`));
          assert.equal(compare.mock.callCount(), 1, `${user.username}: one bcrypt check`);
          assert.match(compare.mock.calls[0].arguments[1] as string, /^\$2[aby]\$04\$/, 'at the cost of the file users (4 here)');
        }
        assert.equal(answers[0].status, 401);
        assert.deepEqual(answers[1], answers[0], 'an unknown name: the same answer');
        assert.deepEqual(answers[2], answers[0]);
      } finally {
        compare.mock.restore();
      }
      assert.equal((await answer(a, '/xAPI/statements?limit=1', keyUser(made.key, made.secret), '10.1.0.9')).status, 200);
    });

    test('a throttled address gets the same 429 for a known key and an unknown name; a secret already proved still passes', async () => {
      const made = await createCredential(a.lrs.store, { scopes: ['all'], agent });
      const me = keyUser(made.key, made.secret);
      assert.equal((await answer(a, '/xAPI/statements?limit=1', me, '10.2.0.9')).status, 200);
      for (let i = 0; i < 3; i++) assert.equal((await answer(a, '/whoami', keyUser(made.key, `wrong-${i}`), '10.2.0.1')).status, 401);
      const compare = mock.method(bcrypt, 'compare');
      try {
        const known = await answer(a, '/whoami', keyUser(made.key, 'wrong'), '10.2.0.1');
        const unknown = await answer(a, '/whoami', keyUser('lk_BBBBBBBBBBBBBBBB', 'wrong'), '10.2.0.1');
        assert.equal(known.status, 429);
        assert.ok(Number(known.headers['retry-after']) >= 1);
        assert.deepEqual(unknown, known);
        assert.equal(compare.mock.callCount(), 0, 'no bcrypt for a throttled address');
      } finally {
        compare.mock.restore();
      }
      // Its secret, cached by the server, passes as a file user's cached success does.
      assert.equal((await answer(a, '/whoami', me, '10.2.0.1')).status, 200);
    });

    test('a stranger failing on purpose with a known admin key cannot lock it out of the admin API from a clean address', async () => {
      const made = await createCredential(a.lrs.store, { scopes: ['admin'], agent });
      const admin = keyUser(made.key, made.secret);
      const wrong = keyUser(made.key, 'not-the-secret');
      // From one address, then spread over three: the key's failures reach the limit both ways.
      for (let i = 0; i < 3; i++) assert.equal((await answer(a, '/admin/api/status', wrong, '10.3.0.1')).status, 401);
      for (let i = 2; i <= 4; i++) assert.equal((await answer(a, '/admin/api/status', wrong, `10.3.0.${i}`)).status, 401);
      assert.equal((await answer(a, '/admin/api/status', admin, '10.3.0.1')).status, 429, 'the failing addresses are refused');
      assert.equal((await answer(a, '/admin/api/status', admin, '10.3.0.2')).status, 429);
      assert.equal((await answer(a, '/admin/api/status', admin, '10.3.0.50')).status, 200, 'the real user, from a clean address, signs in');
    });

    test('rotated on one server: the new secret works at once on the other, the old one stops, and no failure is counted there', async () => {
      const made = await createCredential(a.lrs.store, { scopes: ['admin', 'all'], agent });
      const at = '10.4.0.1';
      assert.equal((await answer(b, '/admin/api/status', keyUser(made.key, made.secret), at)).status, 200, 'cached by the other server');
      const res = await a.fetch(`/admin/api/credentials/${made.key}/rotate`, jsonInit('POST', {}, { user: OPERATOR, version: null }));
      assert.equal(res.status, 200, await res.clone().text());
      const rotated = (await res.json()) as { secret: string };
      const fresh = keyUser(made.key, rotated.secret);
      // The other server (1 failure allowed) takes it on the admin API and xAPI, again and again.
      for (let i = 0; i < 3; i++) {
        assert.equal((await answer(b, '/admin/api/status', fresh, at)).status, 200, `admin API, try ${i}`);
        assert.equal((await answer(b, '/xAPI/statements?limit=1', fresh, at)).status, 200, `xAPI, try ${i}`);
      }
      assert.equal((await answer(b, '/admin/api/status', keyUser(made.key, made.secret), '10.4.0.2')).status, 401, 'the old secret is refused at once');
    });

    test('created on one server after the other looked the key up: it works there at once', async () => {
      const key = `fleet-${backend.name}`;
      assert.equal((await answer(b, '/whoami', keyUser(key, 'anything'), '10.5.0.1')).status, 401);
      const made = await createCredential(a.lrs.store, { scopes: ['all'], agent, key });
      assert.equal((await answer(b, '/whoami', keyUser(key, made.secret), '10.5.0.2')).status, 200);
    });
  });
}
