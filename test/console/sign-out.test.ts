/**
 * Signing out of the console ends the session on every process: a saved copy of its cookie is
 * refused afterwards (pages, the script's requests, changes) by the server that signed it out and
 * by another one on the same database (SQLite file or PostgreSQL database), and by every worker of
 * a `lectern runserver -w 2`; the user's other sessions go on. Another site cannot sign the
 * operator out: a sign-out from a foreign Origin (or Sec-Fetch-Site) is a 403 without Set-Cookie.
 * While the ended sessions cannot be read or written (PostgreSQL: a lock held past the statement
 * timeout), console requests get 503 and a sign-out keeps its cookie, to be tried again.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { ADMIN, BACKENDS, postgresBackend, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { runserver } from './runserver.ts';
import { type Signed, signIn } from './sign-in.ts';

const SECRET = 'a-console-secret-of-at-least-32-characters';
const OPS: TestUser = { username: 'ops', password: 'ops-pass', scopes: ['admin'], agent: { mbox: 'mailto:ops@example.com' } };

const get = (t: { url: string }, path: string, s: Signed) => fetch(`${t.url}${path}`, { redirect: 'manual', headers: { cookie: s.cookie } });

const signOut = (t: { url: string }, s: Signed, headers: Record<string, string> = {}) =>
  fetch(`${t.url}/console/sign-out`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: s.cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: `csrf=${s.csrf}`,
  });

/** A change with the session's token: the store switcher. */
const switchStore = (t: { url: string }, s: Signed) =>
  fetch(`${t.url}/console/store`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'store=b',
  });

/** The copy of a signed-out session is refused: the page goes to the sign-in page (no notice of a credential), the script gets 401, a change 401. */
async function assertSignedOut(t: TestLrs, copy: Signed, what: string): Promise<void> {
  const page = await get(t, '/console/statements', copy);
  assert.equal(page.status, 303, what);
  assert.equal(page.headers.get('location'), `/console/sign-in?next=${encodeURIComponent('/console/statements')}`, what);
  assert.match(page.headers.get('set-cookie')!, /^lectern_console=; Path=\/console; Max-Age=0/, what);
  assert.equal((await get(t, '/console/session', copy)).status, 401, what);
  assert.equal((await get(t, '/console/overview', copy)).status, 303, what);
  assert.equal((await switchStore(t, copy)).status, 401, what);
  assert.equal((await signOut(t, copy)).status, 303, `${what}: signing out again is harmless`);
}

