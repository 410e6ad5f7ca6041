/**
 * The console's admin pages in a real browser (Debian's Chromium through playwright-core) against a
 * real `lectern runserver` on SQLite and PostgreSQL: a credential created in the console used by an
 * HTTP client, then revoked (401); a refused statement replayed as lax; a dead letter retried; a
 * learner erased after the dry run; the operator's store switcher, and a store administrator who
 * cannot reach another store; the Overview (figures, the chart and its table); axe-core on each page (light, dark, 390 px). One browser for the
 * file. The screenshots of the docs are ./screenshots.test.ts's.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { basic, postgresBackend, sqliteBackend, statement, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { eventually, Receiver } from '../helpers/receiver.ts';
import { axeViolations, launchBrowser, overflows } from './browser-kit.ts';
import { runserver, type Server } from './runserver.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const B_ADMIN: TestUser = { username: 'b-admin', password: 'b-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:b-admin@example.com' }, target: 'b' };
const B_USER: TestUser = { username: 'b-user', password: 'b-user-pass', scopes: ['all'], agent: { mbox: 'mailto:b@example.com' }, target: 'b' };

let browser: Browser;
before(async () => {
  browser = await launchBrowser();
});
after(() => browser?.close());

async function signIn(page: Page, url: string, user: TestUser): Promise<void> {
  await page.goto(`${url}/console/sign-in`);
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/console\/statements$/);
}

/** A statements request with Basic credentials, as an LMS would send it. */
const xapi = (url: string, user: { username: string; password: string }, init: RequestInit = {}) =>
  fetch(`${url}/xAPI/statements`, {
    ...init,
    headers: { authorization: basic(user as TestUser), 'x-experience-api-version': '1.0.3', 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
  });

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`the console's admin pages in a browser (${backend.name})`, () => {
    let server: Server;
    let receiver: Receiver;
    let page: Page;
    const cspErrors: string[] = [];
    before(async () => {
      receiver = await new Receiver().listen();
      receiver.respond = () => ({ status: 403 });
      const forwardings = [{ is_active: true, url: receiver.url, basic_username: 'fw', basic_password: 'fw-target-password', max_retries: 0, timeout: 10 }];
      server = await runserver(
        backend,
        { LECTERN_AUTH_CREDENTIALS_REFRESH: '0', LECTERN_XAPI_FORWARDINGS: JSON.stringify(forwardings), LECTERN_XAPI_FORWARDING_BACKOFF: '20' },
        0,
        [],
        [OPERATOR, B_ADMIN, B_USER],
      );
      const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
      page = await context.newPage();
      page.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
      });
      await signIn(page, server.url, OPERATOR);
    });
    after(async () => {
      await page?.context().close();
      await server?.stop();
      await receiver?.close();
    });

    test('Access: a credential created in the console works for an HTTP client; revoked, it gets a 401', async () => {
      await page.getByRole('link', { name: 'Access' }).click();
      await page.waitForURL(/\/console\/access$/);
      assert.deepEqual(await axeViolations(page), []);
      await page.getByLabel('Label').fill('Moodle');
      await page.getByLabel('Agent', { exact: true }).fill('moodle@example.com');
      await page.getByLabel('statements/read', { exact: true }).check();
      await page.getByRole('button', { name: 'Create credential' }).click();
      await page.waitForSelector('#issued-secret');
      assert.deepEqual(await axeViolations(page), []);
      const key = await page.locator('#issued-key').innerText();
      const secret = await page.locator('#issued-secret').innerText();
      await page.getByRole('button', { name: 'Copy the secret' }).click();
      // The clipboard, or (when the browser refuses it) the secret selected for Ctrl+C: either way, said.
      await page.waitForFunction(() => (document.querySelector('[data-copy-status]')?.textContent ?? '') !== '');
      const client = { username: key, password: secret };
      const stored = await xapi(server.url, client, { method: 'POST', body: JSON.stringify(statement()) });
      assert.equal(stored.status, 200, await stored.text());
      assert.equal((await xapi(server.url, client)).status, 200);

      // Someone signed in to the console with it, in a browser of their own.
      const theirs = await (await browser.newContext({ viewport: { width: 1200, height: 900 } })).newPage();
      await signIn(theirs, server.url, { ...client, scopes: [], agent: {} });

      await page.getByRole('link', { name: 'Back to Access' }).click();
      const row = page.locator(`tr[data-key="${key}"]`);
      assert.match(await row.innerText(), /Moodle[\s\S]*active/);
      // Revoke asks first (no script: a page of its own); Cancel leaves the credential working.
      await row.getByRole('button', { name: `Revoke ${key}` }).click();
      await page.waitForSelector('h1:has-text("Revoke")');
      assert.deepEqual(await axeViolations(page), []);
      assert.match(await page.locator('main').innerText(), /Nothing has changed yet[\s\S]*Moodle[\s\S]*statements\/read/);
      await page.getByRole('link', { name: 'Cancel' }).click();
      await page.waitForURL(/\/console\/access$/);
      assert.equal((await xapi(server.url, client)).status, 200, 'still working after Cancel');
      await row.getByRole('button', { name: `Revoke ${key}` }).click();
      await page.getByRole('button', { name: 'Revoke for good' }).click();
      await page.waitForURL(/\/console\/access$/);
      assert.match(await page.locator(`tr[data-key="${key}"]`).innerText(), /revoked/);
      assert.equal((await xapi(server.url, client)).status, 401);
      // Their session ended with the credential: their next page is the sign-in page, saying why.
      await theirs.getByRole('link', { name: 'Statements' }).first().click();
      await theirs.waitForURL(/\/console\/sign-in\?next=.*&ended=credential$/);
      assert.match(await theirs.getByRole('status').first().innerText(), /Your session has ended: the credential you signed in with was revoked/);
      assert.equal(await theirs.getByLabel('Username').isVisible(), true);
      await theirs.context().close();
      assert.match(await page.locator('table.audit').innerText(), /credentials\.revoke[\s\S]*credentials\.create/);
    });

    test('Rejections: a refused statement, its body and reasons, replayed as lax', async () => {
      const refused = await xapi(server.url, { username: 'admin', password: 'admin-pass' }, { method: 'POST', body: JSON.stringify(statement({ lms_course_code: 'BIO-101' })) });
      assert.equal(refused.status, 400);
      await page.getByRole('link', { name: 'Rejections' }).click();
      const link = page.locator('table.rejections a').first();
      await eventually('the rejection listed', async () => {
        await page.reload();
        return (await link.count()) > 0;
      });
      assert.match(await page.locator('section', { hasText: 'Reasons by type' }).innerText(), /value_error\.extra\s+1/);
      assert.deepEqual(await axeViolations(page), []);
      await link.click();
      assert.match(await page.locator('pre.json').innerText(), /"lms_course_code": "BIO-101"/);
      assert.deepEqual(await axeViolations(page), []);
      await page.getByLabel(/Replay as lax/).check();
      await page.getByRole('button', { name: 'Replay this one' }).click();
      assert.match(await page.locator('#replay-summary').innerText(), /1 replayed as lax: 1 stored/);
      const found = (await (await xapi(server.url, { username: 'admin', password: 'admin-pass' }, { headers: {} })).json()) as { statements: Record<string, unknown>[] };
      assert.ok(found.statements.some((s) => s.lms_course_code === 'BIO-101'));
    });

    test('Forwarding: a dead letter with its error, retried once the target answers', async () => {
      await page.getByRole('link', { name: 'Forwarding' }).click();
      await eventually('a dead letter', async () => {
        await page.reload();
        return (await page.locator('table.dead tbody tr').count()) > 0;
      });
      assert.match(await page.locator('table.dead').innerText(), /403/);
      assert.deepEqual(await axeViolations(page), []);
      receiver.respond = () => ({ status: 200 });
      const before = receiver.requests.length;
      await page.getByRole('button', { name: 'Retry every dead letter' }).click();
      assert.match(await page.locator('#retried').innerText(), /back in the queue/);
      await eventually('delivered', async () => receiver.requests.length > before);
      await eventually('no dead letter', async () => {
        await page.reload();
        return (await page.getByText('No dead letter.').count()) > 0;
      });
    });

    test('Learner: erase after the dry run, the identifier typed', async () => {
      await server.post([statement({ actor: { mbox: 'mailto:eve@example.com', name: 'Eve' } }), statement({ actor: { mbox: 'mailto:eve@example.com', name: 'Eve' } })]);
      await page.goto(`${server.url}/console/learner?agent=eve%40example.com`);
      assert.equal(await page.locator('#rows tr').count(), 2);
      await page.getByRole('button', { name: 'Dry run' }).click();
      assert.equal(await page.locator('#n-statements').innerText(), '2');
      assert.deepEqual(await axeViolations(page), []);
      await page.getByLabel(/Type .* to confirm/).fill('eve@example.org');
      await page.getByRole('button', { name: 'Erase for good' }).click();
      assert.match(await page.locator('[role="alert"]').innerText(), /Type eve@example\.com exactly/);
      await page.getByLabel(/Type .* to confirm/).fill('eve@example.com');
      await page.getByRole('button', { name: 'Erase for good' }).click();
      assert.equal(await page.locator('h1').innerText(), 'Erased');
      await page.goto(`${server.url}/console/learner?agent=eve%40example.com`);
      assert.equal(await page.locator('#rows tr').count(), 0);
    });

    test('the operator switches stores; a store administrator sees its own only, even with a crafted switch', async () => {
      await server.post(statement({ verb: { id: 'http://example.com/verbs/in-default' } }));
      const inB = await xapi(server.url, B_USER, { method: 'POST', body: JSON.stringify(statement({ verb: { id: 'http://example.com/verbs/in-b' } })) });
      assert.equal(inB.status, 200);
      await page.getByRole('link', { name: 'Switch store' }).click();
      assert.deepEqual(await axeViolations(page), []);
      await page.getByLabel('Store', { exact: true }).fill('b');
      await page.getByRole('button', { name: 'Work in this store' }).click();
      await page.waitForURL(/\/console\/statements$/);
      assert.match(await page.locator('.store').innerText(), /store “b”/);
      assert.match(await page.locator('#rows').innerText(), /in-b/);
      assert.doesNotMatch(await page.locator('#rows').innerText(), /in-default/);

      const context = await browser.newContext();
      try {
        const b = await context.newPage();
        await signIn(b, server.url, B_ADMIN);
        assert.equal(await b.getByRole('link', { name: 'Stores' }).count(), 0);
        assert.equal(await b.getByRole('link', { name: 'Forwarding' }).count(), 0);
        assert.match(await b.locator('#rows').innerText(), /in-b/);
        assert.doesNotMatch(await b.locator('#rows').innerText(), /in-default/);
        // The switcher's request crafted by hand, with the session's own CSRF token: refused.
        const csrf = (await b.locator('meta[name="csrf-token"]').getAttribute('content'))!;
        const crafted = await b.request.post(`${server.url}/console/store`, { form: { csrf, store: '' }, maxRedirects: 0 });
        assert.equal(crafted.status(), 404);
        await b.goto(`${server.url}/console/statements?store=`);
        assert.doesNotMatch(await b.locator('#rows').innerText(), /in-default/);
        assert.equal((await b.goto(`${server.url}/console/forwarding`))?.status(), 403);
      } finally {
        await context.close();
      }
    });

    test("Overview: the working store's figures, the chart with its numbers as a table (opened by keyboard), top verbs, every store; a store administrator sees its own", async () => {
      // The operator works in store b (the test before switched to it).
      await page.getByRole('link', { name: 'Overview' }).click();
      await page.waitForURL(/\/console\/overview$/);
      assert.match(await page.locator('h1 + .context').innerText(), /store “b”/);
      assert.match(await page.locator('dl.figures').innerText(), /Statements\s+1\b[\s\S]*Ingest now[\s\S]*Last statement\s+\d{4}-[\s\S]*Forwarding lag[\s\S]*Dead letters/);
      assert.equal(await page.locator('figure.chart').first().locator('rect.bar').count(), 30);
      assert.match(await page.locator('figure.chart figcaption').first().innerText(), /1 in all/);
      assert.match(await page.locator('section', { hasText: 'Top verbs' }).innerText(), /in-b\s+1/);
      assert.match(await page.locator('section', { hasText: 'Every store' }).innerText(), /default[\s\S]*\bb\s+1\s+1/);
      // The numbers behind the chart: a disclosure, opened with the keyboard.
      const table = page.locator('details.numbers table').first();
      assert.equal(await table.isVisible(), false);
      await page.locator('details.numbers summary').first().focus();
      await page.keyboard.press('Enter');
      assert.equal(await table.locator('tbody tr').count(), 30);
      assert.equal(await page.locator('details.numbers').count(), 2, 'the ingest chart has its table too');
      assert.match(await table.locator('tbody tr').last().innerText(), /\d{4}-\d\d-\d\d\s+1/);
      assert.deepEqual(await axeViolations(page), []);

      const context = await browser.newContext();
      try {
        const b = await context.newPage();
        await signIn(b, server.url, B_ADMIN);
        await b.goto(`${server.url}/console`);
        await b.waitForURL(/\/console\/overview$/);
        assert.match(await b.locator('h1 + .context').innerText(), /store “b”/);
        assert.doesNotMatch(await b.locator('dl.figures').innerText(), /Forwarding lag|Dead letters/);
        assert.equal(await b.locator('section', { hasText: 'Every store' }).count(), 0);
      } finally {
        await context.close();
      }
    });

    test('at 390 px in dark mode: the admin pages fit and have no axe violations; the CSP was never violated', async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await page.emulateMedia({ colorScheme: 'dark' });
      try {
        for (const path of ['/console/overview', '/console/access', '/console/rejections', '/console/forwarding', '/console/stores']) {
          await page.goto(`${server.url}${path}`);
          assert.equal(await overflows(page), false, path);
          assert.deepEqual(await axeViolations(page), [], path);
        }
      } finally {
        await page.setViewportSize({ width: 1200, height: 900 });
        await page.emulateMedia({ colorScheme: 'light' });
      }
      assert.deepEqual(cspErrors, []);
    });
  });
}
