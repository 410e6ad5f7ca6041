/**
 * The console's request bodies and its `next` parameter, on every backend. Every body, the
 * console's forms (sign-in, sign-out, each change) as the xAPI's and the admin API's, is read
 * under LECTERN_REQUEST_BODY_TIMEOUT and LECTERN_REQUEST_BODY_MIN_RATE: a form trickled or stalled
 * gets 408 and its connection closed. A `next` that a Location header could not carry (CR, LF,
 * U+2028, U+2029, anything but printable ASCII) is a 400 naming it, on the sign-in page and the
 * store switcher, never a 500, and the session is left as it was.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, basic, sqliteBackend, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { LRS_AUDIENCE, startProvider } from '../helpers/oidc.ts';
import { type Signed, signIn } from './sign-in.ts';

const OPS: TestUser = { username: 'ops', password: 'ops-pass', scopes: ['admin'], agent: { mbox: 'mailto:ops@example.com' } };

/** A form body to send slowly: longer than what is sent of it, so it never ends. */
const FORM = `username=admin&password=admin-pass&next=${'x'.repeat(200)}`;

interface SlowAnswer {
  /** What the server sent (its status line first), '' when nothing. */
  text: string;
  /** Whether the server closed the connection (rather than the test giving up on it). */
  closedByServer: boolean;
}

/**
 * Sends a POST's headers, then its body a byte every 100 ms (`trickle`: never idle for a second)
 * or a few bytes and nothing more (`stall`), until the server answers and closes the connection.
 * A server that never does gets up to 60 bytes (or, stalled, 6 s) before the test gives up on it,
 * so that the test fails rather than hangs.
 */