for (const backend of BACKENDS) {
  describe(`console sign-out (${backend.name})`, () => {
    let a: TestLrs;
    let b: TestLrs;
    before(async () => {
      a = await startTestLrs(backend, { users: [ADMIN, OPS], env: { LECTERN_CONSOLE_SECRET: SECRET } });
      b = await startTestLrs(backend, { shareWith: a });
    });
    after(async () => {
      await b?.close();
      await a?.close();
    });

    test('a saved copy of a signed-out cookie is refused, on this server and on another one on the same database; other sessions go on', async () => {
      const copy = await signIn(a, OPS);
      const other = await signIn(a, OPS);
      assert.equal((await get(b, '/console/session', copy)).status, 200, 'the other server accepts the session');
      const out = await signOut(a, copy);
      assert.equal(out.status, 303);
      assert.match(out.headers.get('set-cookie')!, /^lectern_console=; Path=\/console; Max-Age=0/);
      await assertSignedOut(a, copy, 'the server that signed it out');
      await assertSignedOut(b, copy, 'another server on the same database');
      assert.equal((await get(a, '/console/session', other)).status, 200, 'another session of the same user');
      assert.equal((await get(b, '/console/session', other)).status, 200, 'another session of the same user, on the other server');
      // Signed out on the other server: refused on the first one too.
      assert.equal((await signOut(b, other)).status, 303);
      await assertSignedOut(a, other, 'signed out on the other server');
    });

    test('a store switched after sign-in is the same session: signing out ends the switched cookie too', async () => {
      const s = await signIn(a, OPS);
      const switched = await switchStore(a, s);
      assert.equal(switched.status, 303);
      const resealed: Signed = { cookie: switched.headers.get('set-cookie')!.split(';')[0], csrf: s.csrf };
      assert.equal(((await (await get(a, '/console/session', resealed)).json()) as { store: string }).store, 'b');
      assert.equal((await signOut(a, s)).status, 303);
      await assertSignedOut(b, resealed, 'the resealed cookie');
    });

    test('a sign-out from another site is refused with 403 and no Set-Cookie, with or without a session', async () => {
      const s = await signIn(a, OPS);
      const foreign: Record<string, string>[] = [{ origin: 'https://evil.example' }, { origin: 'null' }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }];
      for (const headers of foreign) {
        const what = JSON.stringify(headers);
        // A cross-site auto-submitted form: SameSite=Strict keeps the cookie back, so none is sent.
        const bare = await fetch(`${a.url}/console/sign-out`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
          body: '',
        });
        assert.equal(bare.status, 403, what);
        assert.equal(bare.headers.get('set-cookie'), null, what);
        assert.match(((await bare.json()) as { detail: string }).detail, /own pages/, what);
        const withSession = await signOut(a, s, headers);
        assert.equal(withSession.status, 403, what);
        assert.equal(withSession.headers.get('set-cookie'), null, what);
      }
      assert.equal((await get(a, '/console/session', s)).status, 200, 'the session is still open');
      // From the console's own page (Sec-Fetch-Site same-origin, this host's Origin): signed out.
      const own = await signOut(a, s, { origin: a.url, 'sec-fetch-site': 'same-origin' });
      assert.equal(own.status, 303);
      await assertSignedOut(a, s, 'signed out from its own page');
    });

    test('any other change from another site (Sec-Fetch-Site) is refused too, its CSRF token notwithstanding', async () => {
      const s = await signIn(a, OPS);
      const res = await fetch(`${a.url}/console/store`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
        body: 'store=b',
      });
      assert.equal(res.status, 403);
      assert.equal(res.headers.get('set-cookie'), null);
      const signInFrom = await fetch(`${a.url}/console/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
        body: new URLSearchParams({ username: OPS.username, password: OPS.password }),
      });
      assert.equal(signInFrom.status, 403);
      assert.equal(signInFrom.headers.get('set-cookie'), null);
    });
  });
}

describe('console sign-out across worker processes', { skip: postgresSkipped() && 'needs PostgreSQL' }, () => {
  test('lectern runserver -w 2: a session signed out on one worker is refused by every worker', async () => {
    const server = await runserver(postgresBackend, {}, 0, ['--workers', '2'], [OPS]);
    try {
      const res = await fetch(`${server.url}/console/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ username: OPS.username, password: OPS.password }),
      });
      const cookie = res.headers.get('set-cookie')!.split(';')[0];
      const page = await (await fetch(`${server.url}/console/statements`, { headers: { cookie } })).text();
      const csrf = /name="csrf-token" content="([^"]+)"/.exec(page)![1];
      // A new connection each time: the cluster hands connections to the workers in turn.
      const statuses = (method: 'GET' | 'POST', path: string, n: number) =>
        Promise.all(
          Array.from(
            { length: n },
            () =>
              new Promise<number>((resolve, reject) => {
                const req = request(
                  `${server.url}${path}`,
                  { method, agent: false, headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/x-www-form-urlencoded' } },
                  (r) => {
                    r.resume();
                    resolve(r.statusCode ?? 0);
                  },
                );
                req.on('error', reject);
                req.end(method === 'POST' ? 'store=b' : undefined);
              }),
          ),
        );
      assert.deepEqual(await statuses('GET', '/console/session', 8), Array(8).fill(200));
      assert.deepEqual(await statuses('POST', '/console/sign-out', 1), [303]);
      assert.deepEqual(await statuses('GET', '/console/session', 8), Array(8).fill(401));
      assert.deepEqual(await statuses('POST', '/console/store', 4), Array(4).fill(401));
    } finally {
      await server.stop();
    }
  });
});

describe('console sessions while the ended sessions do not answer (PostgreSQL)', { skip: postgresSkipped() && 'needs PostgreSQL' }, () => {
  test('a request gets 503, never 500; a sign-out 503 that keeps the cookie; once they answer, the session goes on and signs out', async () => {
    const t = await startTestLrs(postgresBackend, { users: [ADMIN, OPS], env: { LECTERN_POSTGRES_STATEMENT_TIMEOUT: '1000' } });
    const db = new pg.Client({ connectionString: t.env.LECTERN_POSTGRES_URL });
    await db.connect();
    try {
      const s = await signIn(t, OPS);
      // No read of the table: every console request waits for the lock, past the statement timeout.
      await db.query('BEGIN');
      await db.query('LOCK TABLE ended_sessions IN ACCESS EXCLUSIVE MODE');
      const page = await get(t, '/console/statements', s);
      assert.equal(page.status, 503);
      assert.ok(page.headers.get('retry-after'));
      assert.match(await page.text(), /cannot check your sign-in/);
      assert.equal((await get(t, '/console/session', s)).status, 503);
      const refused = await signOut(t, s);
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get('set-cookie'), null);
      await db.query('ROLLBACK');
      // Reads, but no write: the sign-out itself cannot be recorded.
      await db.query('BEGIN');
      await db.query('LOCK TABLE ended_sessions IN EXCLUSIVE MODE');
      assert.equal((await get(t, '/console/session', s)).status, 200);
      const unrecorded = await signOut(t, s);
      assert.equal(unrecorded.status, 503);
      assert.equal(unrecorded.headers.get('set-cookie'), null);
      await db.query('ROLLBACK');
      assert.equal((await get(t, '/console/session', s)).status, 200, 'the session is still open: nothing was recorded');
      assert.equal((await signOut(t, s)).status, 303);
      await assertSignedOut(t, s, 'signed out once the table answers');
    } finally {
      await db.end();
      await t.close();
    }
  });
});
