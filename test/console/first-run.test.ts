/**
 * The operator's first day: the user that `lectern runserver`'s first-run hint, the README's tour,
 * docs/operations.md's systemd recipe and deploy/lectern.service's comment tell an operator to
 * create can operate. The hint's command, run as printed, makes a user who signs in to the console
 * in Chromium and opens every admin page from the nav; each recipe's command, run as written,
 * makes a user every admin page answers 200 to. On SQLite and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { postgresBackend, sqliteBackend } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { CLI, type Runserver, spawnRunserver } from '../helpers/runserver.ts';
import { axeViolations, launchBrowser } from './browser-kit.ts';
import { signIn } from './sign-in.ts';

const ROOT = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(fileURLToPath(new URL(path, ROOT)), 'utf8');

/** The admin pages, as the nav names them, and their paths. */
const ADMIN_PAGES = [
  ['Overview', '/console/overview'],
  ['Access', '/console/access'],
  ['Rejections', '/console/rejections'],
  ['Forwarding', '/console/forwarding'],
  ['Stores', '/console/stores'],
] as const;

/** Each recipe that creates the first user: where it is, and the `lectern auth …` arguments as written. */
function recipes(): { where: string; args: string[] }[] {
  const found = [
    ['README.md', /^npm run lectern -- (auth .*)$/m],
    ['docs/authentication.md', /^npm run lectern -- (auth .*)$/m],
    ['docs/operations.md', /^lectern --env-file \S+ (auth .*)$/m],
    ['deploy/lectern.service', /^#\s+lectern --env-file \S+ (auth .*)$/m],
  ] as const;
  return found.map(([where, pattern]) => {
    const m = pattern.exec(read(where));
    assert.ok(m, `${where} has its recipe`);
    return { where, args: m[1].split(/\s+/) };
  });
}

/** Runs `lectern auth` with `args` (a password added when they give none: no terminal to ask in) on `authFile`. */
function lecternAuth(args: string[], authFile: string): { username: string; password: string } {
  const given = args.findIndex((a) => a === '-p' || a === '--password');
  const password = given >= 0 ? args[given + 1] : 'first-day-pass';
  const r = spawnSync(process.execPath, [CLI, ...args, ...(given >= 0 ? [] : ['-p', password])], {
    env: { PATH: process.env.PATH ?? '', LECTERN_AUTH_FILE: authFile },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const u = args.findIndex((a) => a === '-u' || a === '--username');
  return { username: args[u + 1], password };
}

let browser: Browser;
before(async () => {
  browser = await launchBrowser();
});
after(() => browser?.close());

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`the first user an operator is told to create can operate (${backend.name})`, () => {
    let dir: string;
    let server: Runserver;
    let authFile: string;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'lectern-first-run-'));
      authFile = join(dir, 'etc', 'auth.json');
      server = await spawnRunserver({ backend, cwd: dir, args: ['--port', '0'], env: { LECTERN_AUTH_FILE: authFile, LECTERN_SHUTDOWN_TIMEOUT: '2' } });
    });
    after(async () => {
      await server?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    test('the first-run hint’s command, as printed, makes the operator: signed in, the nav has every admin page, and each opens', async () => {
      const hint = server
        .output()
        .split('\n')
        .filter((l) => l.includes('no user in the credentials file'))
        .map((l) => String((JSON.parse(l) as { msg: unknown }).msg));
      assert.equal(hint.length, 1, server.output());
      const m = /\sLECTERN_AUTH_FILE=("[^"]+") lectern (auth .*)$/.exec(hint[0]);
      assert.ok(m, hint[0]);
      assert.equal(JSON.parse(m[1]), authFile);
      const user = lecternAuth(m[2].split(' '), authFile);

      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      try {
        const page = await context.newPage();
        await page.goto(`${server.url}/console/sign-in`);
        await page.getByLabel('Username').fill(user.username);
        await page.getByLabel('Password').fill(user.password);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.waitForURL(/\/console\/statements$/);
        for (const [name, path] of ADMIN_PAGES) {
          const [response] = await Promise.all([
            page.waitForEvent('response', (r) => r.url().endsWith(path)),
            page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true }).click(),
          ]);
          assert.equal(response.status(), 200, path);
          assert.equal(await page.locator('h1').innerText(), name);
          assert.deepEqual(await axeViolations(page), [], path);
        }
      } finally {
        await context.close();
      }
    });

    for (const { where, args } of recipes()) {
      test(`${where}: its recipe makes a user every admin page opens for`, async () => {
        const user = lecternAuth(args, authFile);
        const signed = await signIn({ url: server.url }, { ...user, scopes: [], agent: {} });
        for (const [, path] of ADMIN_PAGES) {
          const res = await fetch(`${server.url}${path}`, { headers: { cookie: signed.cookie } });
          assert.equal(res.status, 200, `${path}: ${await res.text()}`);
        }
      });
    }
  });
}
