/**
 * OpenID Connect bearer tokens against a real OpenID provider started in-process (oidc-provider):
 * discovery, tokens from its token endpoint, every way a token can be wrong, scopes and target
 * from the token, key rotation without a restart, Basic and OIDC side by side, and start-up when
 * the provider cannot be reached.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { exportSPKI, importJWK } from 'jose';
import { ADMIN, BACKENDS, jsonInit, sqliteBackend, startTestLrs, statement, TENANT_B, type TestLrs } from '../helpers/lrs.ts';
import { LRS_AUDIENCE, newKey, startProvider, type TestProvider } from '../helpers/oidc.ts';

const bearer = (token: string) => ({ user: null, headers: { authorization: `Bearer ${token}` } });
const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** Asserts a token refusal: 401, a Bearer challenge, `{"detail": ...}` matching `why`. */
async function refused(res: Response, why: RegExp): Promise<void> {
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/);
  const body = await res.json();
  assert.deepEqual(Object.keys(body), ['detail']);
  assert.match(body.detail, /^Could not validate credentials/);
  assert.match(body.detail, why);
}

for (const backend of BACKENDS) {
  describe(`OpenID Connect [${backend.name}]`, () => {
    let op: TestProvider;
    let t: TestLrs;
    before(async () => {
      op = await startProvider();
      t = await startTestLrs(backend, {
        env: {
          LECTERN_RUNSERVER_AUTH_BACKENDS: 'basic,oidc',
          LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: op.issuer,
          LECTERN_RUNSERVER_AUTH_OIDC_AUDIENCE: LRS_AUDIENCE,
          LECTERN_RUNSERVER_AUTH_OIDC_JWKS_COOLDOWN: '0',
        },
      });
    });
    after(async () => {
      await t?.close();
      await op?.close();
    });

    test("a token from the provider's token endpoint: whoami, and statements stored with the openid authority", async () => {
      const token = await op.token({ scope: 'openid email profile statements/read statements/write' });
      const who = await t.fetch('/whoami', { ...bearer(token), version: null });
      assert.equal(who.status, 200);
      assert.deepEqual(await who.json(), {
        username: 'lectern-client',
        // `openid email profile` are OpenID Connect's scopes, not xAPI's: ignored, never a 500.
        scopes: ['authenticated', 'statements/read', 'statements/write'],
        agent: { objectType: 'Agent', openid: `${op.issuer}/lectern-client` },
      });
      const posted = await t.fetch('/xAPI/statements', jsonInit('POST', statement(), bearer(token)));
      assert.equal(posted.status, 200);
      const [id] = await posted.json();
      const s = await (await t.fetch(`/xAPI/statements?statementId=${id}`, bearer(token))).json();
      assert.deepEqual(s.authority, { objectType: 'Agent', openid: `${op.issuer}/lectern-client` });
    });

    test('scopes come from the token and are enforced; a bare `profile` grants no profile documents', async () => {
      const reader = await op.token({ scope: 'statements/read profile' });
      assert.equal((await t.fetch('/xAPI/statements', bearer(reader))).status, 200);
      const post = await t.fetch('/xAPI/statements', jsonInit('POST', statement(), bearer(reader)));
      assert.equal(post.status, 403);
      assert.equal((await post.json()).scope, 'statements/write');
      const profile = await t.fetch(`/xAPI/activities/profile?activityId=${encodeURIComponent('http://example.com/a')}&profileId=p`, bearer(reader));
      assert.equal(profile.status, 403);
      const writer = await op.token({ scope: 'profile/write profile/read' });
      const put = await t.fetch(
        `/xAPI/activities/profile?activityId=${encodeURIComponent('http://example.com/a')}&profileId=p`,
        jsonInit('PUT', { a: 1 }, { ...bearer(writer), headers: { ...bearer(writer).headers, 'if-none-match': '*' } }),
      );
      assert.equal(put.status, 204);
      // An array claim works too.
      const arrayScopes = await op.sign({ scope: ['statements/read', 'openid'] });
      assert.deepEqual((await (await t.fetch('/whoami', bearer(arrayScopes))).json()).scopes, ['authenticated', 'statements/read']);
    });

    test('the target claim puts the token user in its store', async () => {
      const token = await op.token({ client: 'tenant-b-client', scope: 'all' });
      const [id] = await (await t.fetch('/xAPI/statements', jsonInit('POST', statement(), bearer(token)))).json();
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, { user: TENANT_B })).status, 200);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, { user: ADMIN })).status, 404);
      assert.equal((await t.fetch('/whoami', bearer(await op.sign({ target: 7 })))).status, 401, 'a target that is not a string');
    });

    test('the validation claim (LECTERN_RUNSERVER_AUTH_OIDC_VALIDATION_CLAIM) chooses lax or strict for the token user', async () => {
      const broken = statement({ result: { score: { min: 1, max: 1 } } });
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', broken, bearer(await op.sign({ xapi_validation: 'lax' }))))).status, 200);
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', broken, bearer(await op.sign({ xapi_validation: 'strict' }))))).status, 400);
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', broken, bearer(await op.sign())))).status, 400, 'absent: the default, strict');
      await refused(
        await t.fetch('/xAPI/statements', jsonInit('POST', broken, bearer(await op.sign({ xapi_validation: 'loose' })))),
        /xapi_validation claim must be "strict" or "lax"/,
      );
    });

    test('a token for another audience is refused', async () => {
      await refused(await t.fetch('/xAPI/statements', bearer(await op.token({ resource: 'http://other-service.test/' }))), /audience/);
      await refused(await t.fetch('/xAPI/statements', bearer(await op.sign({ aud: 'http://other-service.test/' }))), /audience/);
    });

    test('a token of another issuer is refused', async () => {
      await refused(await t.fetch('/xAPI/statements', bearer(await op.sign({ iss: 'http://evil.test' }))), /another provider/);
    });

    test('expired and not-yet-valid tokens are refused (beyond the leeway)', async () => {
      const now = Math.floor(Date.now() / 1000);
      await refused(await t.fetch('/xAPI/statements', bearer(await op.sign({ iat: now - 7200, exp: now - 3600 }))), /expired/);
      await refused(await t.fetch('/xAPI/statements', bearer(await op.sign({ nbf: now + 3600 }))), /not valid yet/);
      await refused(await t.fetch('/xAPI/statements', bearer(await op.sign({ exp: undefined }))), /exp/);
      // Within the leeway: accepted.
      assert.equal((await t.fetch('/xAPI/statements', bearer(await op.sign({ exp: now - 5 })))).status, 200);
    });

    test('a token signed by a key the provider never published is refused', async () => {
      await refused(await t.fetch('/xAPI/statements', bearer(await op.sign({}, { key: await newKey('never-published') }))), /key the provider does not publish/);
      // Under the provider's key id, but another key: the signature does not verify.
      const impostor = await newKey(op.current().kid);
      await refused(await t.fetch('/xAPI/statements', bearer(await op.sign({}, { key: impostor }))), /signature/);
    });

    test('alg "none" and HS256 keyed with the provider\'s public key are refused', async () => {
      const claims = { iss: op.issuer, aud: LRS_AUDIENCE, sub: 'x', scope: 'all', exp: Math.floor(Date.now() / 1000) + 600 };
      const none = `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims)}.`;
      await refused(await t.fetch('/xAPI/statements', bearer(none)), /./);
      const pem = await exportSPKI((await importJWK(op.current().publicJwk, 'RS256', { extractable: true })) as CryptoKey);
      for (const secret of [pem, JSON.stringify(op.current().publicJwk)]) {
        const head = `${b64url({ alg: 'HS256', typ: 'JWT', kid: op.current().kid })}.${b64url(claims)}`;
        const hs = `${head}.${createHmac('sha256', secret).update(head).digest('base64url')}`;
        await refused(await t.fetch('/xAPI/statements', bearer(hs)), /algorithm|key/);
      }
    });

    test('garbage, an empty bearer token and a token without a subject are refused', async () => {
      await refused(await t.fetch('/xAPI/statements', bearer('not-a-jwt')), /malformed/);
      await refused(await t.fetch('/xAPI/statements', { user: null, headers: { authorization: 'Bearer ' } }), /bearer token is required|Could not/);
      await refused(await t.fetch('/xAPI/statements', bearer(await op.sign({ sub: undefined }))), /sub/);
    });

    test('key rotation at the provider is picked up without restarting Lectern', async () => {
      const before = await op.token({ scope: 'all' });
      assert.equal((await t.fetch('/whoami', bearer(before))).status, 200);
      const next = await op.rotate(true);
      const after = await op.token({ scope: 'all' });
      assert.equal(JSON.parse(Buffer.from(after.split('.')[0], 'base64url').toString()).kid, next.kid);
      assert.equal((await t.fetch('/whoami', bearer(after))).status, 200);
      assert.equal((await t.fetch('/whoami', bearer(before))).status, 200, 'the old key is still published');
      // The old key withdrawn: tokens signed with it are refused once the keys are refetched.
      await op.rotate(false);
      const newest = await op.token({ scope: 'all' });
      assert.equal((await t.fetch('/whoami', bearer(newest))).status, 200);
      await refused(await t.fetch('/whoami', bearer(await op.sign({}, { key: next }))), /key the provider does not publish/);
    });

    test('Basic and OIDC side by side: each scheme to its backend; no credentials get both challenges', async () => {
      assert.equal((await t.fetch('/whoami', { version: null })).status, 200, 'Basic still works');
      const none = await t.fetch('/xAPI/statements', { user: null });
      assert.equal(none.status, 401);
      assert.match(none.headers.get('www-authenticate') ?? '', /Basic.*Bearer/);
      const wrongBasic = await t.fetch('/xAPI/statements', { user: { ...ADMIN, password: 'nope' } });
      assert.equal(wrongBasic.status, 401);
      assert.match(wrongBasic.headers.get('www-authenticate') ?? '', /^Basic/);
      assert.ok((await wrongBasic.json()).error);
    });
  });
}

