/**
 * The operator console over HTTP (the browser tests are in ./browser.test.ts): sign-in and its
 * cookie, CSRF, expiry, sessions across processes, throttled failures, the store a session works
 * in, headers and assets, downloads. On SQLite and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ADMIN, jsonInit, OTHER, postgresBackend, sqliteBackend, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { createCredential, revokeCredential } from '../../src/ops/credentials.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { runserver } from './runserver.ts';
import { type Signed, signIn } from './sign-in.ts';

const SECRET = 'a-console-secret-of-at-least-32-characters';
/** A user that may only write statements, and one that may read only those it stored. */
const WRITER: TestUser = { username: 'writer', password: 'writer-pass', scopes: ['statements/write'], agent: { mbox: 'mailto:writer@example.com' } };
const MINE: TestUser = { username: 'mine', password: 'mine-pass', scopes: ['statements/write', 'statements/read/mine'], agent: { mbox: 'mailto:mine@example.com' } };

const get = (t: TestLrs, path: string, s?: Signed) => fetch(`${t.url}${path}`, { redirect: 'manual', headers: s ? { cookie: s.cookie } : {} });

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`console sessions (${backend.name})`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, OTHER, TENANT_B, WRITER, MINE], env: { LECTERN_CONSOLE_SECRET: SECRET, LECTERN_AUTH_CREDENTIALS_REFRESH: '0' } });
    });
    after(() => t.close());

    test('pages need a session: the sign-in page comes back to the page asked for', async () => {
      const res = await get(t, '/console/statements?verb=x');
      assert.equal(res.status, 303);
      assert.equal(res.headers.get('location'), `/console/sign-in?next=${encodeURIComponent('/console/statements?verb=x')}`);
      const tail = await get(t, '/console/statements/tail?after=2026-01-01T00:00:00Z');
      assert.equal(tail.status, 401);
      assert.match(((await tail.json()) as { detail: string }).detail, /sign in/);
    });

    test('the sign-in gives an HttpOnly, SameSite=Strict cookie, Secure when a trusted proxy says https', async () => {
      const res = await fetch(`${t.url}/console/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'username=admin&password=admin-pass&next=%2Fconsole%2Flearner',
      });
      assert.equal(res.status, 303);
      assert.equal(res.headers.get('location'), '/console/learner');
      const set = res.headers.get('set-cookie')!;
      assert.match(set, /^lectern_console=[\w-]+; Path=\/console; Max-Age=28800; HttpOnly; SameSite=Strict$/);
      // The session's content is sealed: neither the user's name nor its scopes can be read from it.
      assert.doesNotMatch(Buffer.from(set.split(/[=;]/)[1], 'base64url').toString('latin1'), /admin/);

      const proxied = await startTestLrs(sqliteBackend, { env: { LECTERN_RUNSERVER_TRUST_PROXY: 'true' } });
      try {
        const viaTls = await fetch(`${proxied.url}/console/sign-in`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-proto': 'https' },
          body: 'username=admin&password=admin-pass',
        });
        assert.match(viaTls.headers.get('set-cookie')!, /; Secure$/);
      } finally {
        await proxied.close();
      }
    });

    test('a sign-in from another site’s page is refused; from this host’s, over a TLS proxy or not, accepted', async () => {
      const from = (origin: string) =>
        fetch(`${t.url}/console/sign-in`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', origin },
          body: 'username=admin&password=admin-pass',
        });
      const host = new URL(t.url).host;
      assert.equal((await from('https://evil.example')).status, 403);
      assert.equal((await from('null')).status, 403);
      assert.equal((await from(`http://${host}`)).status, 303);
      assert.equal((await from(`https://${host}`)).status, 303);
    });

    test('an open redirect is refused: `next` stays in the console', async () => {
      for (const next of ['https://evil.example/', '//evil.example/console', '/xAPI/statements', '/console\\@evil']) {
        const res = await fetch(`${t.url}/console/sign-in`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ username: 'admin', password: 'admin-pass', next }),
        });
        assert.equal(res.headers.get('location'), '/console/statements', next);
      }
    });

    test('sign-out needs the session’s CSRF token; without it (or from another origin) it is refused', async () => {
      const s = await signIn(t, TENANT_B);
      const out = (body: string, headers: Record<string, string> = {}) =>
        fetch(`${t.url}/console/sign-out`, {
          method: 'POST',
          redirect: 'manual',
          headers: { cookie: s.cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
          body,
        });
      assert.equal((await out('')).status, 403);
      assert.equal((await out('csrf=not-the-token')).status, 403);
      assert.equal((await out(`csrf=${s.csrf}`, { origin: 'https://evil.example' })).status, 403);
      assert.equal((await get(t, '/console/session', s)).status, 200, 'the session is still open');
      const ok = await out('', { 'x-csrf-token': s.csrf });
      assert.equal(ok.status, 303);
      assert.match(ok.headers.get('set-cookie')!, /^lectern_console=; Path=\/console; Max-Age=0/);
    });

    test('a session works in its user’s store only', async () => {
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'http://example.com/verbs/in-default' } })))).status, 200);
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'http://example.com/verbs/in-b' } }), { user: TENANT_B }))).status, 200);
      const b = await signIn(t, TENANT_B);
      const page = await (await get(t, '/console/statements', b)).text();
      assert.match(page, /in-b/);
      assert.doesNotMatch(page, /in-default/);
      assert.match(page, /store “b”/);
      const session = (await (await get(t, '/console/session', b)).json()) as Record<string, unknown>;
      assert.deepEqual({ ...session, expires: undefined }, { username: 'tenant-b', scopes: ['all'], store: 'b', expires: undefined });
    });

    test('a session reads with its user’s scopes: only its own statements, or a page naming the scope it lacks', async () => {
      const [own] = (await (
        await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'http://example.com/verbs/by-mine' } }), { user: MINE }))
      ).json()) as string[];
      await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'http://example.com/verbs/by-admin' } })));
      const mine = await signIn(t, MINE);
      const page = await (await get(t, '/console/statements', mine)).text();
      assert.match(page, new RegExp(own));
      assert.doesNotMatch(page, /by-admin/);
      const learner = await get(t, '/console/learner?agent=ben%40example.com', mine);
      assert.equal(learner.status, 403, 'the Agents view is every statement’s: not for a reader of its own');
      const writer = await signIn(t, WRITER);
      const refused = await get(t, '/console/statements', writer);
      assert.equal(refused.status, 403);
      assert.match(await refused.text(), /needs the scope statements\/read\/mine, which writer does not hold/);
      assert.equal((await get(t, `/console/statements/download`, writer)).status, 403);
      assert.equal((await get(t, `/console/statements/${own}`, writer)).status, 403);
    });

    test('a credential in the database signs in through the same form, in its store; once revoked, it cannot', async () => {
      const issued = await createCredential(t.lrs.store, { scopes: ['statements/read'], agent: { objectType: 'Agent', mbox: 'mailto:lms@example.com' }, target: 'b' });
      const user: TestUser = { username: issued.key, password: issued.secret, scopes: [], agent: {} };
      const s = await signIn(t, user);
      const session = (await (await get(t, '/console/session', s)).json()) as Record<string, unknown>;
      assert.deepEqual([session.username, session.scopes, session.store], [issued.key, ['statements/read'], 'b']);
      await revokeCredential(t.lrs.store, issued.key);
      // LECTERN_AUTH_CREDENTIALS_REFRESH=0: the server sees the revocation at the next sign-in.
      const status = (
        await fetch(`${t.url}/console/sign-in`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ username: issued.key, password: issued.secret }),
        })
      ).status;
      assert.equal(status, 401);
    });

    test('another process with the same secret accepts the session; one with another secret does not', async () => {
      const s = await signIn(t, ADMIN);
      const same = await startTestLrs(backend, { shareWith: t });
      const other = await startTestLrs(backend, { shareWith: t, env: { LECTERN_CONSOLE_SECRET: 'another-console-secret-of-32-characters!' } });
      try {
        assert.equal((await get(same, '/console/statements', s)).status, 200);
        assert.equal((await get(other, '/console/statements', s)).status, 303);
      } finally {
        await same.close();
        await other.close();
      }
    });

    test('pages carry a strict Content-Security-Policy; assets are hashed and immutable', async () => {
      const res = await get(t, '/console/sign-in');
      const csp = res.headers.get('content-security-policy')!;
      assert.match(csp, /default-src 'none'; script-src 'self'; style-src 'self'/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
      const html = await res.text();
      assert.doesNotMatch(html, /<script>|<style|style="/, 'no inline script or style');
      const js = /src="(\/console\/assets\/[0-9a-f]{16}\/console\.js)"/.exec(html)![1];
      const asset = await get(t, js);
      assert.equal(asset.status, 200);
      assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.match(asset.headers.get('content-type')!, /^text\/javascript/);
      assert.equal((await get(t, js.replace(/[0-9a-f]{16}/, '0000000000000000'))).status, 404);
    });

    test('a download streams the query as CSV of the chosen fields; a bad filter is a 400 before any byte', async () => {
      const s = await signIn(t, ADMIN);
      const ids = (await (
        await t.fetch(
          '/xAPI/statements',
          jsonInit(
            'POST',
            [1, 2, 3].map((n) => statement({ verb: { id: 'http://example.com/verbs/csv' }, result: { score: { scaled: n / 10 } } })),
          ),
        )
      ).json()) as string[];
      const csv = await get(
        t,
        `/console/statements/download?verb=${encodeURIComponent('http://example.com/verbs/csv')}&format=csv&fields=id&fields=result.score.scaled&fields=actor&limit=1`,
        s,
      );
      assert.equal(csv.status, 200);
      assert.match(csv.headers.get('content-disposition')!, /^attachment; filename="statements-[\dT-]+\.csv"$/);
      assert.deepEqual((await csv.text()).trimEnd().split('\r\n'), [
        'id,result.score.scaled,actor',
        ...ids.toReversed().map((id, i) => `${id},${(3 - i) / 10},mailto:ben@example.com`),
      ]);
      const nd = await get(t, `/console/statements/download?verb=${encodeURIComponent('http://example.com/verbs/csv')}&format=ndjson`, s);
      assert.deepEqual(
        (await nd.text())
          .trimEnd()
          .split('\n')
          .map((l) => (JSON.parse(l) as { id: string }).id),
        ids.toReversed(),
      );
      const bad = await get(t, '/console/statements/download?since=yesterday', s);
      assert.equal(bad.status, 400);
      assert.match(((await bad.json()) as { detail: string }).detail, /since/);
      assert.equal((await get(t, '/console/statements/download?fields=password', s)).status, 400);
    });

    test('the live tail looks a few seconds back: a statement committed late, stored before the newest shown, still comes', async () => {
      const s = await signIn(t);
      const verb = encodeURIComponent('http://example.com/verbs/tail');
      const [id] = (await (await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'http://example.com/verbs/tail' } })))).json()) as string[];
      const stored = ((await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json()) as { stored: string }).stored;
      const later = new Date(Date.parse(stored) + 1000).toISOString();
      const res = await get(t, `/console/statements/tail?verb=${verb}&after=${encodeURIComponent(later)}`, s);
      const body = (await res.json()) as { rows: string[]; after: string; more: boolean };
      assert.equal(body.rows.length, 1);
      assert.match(body.rows[0], new RegExp(`data-id="${id}"`));
      assert.equal(body.after, later, 'the newest shown stays the newest');
      assert.equal(body.more, false);
      const bad = await get(t, '/console/statements/tail?after=soon', s);
      assert.equal(bad.status, 400);
    });

    test('a bad filter shows the reason on the page (400), never a 500', async () => {
      const s = await signIn(t, ADMIN);
      const res = await get(t, '/console/statements?agent=nobody&registration=nope', s);
      assert.equal(res.status, 400);
      assert.match(await res.text(), /role="alert"/);
      assert.equal((await get(t, '/console/statements/not-a-uuid', s)).status, 400);
      // Malformed requests: the client's 4xx with a JSON body, never a 500.
      for (const [path, status] of [
        ['/console/statements?verb=a&verb=b', 400],
        ['/console/learner?agent=%FF', 400],
        ['/console/statements/tail?after=%E0%A4', 400],
      ] as const) {
        const res = await get(t, path, s);
        assert.equal(res.status, status, path);
        assert.ok(((await res.json()) as { detail: unknown }).detail, path);
      }
      const post = (body: string) => fetch(`${t.url}/console/sign-in`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
      const large = await post(`username=admin&password=${'a'.repeat(20_000)}`);
      assert.equal(large.status, 413);
      assert.match(((await large.json()) as { detail: string }).detail, /at most 8192 bytes/);
      assert.equal((await post('username=admin&username=other&password=x')).status, 400);
      // Without a Content-Length (chunked): refused as the bytes go past the bound.
      const chunked = await fetch(`${t.url}/console/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode(`password=${'a'.repeat(20_000)}`)), c.close()) }),
        duplex: 'half',
      } as RequestInit);
      assert.equal(chunked.status, 413);
    });
  });
}

describe('console sign-in limits', () => {
  test('wrong passwords get 401, then 429 from the throttle (per address)', async () => {
    const t = await startTestLrs(sqliteBackend, { env: { LECTERN_AUTH_MAX_FAILURES: '3' } });
    try {
      const attempt = () =>
        fetch(`${t.url}/console/sign-in`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'username=admin&password=wrong' });
      const first = await attempt();
      assert.equal(first.status, 401);
      assert.match(await first.text(), /Wrong username or password/);
      assert.equal(first.headers.get('set-cookie'), null);
      let last = first;
      for (let i = 0; i < 3; i++) last = await attempt();
      assert.equal(last.status, 429);
      assert.match(await last.text(), /Too many sign-in attempts/);
      assert.ok(last.headers.get('retry-after'));
    } finally {
      await t.close();
    }
  });

  test('a session past LECTERN_CONSOLE_SESSION_TTL is refused: the console asks to sign in again', async () => {
    const t = await startTestLrs(sqliteBackend, { env: { LECTERN_CONSOLE_SESSION_TTL: '1' } });
    try {
      const s = await signIn(t);
      assert.equal((await get(t, '/console/statements', s)).status, 200);
      await sleep(1100);
      const res = await get(t, '/console/statements', s);
      assert.equal(res.status, 303);
      assert.match(res.headers.get('location')!, /^\/console\/sign-in/);
    } finally {
      await t.close();
    }
  });
});

describe('console sessions across worker processes', { skip: postgresSkipped() && 'needs PostgreSQL' }, () => {
  test('lectern runserver -w 2 without a secret: every worker accepts a session another one opened', async () => {
    const server = await runserver(postgresBackend, {}, 0, ['--workers', '2']);
    try {
      const res = await fetch(`${server.url}/console/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ username: ADMIN.username, password: ADMIN.password }),
      });
      const cookie = res.headers.get('set-cookie')!.split(';')[0];
      // A new connection each time: the cluster hands connections to the workers in turn.
      const statuses = await Promise.all(
        Array.from(
          { length: 8 },
          () =>
            new Promise<number>((resolve, reject) => {
              const req = request(`${server.url}/console/session`, { agent: false, headers: { cookie } }, (r) => {
                r.resume();
                resolve(r.statusCode ?? 0);
              });
              req.on('error', reject);
              req.end();
            }),
        ),
      );
      assert.deepEqual(statuses, Array(8).fill(200));
    } finally {
      await server.stop();
    }
  });
});
