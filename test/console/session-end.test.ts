/**
 * A console session ends when its credential does: a database credential revoked, expired, or
 * rotated past its grace (the injected clock moves it); a credentials-file user removed, or given
 * another password or other scopes; and the same across a restart on the same
 * LECTERN_CONSOLE_SECRET. The next page is the sign-in page saying why; the script's requests get
 * 401; the cookie is cleared. On every backend.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { writeCredentialsText } from '../../src/auth/credentials.ts';
import { ManualClock } from '../../src/clock.ts';
import { createCredential, revokeCredential, rotateCredential } from '../../src/ops/credentials.ts';
import { ADMIN, BACKENDS, credentialEntries, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { type Signed, signIn } from './sign-in.ts';

const SECRET = 'a-console-secret-of-at-least-32-characters';
const READER: TestUser = { username: 'reader', password: 'reader-pass', scopes: ['statements/read'], agent: { mbox: 'mailto:reader@example.com' } };
const OPS: TestUser = { username: 'ops', password: 'ops-pass', scopes: ['admin'], agent: { mbox: 'mailto:ops@example.com' } };

const get = (t: TestLrs, path: string, s: Signed) => fetch(`${t.url}${path}`, { redirect: 'manual', headers: { cookie: s.cookie } });

/** Asserts that the session has ended: pages go to the sign-in page saying so, the script's requests get 401, the cookie is cleared. */
async function assertEnded(t: TestLrs, s: Signed, what: string): Promise<void> {
  const page = await get(t, '/console/statements?verb=x', s);
  assert.equal(page.status, 303, what);
  const location = page.headers.get('location')!;
  assert.equal(location, `/console/sign-in?next=${encodeURIComponent('/console/statements?verb=x')}&ended=credential`, what);
  assert.match(page.headers.get('set-cookie')!, /^lectern_console=; Path=\/console; Max-Age=0/, what);
  const signInPage = await (await fetch(`${t.url}${location}`, { headers: { cookie: s.cookie } })).text();
  assert.match(signInPage, /role="status">Your session has ended: the credential you signed in with was revoked, rotated, expired or changed/, what);
  assert.match(signInPage, /<form method="post" action="\/console\/sign-in"/, `${what}: the sign-in form, not a redirect back`);
  assert.equal((await get(t, '/console/session', s)).status, 401, what);
  assert.equal((await get(t, '/console/statements/tail?after=2026-01-01T00:00:00Z', s)).status, 401, what);
  const change = await fetch(`${t.url}/console/store`, {
    method: 'POST',
    headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'store=b',
  });
  assert.equal(change.status, 401, what);
}

const assertOpen = async (t: TestLrs, s: Signed, what: string) => assert.equal((await get(t, '/console/statements', s)).status, 200, what);

for (const backend of BACKENDS) {
  describe(`console sessions end with their credential (${backend.name})`, () => {
    let t: TestLrs;
    const clock = new ManualClock(Date.now());
    const agent = { objectType: 'Agent' as const, mbox: 'mailto:lms@example.com' };
    const issue = async (extra: { expires?: string } = {}) => {
      const c = await createCredential(t.lrs.store, { scopes: ['statements/read'], agent, ...extra }, { clock });
      return { c, user: { username: c.key, password: c.secret, scopes: [], agent: {} } satisfies TestUser };
    };
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, READER, OPS], clock, env: { LECTERN_CONSOLE_SECRET: SECRET, LECTERN_AUTH_CREDENTIALS_REFRESH: '0' } });
    });
    after(() => t.close());

    test('a database credential revoked: its session ends at the next request; another one goes on', async () => {
      const { c, user } = await issue();
      const s = await signIn(t, user);
      const other = await signIn(t, (await issue()).user);
      await assertOpen(t, s, 'before the revocation');
      await revokeCredential(t.lrs.store, c.key, { clock });
      await assertEnded(t, s, 'revoked');
      await assertOpen(t, other, 'another credential’s session');
    });

    test('a database credential past its expiry: its session ends', async () => {
      const { user } = await issue({ expires: new Date(clock.now() + 3_600_000).toISOString() });
      const s = await signIn(t, user);
      await assertOpen(t, s, 'before the expiry');
      clock.advance(3_600_000);
      await assertEnded(t, s, 'expired');
    });

    test('a rotation with a grace: the old secret’s session lasts the grace, the new secret’s goes on', async () => {
      const { c, user } = await issue();
      const old = await signIn(t, user);
      const rotated = await rotateCredential(t.lrs.store, c.key, { graceSeconds: 600 }, { clock });
      const fresh = await signIn(t, { ...user, password: rotated.secret });
      clock.advance(599_000);
      await assertOpen(t, old, 'within the grace');
      clock.advance(1000);
      await assertEnded(t, old, 'past the grace');
      await assertOpen(t, fresh, 'the new secret’s session');
      // Rotated again without a grace: the previous secret's session ends at once.
      await rotateCredential(t.lrs.store, c.key, {}, { clock });
      await assertEnded(t, fresh, 'rotated again');
    });

    test('a credentials-file user removed, given a new password, or other scopes: its session ends (the file is re-read)', async () => {
      const file = t.env.LECTERN_AUTH_FILE;
      // The entries as the server has them (one bcrypt hash each); a rewrite of an entry keeps its hash.
      const [adminEntry, readerEntry, opsEntry] = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>[];
      const write = (entries: Record<string, unknown>[]) => writeCredentialsText(file, JSON.stringify(entries));
      const reader = await signIn(t, READER);
      const ops = await signIn(t, OPS);
      const admin = await signIn(t, ADMIN);
      assert.equal((await get(t, '/console/access', ops)).status, 200);
      // The file rewritten, its entries reordered: only the users whose entry changed are signed out.
      write([readerEntry, adminEntry, { ...opsEntry, scopes: ['all'] }]);
      await assertEnded(t, ops, 'no longer an operator');
      await assertOpen(t, reader, 'the same entry');
      const [newPassword] = (await credentialEntries([{ ...READER, password: 'another-pass' }])) as Record<string, unknown>[];
      write([adminEntry, newPassword]);
      await assertEnded(t, reader, 'a new password');
      await assertOpen(t, admin, 'unchanged');
      write([readerEntry]);
      await assertEnded(t, admin, 'removed');
      write([adminEntry, readerEntry, opsEntry]);
    });

    test('after a restart on the same LECTERN_CONSOLE_SECRET: a session goes on, or ends if its credential did meanwhile', async () => {
      const { c, user } = await issue();
      const kept = await signIn(t, ADMIN);
      const s = await signIn(t, user);
      await t.restart();
      await assertOpen(t, kept, 'the same secret after a restart');
      await assertOpen(t, s, 'the credential still holds');
      await revokeCredential(t.lrs.store, c.key, { clock });
      await t.restart();
      await assertEnded(t, s, 'revoked while the server was down');
    });
  });
}
