/**
 * What operators of other LRSs expect on their first day, in a real browser (Debian's Chromium
 * through playwright-core) against a real `lectern runserver` on SQLite and PostgreSQL: a verb typed
 * as `passed` suggested and chosen, or answered "did you mean"; the Overview's top verbs named; a
 * statement's JSON as a tree (collapse and expand without script, copy a path); a learner's
 * documents opened and downloaded; previous-page links; the configured forwarding targets and the
 * credentials file's users; every page at 1280 and 390 px, light and dark, axe clean, the CSP never
 * violated. The HTTP details are in ./suggest.test.ts, ./documents.test.ts and ./first-day.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { postgresBackend, sqliteBackend, statement, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { axeViolations, launchBrowser, overflows } from './browser-kit.ts';
import { runserver, type Server } from './runserver.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const ADL = 'http://adlnet.gov/expapi/verbs/';
const COURSE = 'http://example.com/course/intro';
const ADA = { name: 'Ada Lovelace', mbox: 'mailto:ada@example.com' };
const FORWARDINGS = [{ is_active: true, url: 'http://127.0.0.1:9/xAPI/statements', basic_username: 'fw-user', basic_password: 'fw-target-password', max_retries: 0, timeout: 5 }];

let browser: Browser;
before(async () => {
  browser = await launchBrowser();
});
after(() => browser?.close());

/** The datalist's options ([value, label]) once they are `expected`: the answer to what was typed last, not to an earlier keystroke. */
async function optionsBecome(page: Page, list: string, expected: [string, string][]): Promise<[string, string][]> {
  const read = () => page.locator(`${list} option`).evaluateAll((os) => os.map((o) => [(o as HTMLOptionElement).value, (o as HTMLOptionElement).label] as [string, string]));
  await page
    .waitForFunction(
      ([sel, want]) => JSON.stringify([...document.querySelectorAll(`${sel} option`)].map((o) => [(o as HTMLOptionElement).value, (o as HTMLOptionElement).label])) === want,
      [list, JSON.stringify(expected)] as const,
    )
    .catch(() => undefined);
  return read();
}

