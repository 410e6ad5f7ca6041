/**
 * What operators of other LRSs expect on their first day, over HTTP (the browser flows are in
 * ./first-day-browser.test.ts): a previous-page link when paging (the chain of cursors kept in
 * the URL, bounded), the forwarding targets as configured (never a secret) and where they come
 * from, the credentials file's users beside the database credentials (never a hash). On SQLite
 * and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ADMIN, jsonInit, postgresBackend, sqliteBackend, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { type Signed, signIn } from './sign-in.ts';

const SECRET = 'a-console-secret-of-at-least-32-characters';
const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const B_ADMIN: TestUser = { username: 'b-admin', password: 'b-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:b-admin@example.com' }, target: 'b' };
const B_READER: TestUser = { username: 'b-reader', password: 'b-reader-pass', scopes: ['statements/read'], agent: { mbox: 'mailto:b-reader@example.com' }, target: 'b' };
const FORWARDINGS = [
  { is_active: true, url: 'https://lrs.example.com/xAPI/statements', basic_username: 'fw-user', basic_password: 'fw-very-secret-password', max_retries: 3, timeout: 7.5 },
  { is_active: false, url: 'https://old.example.com/xAPI/statements', basic_username: '', basic_password: '', max_retries: 0, timeout: 10 },
];

const get = (t: TestLrs, path: string, s: Signed) => fetch(`${t.url}${path}`, { redirect: 'manual', headers: { cookie: s.cookie } });
const ids = (page: string) => [...page.matchAll(/<tr data-id="([^"]+)"/g)].map((m) => m[1]);
const link = (page: string, id: string) => {
  const m = new RegExp(`<a href="([^"]+)"[^>]* id="${id}"`).exec(page) ?? new RegExp(`<a href="([^"]+)" id="${id}"`).exec(page);
  return m?.[1].replaceAll('&amp;', '&');
};

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`the console on an operator's first day (${backend.name})`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, {
        users: [ADMIN, OPERATOR, B_ADMIN, B_READER],
        env: { LECTERN_CONSOLE_SECRET: SECRET, LECTERN_XAPI_FORWARDINGS: JSON.stringify(FORWARDINGS), LECTERN_XAPI_FORWARDING_BATCH_SIZE: '250' },
      });
      const statements = Array.from({ length: 50 }, (_, i) => statement({ verb: { id: `http://example.com/verbs/v${i}` } }));
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statements))).status, 200);
    });
    after(() => t.close());

    test('paging keeps the pages before in the URL: a previous link back through the last 20, then the first page', async () => {
      const s = await signIn(t, ADMIN);
      const pages: { url: string; ids: string[] }[] = [];
      let url: string | undefined = '/console/statements?limit=2';
      while (url) {
        const page = await (await get(t, url, s)).text();
        pages.push({ url, ids: ids(page) });
        if (pages.length === 1) assert.equal(link(page, 'previous'), undefined, 'the first page has no previous page');
        else if (pages.length <= 21) assert.ok(link(page, 'previous'), `page ${pages.length}`);
        url = link(page, 'more');
      }
      assert.equal(pages.length, 25);
      assert.ok(pages[24].url.length < 1200, 'the chain in the URL is bounded');
      // From the last page back, each previous page is the one that came before it.
      let at = pages[24].url;
      let steps = 0;
      for (;;) {
        const page = await (await get(t, at, s)).text();
        assert.deepEqual(ids(page), pages[24 - steps].ids, `${steps} back`);
        const previous = link(page, 'previous');
        if (!previous) {
          // The oldest cursor dropped: the first page is still offered.
          const first = await (await get(t, link(page, 'first')!, s)).text();
          assert.deepEqual(ids(first), pages[0].ids);
          break;
        }
        at = previous;
        steps++;
      }
      assert.equal(steps, 19);
      // A chain this console did not write is not trusted: no previous page, the first offered.
      const forged = await (await get(t, `${pages[3].url.replace(/back=[^&]*/, 'back=x')}`, s)).text();
      assert.equal(link(forged, 'previous'), undefined);
      assert.ok(link(forged, 'first'));
    });

    test('the Forwarding page shows each configured target and where it comes from, never its secret', async () => {
      const res = await get(t, '/console/forwarding', await signIn(t, OPERATOR));
      const page = await res.text();
      assert.equal(res.status, 200);
      const section = page.slice(page.indexOf('id="configured-title"'), page.indexOf('</section>', page.indexOf('id="configured-title"')));
      assert.match(section, /LECTERN_XAPI_FORWARDINGS/);
      assert.match(section, /environment or the <code>\.env<\/code> file/);
      assert.match(
        section,
        /<td data-label="Target"><code>https:\/\/lrs\.example\.com\/xAPI\/statements<\/code><\/td><td data-label="Active">yes<\/td><td data-label="Batch size">250<\/td><td data-label="Retries">3<\/td><td data-label="Timeout">7\.5 s<\/td><td data-label="Authentication">HTTP Basic as <code>fw-user<\/code><\/td>/,
      );
      assert.match(section, /old\.example\.com[\s\S]*?<td data-label="Active">no<\/td>[\s\S]*?<td data-label="Authentication">HTTP Basic, no username<\/td>/);
      assert.doesNotMatch(page, /fw-very-secret-password/);
      assert.match(section, /not from the console/);
      assert.match(section, /systemctl restart lectern/);
      // A store administrator has no Forwarding page.
      assert.equal((await get(t, '/console/forwarding', await signIn(t, B_ADMIN))).status, 403);
    });

    test('the Access page lists the credentials file’s users beside the database credentials, read-only, never a hash', async () => {
      const users = (page: string) => [...page.matchAll(/<tr data-user="([^"]+)"/g)].map((m) => m[1]);
      const operator = await (await get(t, '/console/access', await signIn(t, OPERATOR))).text();
      assert.deepEqual(users(operator), ['admin', 'operator'], 'the default store’s');
      const bAdmin = await (await get(t, '/console/access', await signIn(t, B_ADMIN))).text();
      assert.deepEqual(users(bAdmin), ['b-admin', 'b-reader'], 'a store administrator’s own store’s');
      const file = bAdmin.slice(bAdmin.indexOf('id="file-users-title"'), bAdmin.indexOf('</section>', bAdmin.indexOf('id="file-users-title"')));
      assert.match(
        file,
        /<tr data-user="b-reader"><td data-label="User"><code>b-reader<\/code><\/td><td data-label="Scopes">statements\/read<\/td><td data-label="Agent">b-reader@example\.com<\/td><td data-label="Store">b<\/td><td data-label="Kind"><span class="badge">credentials file<\/span>/,
      );
      assert.match(file, /lectern auth/);
      assert.doesNotMatch(file, /<form/, 'read-only');
      for (const page of [operator, bAdmin]) assert.doesNotMatch(page, /\$2[aby]\$/, 'no bcrypt hash');
      assert.match(readFileSync(t.env.LECTERN_AUTH_FILE, 'utf8'), /"\$2[aby]\$/, 'the file does hold hashes');
    });
  });
}
