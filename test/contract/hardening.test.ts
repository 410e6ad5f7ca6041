/**
 * Hardening through HTTP: no user enumeration by timing (an unknown user costs a bcrypt check,
 * asserted by counting checks, never by timing), size and nesting limits on every route, no stack
 * traces in responses, and secrets (passwords, hashes, tokens) never in the logs.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, mock, test } from 'node:test';
import { Writable } from 'node:stream';
import bcrypt from 'bcrypt';
import { createLogger } from '../../src/log.ts';
import { ADMIN, BACKENDS, basic, jsonInit, OTHER, sqliteBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { startProvider } from '../helpers/oidc.ts';

const enc = encodeURIComponent;
const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);

describe('no user enumeration by timing', () => {
  test("an unknown user costs one bcrypt check at the users' cost, as a wrong password does", async () => {
    const t = await startTestLrs(sqliteBackend);
    const compare = mock.method(bcrypt, 'compare');
    try {
      for (const [name, user] of [
        ['unknown user', { ...ADMIN, username: 'nobody' }],
        ['wrong password', { ...ADMIN, password: 'wrong' }],
      ] as const) {
        compare.mock.resetCalls();
        assert.equal((await t.fetch('/whoami', { user })).status, 401, name);
        assert.equal(compare.mock.callCount(), 1, `${name}: one bcrypt check`);
        const hash = compare.mock.calls[0].arguments[1] as string;
        // The test users' hashes have cost 4: the decoy has the same, so it takes as long.
        assert.match(hash, /^\$2[aby]\$04\$/, name);
      }
    } finally {
      compare.mock.restore();
      await t.close();
    }
  });
});

for (const backend of BACKENDS) {
  describe(`limits and errors [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { env: { LECTERN_MAX_REQUEST_SIZE: '4096', LECTERN_MAX_DOCUMENT_SIZE: '2048' } });
    });
    after(async () => t?.close());

    test('bodies over the limits are 413 with a JSON body, on statements and documents', async () => {
      const big = statement({ result: { response: 'x'.repeat(5000) } });
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', big));
      assert.equal(res.status, 413);
      assert.match((await res.json()).detail, /LECTERN_MAX_REQUEST_SIZE/);
      const doc = await t.fetch(
        `/xAPI/activities/profile?activityId=${enc('http://example.com/a')}&profileId=big`,
        jsonInit('PUT', { x: 'y'.repeat(3000) }, { headers: { 'if-none-match': '*' } }),
      );
      assert.equal(doc.status, 413);
      assert.match((await doc.json()).detail, /LECTERN_MAX_DOCUMENT_SIZE/);
    });

    test('JSON nested too deeply is a 400 saying so, in statements, documents and parameters', async () => {
      const s = statement({ object: { id: 'http://example.com/a', definition: { extensions: { 'http://example.com/e': JSON.parse(deep(600)) } } } });
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', s));
      assert.equal(res.status, 400);
      assert.match(JSON.stringify(await res.json()), /too deep/);
      const url = `/xAPI/activities/state?activityId=${enc('http://example.com/a')}&agent=${enc(JSON.stringify({ mbox: 'mailto:a@example.com' }))}&stateId=deep`;
      const doc = await t.fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: `{"a":${deep(1000)}}` });
      assert.equal(doc.status, 400);
      assert.match((await doc.json()).detail, /nested more than 512 levels/);
      const param = await t.fetch(`/xAPI/statements?agent=${enc(deep(1500))}`);
      assert.equal(param.status, 400);
    });

    test('request headers over 16 KiB are refused (431) before any work', async () => {
      const res = await t.fetch('/xAPI/statements', { headers: { 'x-padding': 'x'.repeat(20_000) } });
      assert.equal(res.status, 431);
    });

    test('no stack traces or source paths in error responses, even for a server fault', async () => {
      const bad = await t.fetch('/xAPI/statements', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"actor": ' });
      assert.equal(bad.status, 400);
      const badText = await bad.text();
      assert.doesNotMatch(badText, /\bat \S+ \(|\.ts:\d+|node_modules/);
      await t.lrs.store.close();
      const res = await t.fetch('/xAPI/statements');
      assert.ok(res.status >= 500, String(res.status));
      const text = await res.text();
      assert.doesNotMatch(text, /\bat \S+ \(|\.ts:\d+|node_modules|Error:/);
      assert.ok(JSON.parse(text).detail);
      await t.restart();
    });
  });
}

describe('secrets never logged', () => {
  test('passwords, bcrypt hashes and bearer tokens appear in no log line, even at trace level', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const op = await startProvider();
    const t = await startTestLrs(sqliteBackend, {
      logger: createLogger('trace', sink),
      env: { LECTERN_RUNSERVER_AUTH_BACKENDS: 'basic,oidc', LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: op.issuer, LECTERN_RUNSERVER_AUTH_OIDC_JWKS_COOLDOWN: '0' },
    });
    try {
      const token = await op.token({ scope: 'all' });
      const expired = await op.sign({ exp: Math.floor(Date.now() / 1000) - 3600 });
      await t.fetch('/whoami');
      await t.fetch('/xAPI/statements', jsonInit('POST', statement(), { user: OTHER }));
      await t.fetch('/whoami', { user: { ...ADMIN, password: 'wrong-secret-pw' } });
      await t.fetch('/whoami', { user: null, headers: { authorization: `Bearer ${token}` } });
      await t.fetch(`/xAPI/statements?agent=${enc('{"mbox":"mailto:a@example.com"}')}`, { user: null, headers: { authorization: `Bearer ${expired}` } });
      await t.fetch('/xAPI/statements', { user: null, headers: { authorization: `${basic(ADMIN)}x` } });
      const log = lines.join('');
      assert.ok(log.includes('"msg":"request"'), 'requests are logged');
      const hashes = (JSON.parse(readFileSync(t.env.LECTERN_AUTH_FILE, 'utf8')) as { hash: string }[]).map((e) => e.hash);
      for (const secret of [ADMIN.password, OTHER.password, 'wrong-secret-pw', token, expired, token.split('.')[2], basic(ADMIN).slice(6), ...hashes, 'lectern-client-secret']) {
        assert.ok(!log.includes(secret), `a secret leaked into the logs: ${secret.slice(0, 12)}…`);
      }
      assert.doesNotMatch(log, /authorization/i);
    } finally {
      await t.close();
      await op.close();
    }
  });
});