async function signIn(page: Page, url: string, user: TestUser): Promise<void> {
  await page.goto(`${url}/console/sign-in`);
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/console\/statements$/);
}

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`the console on an operator's first day, in a browser (${backend.name})`, () => {
    let server: Server;
    let context: BrowserContext;
    let page: Page;
    let id: string;
    const cspErrors: string[] = [];
    before(async () => {
      server = await runserver(backend, { LECTERN_XAPI_FORWARDINGS: JSON.stringify(FORWARDINGS) }, 0, [], [OPERATOR]);
      [id] = await server.post([
        statement({
          actor: ADA,
          verb: { id: `${ADL}passed`, display: { 'en-US': 'passed' } },
          object: { id: COURSE, definition: { name: { 'en-US': 'Introduction' } } },
          result: { score: { scaled: 0.9 } },
        }),
        ...Array.from({ length: 4 }, (_, i) =>
          statement({ verb: { id: `${ADL}attempted`, display: { 'en-US': 'attempted' } }, object: { id: `http://example.com/course/part-${i}` } }),
        ),
      ]);
      const ada = encodeURIComponent(JSON.stringify({ mbox: ADA.mbox }));
      const put = async (path: string, type: string, body: string) => {
        const res = await server.xapi(path, { method: 'PUT', headers: { 'content-type': type, 'if-none-match': '*' }, body });
        assert.equal(res.status, 204, await res.text());
      };
      await put(`/xAPI/activities/state?agent=${ada}&activityId=${encodeURIComponent(COURSE)}&stateId=bookmark`, 'application/json', '{"page":3,"visited":["intro","quiz"]}');
      await put(`/xAPI/agents/profile?agent=${ada}&profileId=notes`, 'text/plain', 'Prefers mornings.');
      context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
      page = await context.newPage();
      page.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
      });
      await signIn(page, server.url, OPERATOR);
    });
    after(async () => {
      await context?.close();
      await server?.stop();
    });

    test('typing `passed` in the Verb filter suggests the store’s verb with its name; chosen, it filters', async () => {
      const verb = page.getByLabel('Verb', { exact: true });
      await verb.click();
      await page.keyboard.type('passed');
      assert.deepEqual(await optionsBecome(page, '#s-verb', [[`${ADL}passed`, 'passed']]), [[`${ADL}passed`, 'passed']]);
      // Choosing a suggestion puts its value in the field, as the browser's list does.
      await verb.fill((await page.locator('#s-verb option').first().getAttribute('value')) ?? '');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.waitForURL(/verb=http/);
      assert.equal(await page.locator('#rows tr').count(), 1);
      assert.deepEqual(await axeViolations(page), []);
    });

    test('the Agent filter suggests learners by their address with their names; `passed` applied as typed answers "did you mean"', async () => {
      await page.goto(`${server.url}/console/statements`);
      await page.getByLabel('Agent', { exact: true }).click();
      await page.keyboard.type('ada');
      assert.deepEqual(await optionsBecome(page, '#s-agent', [['ada@example.com', 'Ada Lovelace']]), [['ada@example.com', 'Ada Lovelace']]);
      await page.goto(`${server.url}/console/statements`);
      await page.getByLabel('Verb', { exact: true }).fill('passed');
      await page.keyboard.press('Enter');
      await page.waitForURL(/verb=passed/);
      assert.match(await page.locator('[role="alert"]').innerText(), /verb/);
      await page.locator('#did-you-mean').getByRole('link', { name: 'passed' }).click();
      await page.waitForURL(/verb=http/);
      assert.equal(await page.locator('#rows tr').count(), 1);
    });

    test('the Overview’s top verbs show their display names beside the IRIs', async () => {
      await page.goto(`${server.url}/console/overview`);
      const verbs = page.locator('section', { hasText: 'Top verbs' });
      assert.match(await verbs.innerText(), /attempted http:\/\/adlnet\.gov\/expapi\/verbs\/attempted\s+4[\s\S]*passed http:\/\/adlnet\.gov\/expapi\/verbs\/passed\s+1/);
      assert.deepEqual(await axeViolations(page), []);
    });

    test('a statement as a JSON tree: collapsed and expanded (by keyboard too), a value’s path copied', async () => {
      await page.goto(`${server.url}/console/statements/${id}`);
      const open = () => page.locator('.json-root details[open]').count();
      assert.ok((await open()) > 0);
      await page.getByRole('button', { name: 'Collapse all' }).click();
      assert.equal(await open(), 0);
      await page.getByRole('button', { name: 'Expand all' }).click();
      // By keyboard: the result's summary closes and opens with Enter.
      const result = page.locator('li[data-path="result"] > details');
      await result.locator('> summary').focus();
      await page.keyboard.press('Enter');
      assert.equal(await result.getAttribute('open'), null);
      await page.keyboard.press('Enter');
      assert.notEqual(await result.getAttribute('open'), null);
      const copy = page.getByRole('button', { name: 'Copy path result.score.scaled' });
      await copy.focus();
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => /result\.score\.scaled/.test(document.querySelector('.json-status')?.textContent ?? ''));
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'result.score.scaled');
      assert.equal(await page.getByRole('button', { name: 'Copy path context' }).count(), 0, 'a path per value, and this statement has no context');
      assert.deepEqual(await axeViolations(page), []);
    });

    test('without script the tree still opens and closes', async () => {
      const noScript = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1280, height: 900 } });
      try {
        const p = await noScript.newPage();
        await signIn(p, server.url, OPERATOR);
        await p.goto(`${server.url}/console/statements/${id}`);
        const actor = p.locator('li[data-path="actor"] > details');
        await actor.locator('> summary').click();
        assert.equal(await actor.getAttribute('open'), null);
        assert.equal(await p.getByText('mailto:ada@example.com').first().isVisible(), false);
        await actor.locator('> summary').click();
        assert.equal(await p.getByText('"mailto:ada@example.com"').first().isVisible(), true);
      } finally {
        await noScript.close();
      }
    });

    test('a learner’s documents opened and downloaded', async () => {
      await page.goto(`${server.url}/console/learner?agent=ada%40example.com`);
      await page.getByRole('link', { name: 'bookmark' }).click();
      await page.waitForURL(/\/console\/documents\/state\?/);
      assert.match(await page.locator('h1').innerText(), /State bookmark/);
      assert.match(await page.locator('li[data-path="visited"]').innerText(), /visited[\s\S]*intro[\s\S]*quiz/);
      assert.deepEqual(await axeViolations(page), []);
      const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download' }).click()]);
      assert.equal(download.suggestedFilename(), 'bookmark');
      assert.equal(readFileSync((await download.path())!, 'utf8'), '{"page":3,"visited":["intro","quiz"]}');
      await page.getByRole('link', { name: 'Back to the learner' }).click();
      await page.getByRole('link', { name: 'notes' }).click();
      assert.equal(await page.locator('pre.json').innerText(), 'Prefers mornings.');
    });

    test('paging: Next page, then Previous page back to the first', async () => {
      await page.goto(`${server.url}/console/statements?limit=2`);
      const first = await page.locator('#rows tr').first().getAttribute('data-id');
      await page.getByRole('link', { name: 'Next page' }).click();
      await page.getByRole('link', { name: 'Next page' }).click();
      assert.equal(await page.locator('#rows tr').count(), 1);
      await page.getByRole('link', { name: 'Previous page' }).click();
      await page.getByRole('link', { name: 'Previous page' }).click();
      assert.equal(await page.locator('#rows tr').first().getAttribute('data-id'), first);
      assert.equal(await page.getByRole('link', { name: 'Previous page' }).count(), 0);
    });

    test('the configured forwarding targets and the credentials file’s users are shown', async () => {
      await page.goto(`${server.url}/console/forwarding`);
      assert.match(await page.locator('table.configured').innerText(), /127\.0\.0\.1:9\/xAPI\/statements\s+yes\s+100\s+0\s+5 s\s+HTTP Basic as fw-user/);
      assert.doesNotMatch(await page.content(), /fw-target-password/);
      await page.goto(`${server.url}/console/access`);
      assert.match(await page.locator('table.file-users').innerText(), /admin\s+all[\s\S]*operator\s+admin/);
    });

    test('at 390 and 1280 px, light and dark: every new page fits and has no axe violations; the CSP was never violated', async () => {
      const paths = [
        '/console/statements?verb=passed',
        `/console/statements/${id}`,
        `/console/documents/state?activityId=${encodeURIComponent(COURSE)}&agent=${encodeURIComponent(JSON.stringify({ mbox: ADA.mbox }))}&stateId=bookmark`,
        '/console/learner?agent=ada%40example.com',
        `/console/statements?limit=2&search_after=${id}`,
        '/console/overview',
        '/console/forwarding',
        '/console/access',
      ];
      try {
        for (const width of [390, 1280]) {
          for (const scheme of ['light', 'dark'] as const) {
            await page.setViewportSize({ width, height: 844 });
            await page.emulateMedia({ colorScheme: scheme });
            for (const path of paths) {
              await page.goto(`${server.url}${path}`);
              assert.equal(await overflows(page), false, `${path} at ${width}`);
              assert.deepEqual(await axeViolations(page), [], `${path} at ${width}, ${scheme}`);
            }
          }
        }
      } finally {
        await page.setViewportSize({ width: 1280, height: 900 });
        await page.emulateMedia({ colorScheme: 'light' });
      }
      assert.deepEqual(cspErrors, []);
    });
  });
}
