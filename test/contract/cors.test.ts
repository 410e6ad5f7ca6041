/** CORS on the xAPI routes (LECTERN_CORS_ALLOWED_ORIGINS), through HTTP, on every backend. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, startTestLrs, type TestLrs } from '../helpers/lrs.ts';

const preflight = (t: TestLrs, path: string, origin: string) =>
  t.fetch(path, {
    method: 'OPTIONS',
    user: null,
    version: null,
    headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization, content-type, x-experience-api-version' },
  });

const list = (v: string | null): string[] => (v ?? '').split(',').map((s) => s.trim().toLowerCase());

for (const backend of BACKENDS) {
  describe(`CORS, any origin (the default) [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    test('preflight on xAPI resources: 204 with the methods and headers xAPI clients send, no credentials needed', async () => {
      for (const path of ['/xAPI/statements', '/xAPI/statements/', '/xAPI/about', '/xAPI/activities/state', '/xAPI/agents/profile']) {
        const res = await preflight(t, path, 'https://app.example.com');
        assert.equal(res.status, 204, path);
        assert.equal(res.headers.get('access-control-allow-origin'), '*', path);
        const methods = list(res.headers.get('access-control-allow-methods'));
        for (const m of ['get', 'head', 'put', 'post', 'delete']) assert.ok(methods.includes(m), `${path} ${m}`);
        const headers = list(res.headers.get('access-control-allow-headers'));
        for (const h of ['authorization', 'content-type', 'x-experience-api-version', 'if-match', 'if-none-match', 'accept-language'])
          assert.ok(headers.includes(h), `${path} ${h}`);
        assert.ok(Number(res.headers.get('access-control-max-age')) > 0, path);
      }
    });

    test('responses, errors included, allow the origin and expose the xAPI headers', async () => {
      for (const init of [{}, { user: null }, { version: null }]) {
        const res = await t.fetch('/xAPI/statements?limit=1', { ...init, headers: { origin: 'https://app.example.com' } });
        assert.equal(res.headers.get('access-control-allow-origin'), '*', String(res.status));
        const exposed = list(res.headers.get('access-control-expose-headers'));
        for (const h of ['x-experience-api-version', 'x-experience-api-consistent-through', 'last-modified', 'etag', 'content-type']) assert.ok(exposed.includes(h), h);
      }
    });

    test('no CORS headers without an Origin, nor outside the xAPI routes', async () => {
      assert.equal((await t.fetch('/xAPI/statements')).headers.get('access-control-allow-origin'), null);
      assert.equal((await t.fetch('/whoami', { headers: { origin: 'https://app.example.com' } })).headers.get('access-control-allow-origin'), null);
    });
  });

  describe(`CORS, configured origins [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { env: { LECTERN_CORS_ALLOWED_ORIGINS: 'https://a.example.com, https://b.example.com' } });
    });
    after(async () => t?.close());

    test('an allowed origin is echoed back, with Vary: Origin', async () => {
      for (const origin of ['https://a.example.com', 'https://b.example.com']) {
        const res = await t.fetch('/xAPI/statements', { headers: { origin } });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('access-control-allow-origin'), origin);
        assert.ok(list(res.headers.get('vary')).includes('origin'));
        assert.ok(list(res.headers.get('access-control-expose-headers')).includes('x-experience-api-consistent-through'));
        const pre = await preflight(t, '/xAPI/statements', origin);
        assert.equal(pre.status, 204);
        assert.equal(pre.headers.get('access-control-allow-origin'), origin);
        assert.ok(list(pre.headers.get('access-control-allow-methods')).includes('put'));
      }
    });

    test('another origin gets no CORS permission (the request itself is still answered), and Vary: Origin', async () => {
      const res = await t.fetch('/xAPI/statements', { headers: { origin: 'https://evil.example.com' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('access-control-allow-origin'), null);
      assert.ok(list(res.headers.get('vary')).includes('origin'));
      const pre = await preflight(t, '/xAPI/statements', 'https://evil.example.com');
      assert.equal(pre.headers.get('access-control-allow-origin'), null);
      assert.equal(pre.headers.get('access-control-allow-methods'), null);
    });
  });
}
