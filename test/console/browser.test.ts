/**
 * The operator console in a real browser (Debian's Chromium through playwright-core) against a real
 * `lectern runserver` on SQLite and PostgreSQL: keyboard-only sign-in and browse, filters, paging,
 * one statement, the live tail, a CSV download, the learner page, axe-core on each page (light,
 * dark, 390 px), and OpenID Connect sign-in with PKCE. One browser for the file, one page per
 * server. The screenshots of the docs are ./screenshots.test.ts's.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { ADMIN, basic, postgresBackend, sqliteBackend, statement, type TestUser } from '../helpers/lrs.ts';
import { LRS_AUDIENCE, startProvider } from '../helpers/oidc.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { freePort } from '../helpers/tools.ts';
import { axeViolations, launchBrowser, overflows } from './browser-kit.ts';
import { runserver, type Server } from './runserver.ts';

let browser: Browser;
before(async () => {
  browser = await launchBrowser();
});
after(() => browser?.close());

const VERB = (v: string) => ({ id: `http://adlnet.gov/expapi/verbs/${v}`, display: { 'en-US': v } });
/** An LMS whose credential is validated lax: what it sends that strict refuses is stored, with the rules it broke. */
const LAX_LMS: TestUser = { username: 'old-lms', password: 'old-lms-pass', scopes: ['statements/write'], agent: { mbox: 'mailto:old-lms@example.com' }, validation: 'lax' };

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`the console in a browser (${backend.name})`, () => {
    let server: Server;
    let page: Page;
    const cspErrors: string[] = [];
    let ids: string[];
    before(async () => {
      server = await runserver(backend, {}, 0, [], [LAX_LMS]);
      ids = await server.post([
        statement({ verb: VERB('attempted'), actor: { name: 'Ada', mbox: 'mailto:ada@example.com' } }),
        statement({
          verb: VERB('experienced'),
          actor: { name: 'Ada', mbox: 'mailto:ada@example.com' },
          object: { id: 'http://example.com/course/intro', definition: { name: { 'en-US': 'Introduction' } } },
        }),
        statement({ verb: VERB('passed') }),
        statement({ verb: VERB('failed') }),
        statement({ verb: VERB('completed') }),
      ]);
      // The `failed` one is voided.
      await server.post(statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided', display: { 'en-US': 'voided' } }, object: { objectType: 'StatementRef', id: ids[3] } }));
      // Ada's documents: an agent profile, and state in the course she experienced.
      const ada = encodeURIComponent(JSON.stringify({ mbox: 'mailto:ada@example.com' }));
      const doc = { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"theme":"dark"}' };
      const put = await server.xapi(`/xAPI/agents/profile?agent=${ada}&profileId=preferences`, { ...doc, headers: { ...doc.headers, 'if-none-match': '*' } });
      assert.equal(put.status, 204, await put.text());
      assert.equal(
        (await server.xapi(`/xAPI/activities/state?agent=${ada}&activityId=${encodeURIComponent('http://example.com/course/intro')}&stateId=bookmark`, doc)).status,
        204,
      );
      const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 900 } });
      page = await context.newPage();
      page.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
      });
    });
    after(async () => {
      await page?.context().close();
      await server?.stop();
    });

    test('keyboard-only sign-in: the form has labelled fields, no axe violations, Enter signs in', async () => {
      await page.goto(`${server.url}/console`);
      assert.match(page.url(), /\/console\/sign-in/);
      assert.deepEqual(await axeViolations(page), []);
      // Wrong password first: the error is announced and the form kept.
      await page.keyboard.type(ADMIN.username);
      await page.keyboard.press('Tab');
      await page.keyboard.type('wrong');
      await page.keyboard.press('Enter');
      await page.waitForSelector('[role="alert"]');
      assert.match(await page.locator('[role="alert"]').innerText(), /Wrong username or password/);
      // The username is kept and the focus is on the password.
      await page.keyboard.type(ADMIN.password);
      await page.keyboard.press('Enter');
      await page.waitForURL(/\/console\/statements$/);
      assert.equal(await page.locator('h1').innerText(), 'Statements');
    });

    test('statements posted through the xAPI API are listed, the voiding one marked; no axe violations', async () => {
      const rows = page.locator('#rows tr');
      assert.equal(await rows.count(), 5, 'the voided statement is not listed; the voiding one is');
      assert.match(await rows.first().innerText(), /voided[\s\S]*voids a statement/);
      assert.deepEqual(await axeViolations(page), []);
    });

    test('a click on a verb filters by it; then on an actor; the filters show in the form', async () => {
      await page.getByRole('link', { name: 'experienced', exact: true }).click();
      await page.waitForURL(/verb=/);
      assert.equal(await page.locator('#rows tr').count(), 1);
      assert.equal(await page.locator('#f-verb').inputValue(), 'http://adlnet.gov/expapi/verbs/experienced');
      await page.getByRole('link', { name: 'Ada', exact: true }).click();
      await page.waitForURL(/agent=/);
      assert.equal(await page.locator('#rows tr').count(), 2);
      await page.getByRole('link', { name: 'Introduction', exact: true }).click();
      await page.waitForURL(/activity=/);
      assert.equal(await page.locator('#rows tr').count(), 1);
    });

    test('every filter of the form: agent by email, related agents, ascending, since/until, paging by more', async () => {
      await page.goto(`${server.url}/console/statements`);
      await page.getByLabel('Agent', { exact: true }).fill('ben@example.com');
      await page.getByLabel('Oldest first').check();
      await page.getByLabel('Per page').fill('2');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.waitForURL(/ascending=true/);
      const verbs = async () => (await page.locator('#rows tr td[data-label="Verb"] a').allInnerTexts()).join(' ');
      assert.equal(await verbs(), 'passed completed', 'the voided failed statement is left out');
      await page.getByRole('link', { name: 'Next page' }).click();
      await page.waitForURL(/search_after=/);
      assert.equal(await verbs(), 'voided');
      assert.equal(await page.getByRole('link', { name: 'Next page' }).count(), 0);
      // Ada appears in no statement about Ben, anywhere: related agents widens nothing here.
      await page.goto(
        `${server.url}/console/statements?agent=ada%40example.com&related_agents=true&related_activities=true&activity=${encodeURIComponent('http://example.com/course/intro')}&since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z`,
      );
      assert.equal(await page.locator('#rows tr').count(), 1);
      assert.equal(await page.getByLabel('Agent anywhere in the statement (related agents)').isChecked(), true);
    });

    test('keyboard-only browse: Tab to a statement, Enter opens its JSON; a voided statement says so', async () => {
      await page.goto(`${server.url}/console/statements?verb=${encodeURIComponent('http://adlnet.gov/expapi/verbs/passed')}`);
      let focused = '';
      for (let i = 0; i < 60 && !focused.startsWith('Statement '); i++) {
        await page.keyboard.press('Tab');
        focused = await page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? '');
      }
      assert.equal(focused, `Statement ${ids[2]}`);
      await page.keyboard.press('Enter');
      await page.waitForURL(new RegExp(`/console/statements/${ids[2]}$`));
      // The JSON as text, under the tree ("As JSON text", closed): its text, shown or not.
      assert.equal((JSON.parse((await page.locator('pre.json').textContent()) ?? '') as { id: string }).id, ids[2]);
      assert.equal(await page.locator('li[data-path="id"] .json-line').innerText(), `id: "${ids[2]}"`);
      assert.deepEqual(await axeViolations(page), []);
      await page.goto(`${server.url}/console/statements/${ids[3]}`);
      assert.match(await page.locator('[role="note"]').innerText(), /Voided/);
    });

    test('a statement stored under lax validation: flagged in the list, the learner page and the live tail; its page lists the rules it broke', async () => {
      const lax = async (body: unknown) => {
        const res = await fetch(`${server.url}/xAPI/statements`, {
          method: 'POST',
          headers: { authorization: basic(LAX_LMS), 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        assert.equal(res.status, 200, await res.clone().text());
        return ((await res.json()) as string[])[0];
      };
      const broken = await lax(statement({ actor: { mbox: 'mailto:lax-learner@example.com' }, verb: VERB('answered'), lms_course_code: 'BIO-101' }));
      await page.goto(`${server.url}/console/statements`);
      const flagged = async () => page.locator('#rows tr', { has: page.locator('.badge.lax') }).evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id')));
      assert.deepEqual(await flagged(), [broken], 'only the lax one is flagged');
      assert.deepEqual(await axeViolations(page), []);
      await page.goto(`${server.url}/console/learner?agent=lax-learner%40example.com`);
      assert.deepEqual(await flagged(), [broken]);
      // Its page: the rule, where and what.
      await page.goto(`${server.url}/console/statements/${broken}`);
      assert.match(await page.locator('#violations').innerText(), /value_error\.extra at lms_course_code/);
      assert.deepEqual(await axeViolations(page), []);
      // A statement that broke nothing has no such section.
      await page.goto(`${server.url}/console/statements/${ids[0]}`);
      assert.equal(await page.locator('#violations').count(), 0);
      // The live tail flags it too.
      await page.goto(`${server.url}/console/statements`);
      await page.getByRole('button', { name: 'Live tail' }).click();
      const later = await lax(statement({ verb: VERB('answered'), lms_course_code: 'BIO-102' }));
      await page.waitForSelector(`#rows tr[data-id="${later}"] .badge.lax`);
      await page.getByRole('button', { name: 'Stop live tail' }).click();
    });

    test('the live tail shows a statement stored after the page was shown', async () => {
      await page.goto(`${server.url}/console/statements`);
      await page.getByRole('button', { name: 'Live tail' }).click();
      assert.equal(await page.getByRole('button', { name: 'Stop live tail' }).getAttribute('aria-pressed'), 'true');
      const [id] = await server.post(statement({ verb: VERB('launched') }));
      await page.waitForSelector(`#rows tr[data-id="${id}"]`);
      assert.equal(await page.locator('#rows tr').first().getAttribute('data-id'), id);
      assert.match(await page.locator('#tail-status').innerText(), /1 new statement/);
      await page.getByRole('button', { name: 'Stop live tail' }).click();
    });

    test('the current query downloads as CSV of the chosen fields', async () => {
      await page.goto(`${server.url}/console/statements?agent=ada%40example.com`);
      await page.getByLabel('timestamp', { exact: true }).uncheck();
      await page.getByLabel('stored', { exact: true }).uncheck();
      const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download' }).click()]);
      const csv = readFileSync((await download.path())!, 'utf8');
      assert.deepEqual(csv.trimEnd().split('\r\n'), [
        'id,actor,verb,object',
        `${ids[1]},mailto:ada@example.com,http://adlnet.gov/expapi/verbs/experienced,http://example.com/course/intro`,
        `${ids[0]},mailto:ada@example.com,http://adlnet.gov/expapi/verbs/attempted,http://example.com/activities/explosives-training`,
      ]);
    });

    test('the learner page: Person, statements and documents, read-only; no axe violations', async () => {
      await page.goto(`${server.url}/console/learner`);
      await page.getByLabel('Agent', { exact: true }).fill('ada@example.com');
      await page.keyboard.press('Enter');
      await page.waitForURL(/agent=/);
      assert.match(await page.locator('dl.person').innerText(), /Ada[\s\S]*mailto:ada@example\.com/);
      assert.equal(await page.locator('#rows tr').count(), 2);
      assert.match(await page.locator('section', { hasText: 'Agent profiles' }).innerText(), /preferences[\s\S]*http:\/\/example\.com\/course\/intro\s+bookmark/);
      assert.deepEqual(await axeViolations(page), []);
    });

    test('at 390 px in dark mode: nothing wider than the screen, no axe violations', async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await page.emulateMedia({ colorScheme: 'dark' });
      try {
        for (const path of ['/console/statements', `/console/statements/${ids[0]}`, '/console/learner?agent=ada%40example.com']) {
          await page.goto(`${server.url}${path}`);
          assert.equal(await overflows(page), false, path);
          assert.deepEqual(await axeViolations(page), [], path);
        }
        await page.goto(`${server.url}/console/statements`);
        await page.locator('#results-title').scrollIntoViewIfNeeded();
      } finally {
        await page.setViewportSize({ width: 1200, height: 900 });
        await page.emulateMedia({ colorScheme: 'light' });
      }
    });

    test('sign-out ends the session; the Content-Security-Policy was never violated', async () => {
      await page.goto(`${server.url}/console/statements`);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.waitForURL(/\/console\/sign-in$/);
      await page.goto(`${server.url}/console/statements`);
      assert.match(page.url(), /\/console\/sign-in\?next=/);
      assert.deepEqual(cspErrors, []);
    });
  });
}

