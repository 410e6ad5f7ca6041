/** HTTP Basic auth, /whoami and the heartbeats, through HTTP, on every backend. */
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { ADMIN, BACKENDS, basic, credentialEntries, OTHER, sqliteBackend, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';

/** Made by Python (the `crypt` module, as Ralph's bcrypt does): password "s3cret", cost 12. */
const RALPH_HASH = '$2b$12$ClNueXjcfkD2Uof5P9.1Tu46AiimdcDwpmrb6ZwMVCjRprTicKwkC';

for (const backend of BACKENDS) {
  describe(`auth and system endpoints [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    test('whoami: 200 with username, "authenticated" then the scopes, and the agent', async () => {
      const res = await t.fetch('/whoami', { version: null });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), {
        username: 'admin',
        scopes: ['authenticated', 'all'],
        agent: { objectType: 'Agent', mbox: 'mailto:admin@example.com' },
      });
    });

    for (const [name, authorization] of [
      ['no credentials', undefined],
      ['a wrong password', basic({ ...ADMIN, password: 'wrong' })],
      ['an unknown user', basic({ ...ADMIN, username: 'nobody' })],
      ['a malformed header', 'Basic !!!'],
      ['another scheme', 'Bearer abc'],
    ] as const) {
      test(`${name}: 401 with WWW-Authenticate: Basic and an error body`, async () => {
        for (const path of ['/whoami', '/xAPI/statements']) {
          const res = await t.fetch(path, { user: null, headers: authorization ? { authorization } : {} });
          assert.equal(res.status, 401, path);
          assert.match(res.headers.get('www-authenticate') ?? '', /^Basic/);
          assert.match((await res.json()).error, /not authenticated/);
        }
      });
    }

    test('a cached success never lets a wrong password in', async () => {
      assert.equal((await t.fetch('/whoami', { user: OTHER })).status, 200);
      assert.equal((await t.fetch('/whoami', { user: OTHER })).status, 200);
      assert.equal((await t.fetch('/whoami', { user: { ...OTHER, password: 'other-pass!' } })).status, 401);
      assert.equal((await t.fetch('/whoami', { user: { ...OTHER, password: '' } })).status, 401);
    });

    test('the credentials file is re-read when it changes: users added, passwords changed, users removed', async () => {
      const file = t.env.LECTERN_AUTH_FILE;
      const original = readFileSync(file, 'utf8');
      const carol: TestUser = { username: 'carol', password: 'c-pass', scopes: ['statements/read'], agent: { mbox: 'mailto:carol@example.com' } };
      try {
        assert.equal((await t.fetch('/whoami', { user: carol })).status, 401);
        writeFileSync(file, JSON.stringify([...JSON.parse(original), ...(await credentialEntries([carol]))]));
        const res = await t.fetch('/whoami', { user: carol });
        assert.equal(res.status, 200);
        assert.deepEqual((await res.json()).scopes, ['authenticated', 'statements/read']);
        // A changed password: the cached success for the old one must not survive.
        writeFileSync(file, JSON.stringify([...JSON.parse(original), ...(await credentialEntries([{ ...carol, password: 'new-pass' }]))]));
        assert.equal((await t.fetch('/whoami', { user: carol })).status, 401);
        assert.equal((await t.fetch('/whoami', { user: { ...carol, password: 'new-pass' } })).status, 200);
        writeFileSync(file, original);
        assert.equal((await t.fetch('/whoami', { user: { ...carol, password: 'new-pass' } })).status, 401);
      } finally {
        writeFileSync(file, original);
      }
    });

    test('a Ralph auth.json entry (Python-made $2b$ hash, null name) works unchanged', async () => {
      const file = t.env.LECTERN_AUTH_FILE;
      const original = readFileSync(file, 'utf8');
      const ralph = { agent: { mbox: 'mailto:ralph@example.com', objectType: 'Agent', name: null }, scopes: ['all'], hash: RALPH_HASH, username: 'ralph' };
      try {
        writeFileSync(file, JSON.stringify([...JSON.parse(original), ralph]));
        const res = await t.fetch('/whoami', { headers: { authorization: `Basic ${Buffer.from('ralph:s3cret').toString('base64')}` }, user: null });
        assert.equal(res.status, 200);
        assert.equal((await res.json()).username, 'ralph');
      } finally {
        writeFileSync(file, original);
      }
    });

    test('a malformed credentials file keeps its last good content in force; a missing one gives 401, never 500; both recover when fixed', async () => {
      const file = t.env.LECTERN_AUTH_FILE;
      const original = readFileSync(file, 'utf8');
      try {
        writeFileSync(file, '{not json');
        assert.equal((await t.fetch('/whoami')).status, 200);
        // A cached success counts only for a user the file holds: here, its last good content.
        assert.equal((await t.fetch('/xAPI/statements', { user: OTHER })).status, 200);
        writeFileSync(file, JSON.stringify([{ username: 'x' }]));
        assert.equal((await t.fetch('/whoami', { user: OTHER })).status, 200);
        rmSync(file);
        assert.equal((await t.fetch('/whoami')).status, 401);
      } finally {
        writeFileSync(file, original);
      }
      assert.equal((await t.fetch('/whoami')).status, 200);
    });

    test('statements get the authenticated user as authority', async () => {
      const res = await t.fetch('/xAPI/statements', {
        user: OTHER,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ actor: { mbox: 'mailto:x@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } }),
      });
      const [id] = await res.json();
      const s = await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json();
      assert.deepEqual(s.authority, { objectType: 'Agent', mbox: 'mailto:other@example.com' });
    });

    test('heartbeats answer without credentials, with Ralph aliases', async () => {
      for (const path of ['/lbheartbeat', '/__lbheartbeat__']) {
        const res = await t.fetch(path, { user: null, version: null });
        assert.equal(res.status, 200, path);
      }
      for (const path of ['/heartbeat', '/__heartbeat__']) {
        const res = await t.fetch(path, { user: null, version: null });
        assert.equal(res.status, 200, path);
        assert.deepEqual(await res.json(), { database: 'ok' });
      }
    });

    test('unknown paths are 404 with a JSON body', async () => {
      const res = await t.fetch('/nope');
      assert.equal(res.status, 404);
      assert.ok((await res.json()).detail);
    });

    test('/xapi/… in the wrong case: 404 with a JSON body pointing at /xAPI/', async () => {
      for (const [path, where] of [
        ['/xapi/statements?limit=1', '/xAPI/statements'],
        ['/XAPI/about', '/xAPI/about'],
        ['/xapi', '/xAPI'],
      ]) {
        const res = await t.fetch(path);
        assert.equal(res.status, 404, path);
        assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
        const { detail } = await res.json();
        assert.ok(detail.endsWith(`the xAPI resources are under /xAPI/ (paths are case-sensitive), e.g. ${where}`), detail);
      }
      assert.doesNotMatch((await (await t.fetch('/nope')).json()).detail, /xAPI/);
    });
  });

  describe(`heartbeat with a broken database [${backend.name}]`, () => {
    test('GET /heartbeat is 500 naming the database check when the database is closed', async () => {
      const t = await startTestLrs(backend);
      try {
        await t.lrs.store.close();
        const res = await t.fetch('/heartbeat', { user: null });
        assert.equal(res.status, 500);
        const body = await res.json();
        assert.equal(body.database, 'error');
        assert.equal((await t.fetch('/lbheartbeat', { user: null })).status, 200);
      } finally {
        await t.close().catch(() => {});
      }
    });
  });
}

test('a credentials file with a control character in a username loads with a warning naming the entry; every user signs in (review of issue 27, item 12)', async () => {
  // As for ":": the entry is kept (one odd user must not lock out the others), and told.
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const odd: TestUser = { ...OTHER, username: 'line\nbreak' };
  const t = await startTestLrs(sqliteBackend, { users: [ADMIN, odd], logger: createLogger('warn', sink) });
  try {
    assert.equal((await t.fetch('/whoami')).status, 200);
    assert.equal((await t.fetch('/whoami', { user: odd })).status, 200);
    const warnings = lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level === 40);
    assert.equal(warnings.length, 1, lines.join(''));
    assert.match(warnings[0]!.msg, /auth\.json: entry 1 \("line\\nbreak"\): the username contains the control character U\+000A, which HTTP Basic authentication does not allow/);
  } finally {
    await t.close();
  }
});
