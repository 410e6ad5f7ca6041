/**
 * Credentials in the database (issue 31), on every backend: made, rotated and revoked with the
 * built `lectern credentials` CLI on the server's own database, used through HTTP as Basic users
 * beside the credentials file's. The server reads the change counter on every request here
 * (LECTERN_AUTH_CREDENTIALS_REFRESH=0), and its clock (expiry, a rotation's grace) is moved by hand.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { hashSecret } from '../../src/auth/database.ts';
import { ManualClock } from '../../src/clock.ts';
import { createLogger } from '../../src/log.ts';
import { OpsError } from '../../src/ops/errors.ts';
import { createCredential, listCredentials, revokeCredential, rotateCredential } from '../../src/ops/credentials.ts';
import { ADMIN, BACKENDS, credentialEntries, jsonInit, OTHER, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
const AGENT = { mbox: 'mailto:credential@example.com' };

test('lectern credentials: -h on the command and each subcommand', () => {
  for (const command of [[], ['create'], ['list'], ['revoke'], ['rotate']]) {
    const r = spawnSync(process.execPath, [CLI, 'credentials', ...command, '-h'], { env: { PATH: process.env.PATH }, encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Usage: lectern credentials${command.length ? ` ${command[0]}` : ''}`));
    if (command.length) assert.match(r.stdout, /-b, --backend <backend>/);
  }
  assert.match(spawnSync(process.execPath, [CLI, '--help'], { encoding: 'utf8' }).stdout, /credentials/);
});

for (const backend of BACKENDS) {
  describe(`database credentials (${backend.name})`, () => {
    let t: TestLrs;
    const clock = new ManualClock(Date.now());
    const log: string[] = [];
    /** Every secret printed: none may appear anywhere else. */
    const secrets: string[] = [];

    before(async () => {
      assert.ok(existsSync(CLI), 'build first: npm run build');
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          log.push(chunk.toString());
          done();
        },
      });
      t = await startTestLrs(backend, { env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0' }, logger: createLogger('debug', sink), clock });
    });
    after(() => t?.close());

    function lectern(args: string[]) {
      const r = spawnSync(process.execPath, [CLI, 'credentials', ...args], {
        env: { PATH: process.env.PATH, ...t.env, LECTERN_LOG_LEVEL: 'warn' },
        encoding: 'utf8',
        input: '',
        timeout: 30_000,
      });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    }
    function create(args: string[]): { key: string; secret: string } {
      const r = lectern(['create', ...args, '--json']);
      assert.equal(r.code, 0, r.stderr);
      const made = JSON.parse(r.stdout) as { key: string; secret: string };
      secrets.push(made.secret);
      return made;
    }
    const user = (key: string, secret: string): TestUser => ({ username: key, password: secret, scopes: [], agent: {} });
    const post = (u: TestUser) => t.fetch('/xAPI/statements', { ...jsonInit('POST', [statement({ id: randomUUID() })]), user: u });
    const rowCount = async () => (await listCredentials(t.lrs.store)).length;

    test('create → use (POST and GET with key:secret, its agent the authority) → list without the secret', async () => {
      const { key, secret } = create(['-s', 'statements/write', '-s', 'statements/read/mine', '-M', AGENT.mbox, '--label', 'ci runner']);
      assert.match(key, /^lk_[A-Za-z0-9_-]{16}$/);
      assert.ok(Buffer.from(secret, 'base64url').length >= 16, 'at least 128 random bits');
      const me = user(key, secret);
      const id = randomUUID();
      const stored = await t.fetch('/xAPI/statements', { ...jsonInit('POST', [statement({ id })]), user: me });
      assert.equal(stored.status, 200, await stored.clone().text());
      const got = await t.fetch(`/xAPI/statements?statementId=${id}`, { user: me });
      assert.equal(got.status, 200);
      const body = (await got.json()) as { authority: Record<string, unknown> };
      assert.deepEqual(body.authority, { objectType: 'Agent', ...AGENT });
      // Its scopes hold: no state/write.
      const state = await t.fetch(`/xAPI/activities/state?activityId=${encodeURIComponent('http://example.com/a')}&agent=${encodeURIComponent(JSON.stringify(AGENT))}&stateId=s`, {
        ...jsonInit('PUT', { a: 1 }),
        user: me,
      });
      assert.equal(state.status, 403);
      // A wrong secret, and a file user's password under the key, get 401.
      assert.equal((await post(user(key, `${secret}x`))).status, 401);
      assert.equal((await post(user(key, ADMIN.password))).status, 401);
      // The file users work as before.
      assert.equal((await post(ADMIN)).status, 200);

      const text = lectern(['list']);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, new RegExp(`${key} .*statements/write,statements/read/mine .*${AGENT.mbox}.* active +ci runner`));
      const json = lectern(['list', '--json']);
      const listed = (JSON.parse(json.stdout) as { key: string; label: string; scopes: string[]; agent: unknown; created: string }[]).find((c) => c.key === key)!;
      assert.equal(listed.label, 'ci runner');
      assert.deepEqual(listed.scopes, ['statements/write', 'statements/read/mine']);
      assert.deepEqual(listed.agent, { objectType: 'Agent', ...AGENT });
      for (const out of [text.stdout, text.stderr, json.stdout, json.stderr]) {
        assert.ok(!out.includes(secret) && !out.includes(hashSecret(secret)), 'no secret nor its hash in list output');
      }
      // The last use is recorded (in the background).
      for (let i = 0; !(await listCredentials(t.lrs.store)).find((c) => c.key === key)?.lastUsed; i++) {
        assert.ok(i < 300, 'lastUsed never recorded');
        await new Promise((r) => setTimeout(r, 20));
      }
    });

    test('whoami and the target: a credential of store b works in store b', async () => {
      const { key, secret } = create(['-s', 'all', '-t', 'b', '-A', 'robot', 'https://example.com', '--validation', 'lax']);
      const who = await t.fetch('/whoami', { user: user(key, secret) });
      assert.equal(who.status, 200);
      const body = (await who.json()) as Record<string, unknown>;
      assert.equal(body.username ?? body.user, key);
      const id = randomUUID();
      assert.equal((await t.fetch('/xAPI/statements', { ...jsonInit('POST', [statement({ id })]), user: user(key, secret) })).status, 200);
      // Not in the default store.
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, { user: user(key, secret) })).status, 200);
      const listed = JSON.parse(lectern(['list', '-t', 'b', '--json']).stdout) as { key: string; validation?: string }[];
      assert.deepEqual(
        listed.map((c) => [c.key, c.validation]),
        [[key, 'lax']],
      );
      assert.equal(lectern(['list', '-t', 'nowhere']).stdout.trim(), 'no credentials for the store "nowhere"');
    });

    test('rotate with a grace: old and new work; after the grace, the old gets 401; revoke: 401', async () => {
      const { key, secret: old } = create(['-s', 'all', '-M', AGENT.mbox]);
      const r = lectern(['rotate', key, '--grace', '600', '--json']);
      assert.equal(r.code, 0, r.stderr);
      const rotated = JSON.parse(r.stdout) as { key: string; secret: string; previousSecretUntil: string };
      secrets.push(rotated.secret);
      assert.equal(rotated.key, key);
      assert.notEqual(rotated.secret, old);
      assert.ok(rotated.previousSecretUntil);
      assert.equal((await post(user(key, old))).status, 200, 'the old secret works during the grace');
      assert.equal((await post(user(key, rotated.secret))).status, 200);
      // Past the grace whatever time the test took so far (the server's clock started before it).
      clock.advance(3_600_000);
      assert.equal((await post(user(key, old))).status, 401, 'the old secret is refused after the grace');
      assert.equal((await post(user(key, rotated.secret))).status, 200);
      // Without a grace the old secret stops at once.
      const again = lectern(['rotate', key]);
      assert.equal(again.code, 0, again.stderr);
      const third = /secret: (\S+)/.exec(again.stdout)![1];
      secrets.push(third);
      assert.equal((await post(user(key, rotated.secret))).status, 401);
      assert.equal((await post(user(key, third))).status, 200);

      const revoked = lectern(['revoke', key]);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.equal((await post(user(key, third))).status, 401);
      assert.match(lectern(['list']).stdout, new RegExp(`${key} .* revoked 20`));
      // A revoked credential is not rotated back to life.
      const back = lectern(['rotate', key]);
      assert.equal(back.code, 2);
      assert.match(back.stderr, /is revoked: create a new one/);
    });

    test('expiry: refused once the clock passes it', async () => {
      const expires = new Date(clock.now() + 3_600_000).toISOString();
      const { key, secret } = create(['-s', 'all', '-M', AGENT.mbox, '--expires', expires]);
      assert.equal((await post(user(key, secret))).status, 200);
      clock.advance(3_600_000);
      assert.equal((await post(user(key, secret))).status, 401);
    });

    test('bad input: a clear error, exit code 2, and no row', async () => {
      const before = await rowCount();
      const cases: [string[], RegExp][] = [
        [['create', '-s', 'nope', '-M', AGENT.mbox], /unknown scope "nope"/],
        [['create', '-M', AGENT.mbox], /give at least one scope/],
        [['create', '-s', 'all'], /give exactly one agent identifier/],
        [
          ['create', '-s', 'all', '-M', AGENT.mbox, '--expires', 'tomorrow'],
          /--expires must be a date, 2026-12-01 \(that day's start in UTC\), or a date-time with its offset, .* not "tomorrow"/,
        ],
        [['create', '-s', 'all', '-M', AGENT.mbox, '--expires', '2001-01-01'], /expires: "2001-01-01T00:00:00.000Z" is in the past/],
        [['create', '-s', 'all', '-M', AGENT.mbox, '--validation', 'loose'], /validation must be strict or lax, got "loose"/],
        [['create', '-s', 'all', '-M', AGENT.mbox, '--key', 'a:b'], /contains ":"/],
        // A key equal to a user of the credentials file.
        [['create', '-s', 'all', '-M', AGENT.mbox, '--key', ADMIN.username], /is the name of a user of the credentials file/],
        [['revoke', 'no-such-key'], /no credential has the key "no-such-key"/],
        [['rotate', 'no-such-key'], /no credential has the key "no-such-key"/],
        [['rotate', 'no-such-key', '--grace', 'soon'], /--grace takes a whole number of seconds/],
      ];
      for (const [args, message] of cases) {
        const r = lectern(args);
        assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, message, args.join(' '));
        assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
      }
      // A key that exists: refused, nothing written.
      create(['-s', 'all', '-M', AGENT.mbox, '--key', 'chosen-key']);
      const dup = lectern(['create', '-s', 'all', '-M', AGENT.mbox, '--key', 'chosen-key']);
      assert.equal(dup.code, 2, dup.stderr);
      assert.match(dup.stderr, /a credential with the key "chosen-key" exists already/);
      assert.equal(await rowCount(), before + 1, 'only the one good create wrote a row');
      // The use cases, as the admin API calls them: OpsError with an HTTP status.
      const refused = async (p: Promise<unknown>, status: number) => {
        const err = await p.then(
          () => assert.fail('not refused'),
          (e: unknown) => e,
        );
        assert.ok(err instanceof OpsError, String(err));
        assert.equal(err.status, status);
      };
      await refused(revokeCredential(t.lrs.store, 'no-such-key'), 404);
      await refused(rotateCredential(t.lrs.store, 'no-such-key'), 404);
      await refused(rotateCredential(t.lrs.store, 'chosen-key', { graceSeconds: -1 }), 400);
      await refused(createCredential(t.lrs.store, { scopes: ['all'], agent: { objectType: 'Agent', ...AGENT }, key: 'chosen-key' }), 409);
      await refused(createCredential(t.lrs.store, { scopes: ['all'], agent: { objectType: 'Agent', ...AGENT }, key: ADMIN.username }, { fileUsers: [ADMIN.username] }), 409);
      await refused(createCredential(t.lrs.store, { scopes: ['bogus'], agent: { objectType: 'Agent', ...AGENT } }), 400);
      assert.equal(await rowCount(), before + 1);
    });

    test('a file user named as a key: the file user signs in, the credential does not, and the server says so', async () => {
      const { key, secret } = create(['-s', 'all', '-M', AGENT.mbox]);
      assert.equal((await post(user(key, secret))).status, 200);
      const clash: TestUser = { username: key, password: 'file-pass', scopes: ['all'], agent: { mbox: 'mailto:file@example.com' } };
      writeFileSync(t.env.LECTERN_AUTH_FILE, JSON.stringify(await credentialEntries([ADMIN, OTHER, clash])));
      assert.equal((await post(clash)).status, 200);
      assert.equal((await post(user(key, secret))).status, 401);
      for (let i = 0; !log.some((l) => l.includes('has a user named as the database credential key') && l.includes(key)); i++) {
        assert.ok(i < 300, 'the clash was not logged');
        await new Promise((r) => setTimeout(r, 20));
      }
      writeFileSync(t.env.LECTERN_AUTH_FILE, JSON.stringify(await credentialEntries([ADMIN, OTHER])));
      assert.equal((await post(user(key, secret))).status, 200);
    });

    test('no secret in the server log', () => {
      assert.ok(secrets.length >= 5);
      const text = log.join('');
      assert.ok(text.length > 0, 'the log was captured');
      for (const s of secrets) {
        assert.ok(!text.includes(s), 'a secret is in the log');
        assert.ok(!text.includes(hashSecret(s)), 'a secret hash is in the log');
      }
    });
  });
}