function slowPost(t: TestLrs, path: string, headers: Record<string, string>, mode: 'trickle' | 'stall'): Promise<SlowAnswer> {
  const url = new URL(t.url);
  const socket = connect(Number(url.port), url.hostname);
  const head = Object.entries({ host: url.host, 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(FORM.length), ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`);
  let text = '';
  let closedByServer = false;
  let giveUp: NodeJS.Timeout | undefined;
  let timer: NodeJS.Timeout | undefined;
  const abandon = (ms: number) => (giveUp ??= setTimeout(() => socket.destroy(), ms));
  if (mode === 'stall') {
    socket.write(FORM.slice(0, 10));
    abandon(6000);
  } else {
    let sent = 0;
    timer = setInterval(() => {
      if (sent < 60) socket.write(FORM[sent++]);
      else abandon(2000);
    }, 100);
  }
  return new Promise((resolve) => {
    socket.on('data', (d) => (text += d.toString('latin1')));
    socket.on('end', () => {
      closedByServer = true;
      socket.destroy();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ text, closedByServer });
    });
  });
}

/** A console page's answer to a form with `next`, without following a redirect. */
const postForm = (t: TestLrs, path: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${t.url}${path}`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(form) });

/** The characters a Location header must never carry. */
const BREAKS: [string, string][] = [
  ['CR', '\r'],
  ['LF', '\n'],
  ['U+2028', '\u2028'],
  ['U+2029', '\u2029'],
];

for (const backend of BACKENDS) {
  describe(`console bodies and next (${backend.name})`, () => {
    let t: TestLrs;
    let ops: Signed;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, OPS], env: { LECTERN_REQUEST_BODY_TIMEOUT: '1' } });
      ops = await signIn(t, OPS);
    });
    after(() => t.close());

    test('every console form and the admin API: a body trickled under LECTERN_REQUEST_BODY_MIN_RATE, or stalled for LECTERN_REQUEST_BODY_TIMEOUT, gets 408 and its connection closed', {
      timeout: 60_000,
    }, async () => {
      const session = { cookie: ops.cookie, 'x-csrf-token': ops.csrf };
      const bodies: [string, string, Record<string, string>][] = [
        ['sign-in', '/console/sign-in', {}],
        ['sign-out', '/console/sign-out', session],
        ['store switch', '/console/store', session],
        ['rejections clear', '/console/rejections/clear', session],
        ['admin API', '/admin/api/erase', { authorization: basic(OPS) }],
      ];
      const cases = bodies.flatMap(([what, path, headers]) =>
        (['trickle', 'stall'] as const).map(async (mode) => ({ what: `${what} (${mode})`, mode, answer: await slowPost(t, path, headers, mode) })),
      );
      for (const { what, mode, answer } of await Promise.all(cases)) {
        assert.match(answer.text, /^HTTP\/1\.1 408 /, what);
        assert.match(answer.text, /\r\nconnection: close\r\n/i, what);
        assert.match(answer.text, mode === 'trickle' ? /LECTERN_REQUEST_BODY_MIN_RATE/ : /LECTERN_REQUEST_BODY_TIMEOUT/, what);
        assert.ok(answer.closedByServer, `${what}: the server closed the connection`);
      }
      // The session was neither ended nor changed by the refused forms.
      const now = (await (await fetch(`${t.url}/console/session`, { headers: { cookie: ops.cookie } })).json()) as { store: string };
      assert.equal(now.store, '');
    });

    test('a sign-in whose next a Location header cannot carry: a 400 page naming next, and no session', async () => {
      for (const [name, c] of BREAKS) {
        const next = `/console/statements${c}Set-Cookie: x=y`;
        const res = await postForm(t, '/console/sign-in', { username: ADMIN.username, password: ADMIN.password, next });
        assert.equal(res.status, 400, name);
        assert.equal(res.headers.get('set-cookie'), null, name);
        assert.equal(res.headers.get('location'), null, name);
        assert.match(await res.text(), /role="alert"[^<]*next/, name);
        const page = await fetch(`${t.url}/console/sign-in?next=${encodeURIComponent(next)}`, { redirect: 'manual' });
        assert.equal(page.status, 400, `${name}: the sign-in page`);
        assert.match(await page.text(), /role="alert"[^<]*next/, name);
        const signed = await fetch(`${t.url}/console/sign-in?next=${encodeURIComponent(next)}`, { redirect: 'manual', headers: { cookie: ops.cookie } });
        assert.equal(signed.status, 400, `${name}: the sign-in page when signed in already`);
        assert.equal(signed.headers.get('location'), null, name);
      }
      // A next in printable ASCII still leads there.
      const ok = await postForm(t, '/console/sign-in', { username: ADMIN.username, password: ADMIN.password, next: '/console/statements?verb=a%0Db' });
      assert.equal(ok.status, 303);
      assert.equal(ok.headers.get('location'), '/console/statements?verb=a%0Db');
    });

    test('a store switch whose next a Location header cannot carry: a 400 naming next, the store unchanged', async () => {
      for (const [name, c] of BREAKS) {
        const res = await postForm(t, '/console/store', { csrf: ops.csrf, store: 'b', next: `/console/statements${c}x` }, { cookie: ops.cookie });
        assert.equal(res.status, 400, name);
        assert.equal(res.headers.get('set-cookie'), null, name);
        assert.equal(res.headers.get('location'), null, name);
        assert.match(await res.text(), /next/, name);
      }
      const session = (await (await fetch(`${t.url}/console/session`, { headers: { cookie: ops.cookie } })).json()) as { store: string };
      assert.equal(session.store, '', 'the session still works in its store');
      const ok = await postForm(t, '/console/store', { csrf: ops.csrf, store: '', next: '/console/overview' }, { cookie: ops.cookie });
      assert.equal(ok.status, 303);
      assert.equal(ok.headers.get('location'), '/console/overview');
    });
  });
}

describe('console sign-in through OpenID Connect: next', () => {
  test('a next a Location header cannot carry is a 400 sign-in page naming it, before the provider is asked', async () => {
    const op = await startProvider({ browserClient: { id: 'lectern-console', redirectUri: 'http://127.0.0.1/console/oidc/callback' } });
    const t = await startTestLrs(sqliteBackend, {
      env: {
        LECTERN_RUNSERVER_AUTH_BACKENDS: 'basic,oidc',
        LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: op.issuer,
        LECTERN_RUNSERVER_AUTH_OIDC_AUDIENCE: LRS_AUDIENCE,
        LECTERN_CONSOLE_OIDC_CLIENT_ID: 'lectern-console',
      },
    });
    try {
      for (const [name, c] of BREAKS) {
        const res = await fetch(`${t.url}/console/oidc/start?next=${encodeURIComponent(`/console/statements${c}x`)}`, { redirect: 'manual' });
        assert.equal(res.status, 400, name);
        assert.equal(res.headers.get('location'), null, name);
        assert.equal(res.headers.get('set-cookie'), null, `${name}: no sign-in started`);
        assert.match(await res.text(), /role="alert"[^<]*next/, name);
      }
      const ok = await fetch(`${t.url}/console/oidc/start?next=${encodeURIComponent('/console/learner')}`, { redirect: 'manual' });
      assert.equal(ok.status, 303);
      assert.ok(ok.headers.get('location')!.startsWith(op.issuer), 'to the provider');
    } finally {
      await t.close();
      await op.close();
    }
  });
});
