/**
 * The audit's actor says what kind of name it is, through the admin API on every backend: a
 * credentials-file user, a database credential's key, an OpenID Connect token's subject (the CLI's
 * OS user: ../lifecycle/admin-cli.test.ts); and entries written before kinds were recorded get the
 * kind their row tells once the store is migrated (the CLI's: the OS user; an HTTP actor that is a
 * database key: that key; any other: unknown).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, jsonInit, postgresBackend, sqliteBackend, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { LRS_AUDIENCE, startProvider, type TestProvider } from '../helpers/oidc.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { runSql } from '../lifecycle/helpers.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };

type Json = Record<string, unknown>;

async function call(
  t: TestLrs,
  method: string,
  path: string,
  body?: unknown,
  auth: { user?: TestUser; headers?: Record<string, string> } = { user: OPERATOR },
): Promise<{ status: number; body: Json }> {
  const extra = { user: auth.user ?? null, version: null, headers: auth.headers ?? {} };
  const res = await t.fetch(path, body === undefined ? { method, ...extra } : jsonInit(method, body, extra));
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
}

/** The audit log's newest entries as [action, actor, actorKind, via]. */
async function kinds(t: TestLrs, limit: number): Promise<[unknown, unknown, unknown, unknown][]> {
  const r = await call(t, 'GET', `/admin/api/audit?limit=${limit}`);
  assert.equal(r.status, 200);
  return (r.body.entries as Json[]).map((e) => [e.action, e.actor, e.actorKind, e.via]);
}

/** The operator creates a database credential holding `admin`: a key that acts as the operator. */
async function adminKey(t: TestLrs, key: string): Promise<TestUser> {
  const r = await call(t, 'POST', '/admin/api/credentials', { key, scopes: ['admin'], agent: { mbox: `mailto:${key}@example.com` } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return { username: key, password: String(r.body.secret), scopes: [], agent: {} };
}

for (const backend of BACKENDS) {
  describe(`the audit's actor kinds (${backend.name})`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [OPERATOR], env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0' } });
    });
    after(() => t?.close());

    test('a credentials-file user and a database key are told apart', async () => {
      const reports = await adminKey(t, 'reports');
      const made = await call(t, 'POST', '/admin/api/credentials', { key: 'lms', scopes: ['statements/write'], agent: { mbox: 'mailto:lms@example.com' } }, { user: reports });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      assert.equal((await call(t, 'POST', '/admin/api/rejections/clear', { target: '' }, { user: reports })).status, 200);
      assert.deepEqual(await kinds(t, 3), [
        ['rejections.clear', 'reports', 'database-key', 'http'],
        ['credentials.create', 'reports', 'database-key', 'http'],
        ['credentials.create', 'operator', 'file-user', 'http'],
      ]);
    });
  });
}

describe("the audit's actor kinds: an OpenID Connect token's subject", () => {
  let op: TestProvider;
  let t: TestLrs;
  before(async () => {
    op = await startProvider();
    t = await startTestLrs(sqliteBackend, {
      users: [OPERATOR],
      env: { LECTERN_RUNSERVER_AUTH_BACKENDS: 'basic,oidc', LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: op.issuer, LECTERN_RUNSERVER_AUTH_OIDC_AUDIENCE: LRS_AUDIENCE },
    });
  });
  after(async () => {
    await t?.close();
    await op?.close();
  });

  test("a bearer token's subject is recorded as one, even when a file user has its name", async () => {
    for (const sub of ['ops-service', 'operator']) {
      const headers = { authorization: `Bearer ${await op.sign({ sub, scope: 'admin' })}` };
      assert.equal((await call(t, 'POST', '/admin/api/rejections/clear', { target: '' }, { headers })).status, 200);
    }
    assert.deepEqual(await kinds(t, 2), [
      ['rejections.clear', 'operator', 'token-subject', 'http'],
      ['rejections.clear', 'ops-service', 'token-subject', 'http'],
    ]);
  });
});

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`the audit's actor kinds: entries recorded before them (${backend.name})`, () => {
    test("once migrated: the CLI's are the OS user's, a database key's that key's, the rest unknown", async () => {
      const t = await startTestLrs(backend, { users: [OPERATOR], env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0' } });
      try {
        const reports = await adminKey(t, 'reports');
        assert.equal((await call(t, 'POST', '/admin/api/rejections/clear', { target: '' }, { user: reports })).status, 200);
        await t.lrs.close();
        const version = backend === sqliteBackend ? 23 : 24;
        await runSql(t, [
          'ALTER TABLE admin_audit DROP COLUMN actor_kind',
          'ALTER TABLE rejections DROP COLUMN claim',
          'ALTER TABLE rejections DROP COLUMN claimed_until_ms',
          `DELETE FROM schema_migrations WHERE version = ${version}`,
          `INSERT INTO admin_audit (time_ms, actor, role, via, client, action, target, details) VALUES (${Date.now()}, 'root', 'operator', 'cli', 'host', 'rejections.clear', '', '{"cleared":0}')`,
        ]);
        await t.restart();
        assert.deepEqual(await kinds(t, 3), [
          ['rejections.clear', 'root', 'os-user', 'cli'],
          ['rejections.clear', 'reports', 'database-key', 'http'],
          ['credentials.create', 'operator', 'unknown', 'http'],
        ]);
      } finally {
        await t.close();
      }
    });
  });
}