describe('console sign-in through OpenID Connect (authorization code with PKCE)', () => {
  test('the provider signs the user in; the session holds the token’s scopes', async () => {
    const port = await freePort();
    const op = await startProvider({ browserClient: { id: 'lectern-console', redirectUri: `http://127.0.0.1:${port}/console/oidc/callback` } });
    const server = await runserver(
      sqliteBackend,
      {
        LECTERN_RUNSERVER_AUTH_BACKENDS: 'basic,oidc',
        LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: op.issuer,
        LECTERN_RUNSERVER_AUTH_OIDC_AUDIENCE: LRS_AUDIENCE,
        LECTERN_CONSOLE_OIDC_CLIENT_ID: 'lectern-console',
        LECTERN_CONSOLE_OIDC_SCOPES: 'openid all/read',
      },
      port,
    );
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const asked: URL[] = [];
      page.on('request', (r) => {
        if (r.url().startsWith(`${op.issuer}/auth`)) asked.push(new URL(r.url()));
      });
      await page.goto(`${server.url}/console/statements`);
      await page.getByRole('link', { name: 'Sign in with OpenID Connect' }).click();
      // The provider's development login and consent pages.
      await page.waitForURL((u) => u.origin === op.issuer);
      assert.match(page.url(), /\/interaction\//);
      // PKCE: the authorization request carries an S256 challenge (the verifier stays on the server).
      assert.equal(asked[0].searchParams.get('code_challenge_method'), 'S256');
      assert.match(asked[0].searchParams.get('code_challenge')!, /^[\w-]{43}$/);
      assert.equal(asked[0].searchParams.get('response_type'), 'code');
      await page.locator('input[name="login"]').fill('grace');
      await page.locator('input[name="password"]').fill('any');
      await page.locator('button[type="submit"]').click();
      await page.locator('button[type="submit"]').click(); // consent
      await page.waitForURL(`${server.url}/console/statements`);
      assert.equal(await page.locator('h1').innerText(), 'Statements');
      const session = (await (await page.request.get(`${server.url}/console/session`)).json()) as { scopes: string[]; store: string; expires: string };
      assert.ok(session.scopes.includes('all/read'), JSON.stringify(session));
      assert.equal(session.store, '');
      // Bounded by the access token's expiry (the provider's tokens last 600 s), not the 8 hours of LECTERN_CONSOLE_SESSION_TTL.
      assert.ok(Date.parse(session.expires) <= Date.now() + 600_000, session.expires);
    } finally {
      await context.close();
      await server.stop();
      await op.close();
    }
  });
});
