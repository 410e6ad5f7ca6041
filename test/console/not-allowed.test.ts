/**
 * The console's 403 on an admin page says which scope is missing and the command that grants it,
 * for the kind of credential the user signed in with (a credentials-file user: `lectern auth`; a
 * database credential: `lectern credentials create`); the file user's command, run as shown,
 * opens the page. On SQLite and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { createCredential } from '../../src/ops/credentials.ts';
import { ADMIN, postgresBackend, sqliteBackend, startTestLrs, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { CLI } from '../helpers/runserver.ts';
import { signIn } from './sign-in.ts';

const B_ADMIN: TestUser = { username: 'b-admin', password: 'b-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:b-admin@example.com' }, target: 'b' };
const STORE_ADMIN: TestUser = { username: 'default-admin', password: 'default-admin-pass', scopes: ['all', 'admin/store'], agent: { mbox: 'mailto:da@example.com' } };
const NAMED: TestUser = {
  username: 'reporting',
  password: 'reporting-pass',
  scopes: ['statements/read'],
  agent: { name: 'Reports (nightly)', account: { homePage: 'https://lms.example.com', name: 'reports' } },
};

const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'" };
const decodeEntities = (s: string) => s.replace(/&(amp|lt|gt|quot|#39);/g, (e) => ENTITIES[e]);
/** The 403 page's alert and its command (HTML unescaped). */
async function refusal(t: TestLrs, path: string, user: TestUser | { cookie: string }): Promise<{ status: number; alert: string; command?: string; text: string }> {
  const cookie = 'cookie' in user ? user.cookie : (await signIn(t, user)).cookie;
  const res = await fetch(`${t.url}${path}`, { headers: { cookie } });
  const text = await res.text();
  const alert = decodeEntities((/<p class="error" role="alert">([\s\S]*?)<\/p>/.exec(text)?.[1] ?? '').replace(/<[^>]+>/g, ''));
  const command = /<pre class="command"[^>]*><code>([^<]*)<\/code><\/pre>/.exec(text)?.[1];
  return { status: res.status, alert, command: command && decodeEntities(command), text };
}

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`the console's 403 names the missing scope and the command that grants it (${backend.name})`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, TENANT_B, B_ADMIN, STORE_ADMIN, NAMED], env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0' } });
    });
    after(() => t.close());

    test('a file user of the default store: admin, and `lectern auth` with its scopes, agent and admin; run as shown, it opens the page', async () => {
      const r = await refusal(t, '/console/access', ADMIN);
      assert.equal(r.status, 403);
      assert.match(r.alert, /^The Access page needs the admin scope, which admin does not hold \(in the default store, it makes the operator/);
      assert.equal(r.command, 'lectern auth -u admin -s all -s admin -M mailto:admin@example.com -w');
      assert.match(r.text, /a user of the credentials file/);
      const argv = r.command!.split(' ').slice(1);
      const run = spawnSync(process.execPath, [CLI, ...argv, '-p', ADMIN.password], {
        env: { PATH: process.env.PATH ?? '', LECTERN_AUTH_FILE: t.env.LECTERN_AUTH_FILE },
        encoding: 'utf8',
      });
      assert.equal(run.status, 0, run.stderr);
      for (const path of ['/console/overview', '/console/access', '/console/rejections', '/console/forwarding', '/console/stores']) {
        assert.equal((await refusal(t, path, ADMIN)).status, 200, path);
      }
    });

    test('a file user of another store: admin/store, with its store; its agent’s account and name quoted for a shell', async () => {
      const r = await refusal(t, '/console/rejections', TENANT_B);
      assert.equal(r.status, 403);
      assert.match(r.alert, /needs the admin\/store scope, which tenant-b does not hold \(the administrator of its own store\)/);
      assert.equal(r.command, 'lectern auth -u tenant-b -s all -s admin/store -M mailto:b@example.com -t b -w');
      const named = await refusal(t, '/console/overview', NAMED);
      assert.equal(named.command, "lectern auth -u reporting -s statements/read -s admin -A reports https://lms.example.com -N 'Reports (nightly)' -w");
    });

    test('a database credential: `lectern credentials create` with the scope added, its scopes being fixed', async () => {
      const issued = await createCredential(t.lrs.store, { scopes: ['statements/write'], agent: { objectType: 'Agent', mbox: 'mailto:moodle@example.com' }, target: 'b' });
      const r = await refusal(t, '/console/access', { username: issued.key, password: issued.secret, scopes: [], agent: {} });
      assert.equal(r.status, 403);
      assert.match(r.alert, new RegExp(`needs the admin/store scope, which ${issued.key} does not hold`));
      assert.equal(r.command, `lectern credentials create -s statements/write -s admin/store -M mailto:moodle@example.com -t b --label '${issued.key} with admin/store'`);
      assert.match(r.text, /a credential kept in the database, whose scopes do not change/);
    });

    test('the operator’s pages: admin for a store administrator of the default store; none for another store’s, said so', async () => {
      const own = await refusal(t, '/console/forwarding', STORE_ADMIN);
      assert.equal(own.status, 403);
      assert.match(own.alert, /The Forwarding page needs the admin scope, which default-admin does not hold: it concerns every store, and is the operator’s/);
      assert.equal(own.command, 'lectern auth -u default-admin -s all -s admin/store -s admin -M mailto:da@example.com -w');
      const other = await refusal(t, '/console/forwarding', B_ADMIN);
      assert.equal(other.status, 403);
      assert.match(other.alert, /The Forwarding page is the operator’s: .* b-admin works in the store “b”, whose users never reach other stores/);
      assert.equal(other.command, undefined);
      // A change of the operator's (JSON answer) names what is missing too.
      const s = await signIn(t, STORE_ADMIN);
      const retry = await fetch(`${t.url}/console/forwarding/retry`, {
        method: 'POST',
        headers: { cookie: s.cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf: s.csrf }),
      });
      assert.equal(retry.status, 403);
      assert.match(((await retry.json()) as { detail: string }).detail, /Retrying dead letters needs the admin scope, which default-admin does not hold/);
    });
  });
}