describe('OpenID Connect only, and start-up', () => {
  test('LECTERN_RUNSERVER_AUTH_BACKEND=oidc: Basic credentials get the Bearer 401', async () => {
    const op = await startProvider();
    const t = await startTestLrs(sqliteBackend, {
      env: { LECTERN_RUNSERVER_AUTH_BACKEND: 'oidc', LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: op.issuer, LECTERN_RUNSERVER_AUTH_OIDC_JWKS_COOLDOWN: '0' },
    });
    try {
      await refused(await t.fetch('/whoami'), /bearer token is required/);
      // Without an audience setting any audience is accepted (docs/configuration.md strongly advises setting it).
      assert.equal((await t.fetch('/whoami', bearer(await op.token({ resource: 'http://any.test/' })))).status, 200);
      // The provider stops: a token naming a key not yet fetched cannot be checked: 503, not 401.
      const unknown = await op.sign({}, { key: await newKey('later') });
      await op.close();
      const res = await t.fetch('/whoami', bearer(unknown));
      assert.equal(res.status, 503);
      assert.match((await res.json()).detail, /identity provider/);
    } finally {
      await t.close();
      await op.close().catch(() => {});
    }
  });

  test('an unreachable provider stops start-up after the retries: startLrs rejects, runserver exits 2', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const issuer = `http://127.0.0.1:${port}`;
    await assert.rejects(
      startTestLrs(sqliteBackend, {
        env: { LECTERN_RUNSERVER_AUTH_BACKEND: 'oidc', LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: issuer, LECTERN_RUNSERVER_AUTH_OIDC_DISCOVERY_RETRIES: '1' },
      }),
      /cannot discover the OpenID provider .* \(gave up after 2 attempts\)/,
    );
    const cli = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
    assert.ok(existsSync(cli), 'build first: npm run build');
    const r = spawnSync(process.execPath, [cli, 'runserver', '-p', '0'], {
      env: {
        PATH: process.env.PATH,
        LECTERN_LOG_LEVEL: 'silent',
        LECTERN_SQLITE_PATH: ':memory:',
        LECTERN_RUNSERVER_AUTH_BACKEND: 'oidc',
        LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: issuer,
        LECTERN_RUNSERVER_AUTH_OIDC_DISCOVERY_RETRIES: '0',
      },
      encoding: 'utf8',
      timeout: 20_000,
    });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI/);
    // Enabling oidc without an issuer is a configuration error naming the variable.
    const noIssuer = spawnSync(process.execPath, [cli, 'runserver', '-p', '0'], {
      env: { PATH: process.env.PATH, LECTERN_RUNSERVER_AUTH_BACKENDS: 'basic,oidc' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    assert.equal(noIssuer.status, 2);
    assert.match(noIssuer.stderr, /LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI is required/);
  });
});
