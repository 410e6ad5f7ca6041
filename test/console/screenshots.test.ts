/**
 * The console's screenshots (docs/images/console-<name>.png, shown by README.md and
 * docs/console.md): each page of SHOTS at a fixed viewport (1280×800, light mode; one at a
 * phone's 390 px), on realistic data (bench/generate.ts's statements, a few credentials, refused
 * writes, a forwarding target that refuses). Every run takes them and checks each is a small PNG
 * of its page; with LECTERN_TEST_SCREENSHOTS=1 they are written to docs/images/ (commit them).
 * A new page's screenshot is one more entry of SHOTS.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { statement as generated, VERB } from '../../bench/generate.ts';
import { ManualClock } from '../../src/clock.ts';
import { createCredential, revokeCredential } from '../../src/ops/credentials.ts';
import { ADMIN, jsonInit, sqliteBackend, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { eventually, Receiver } from '../helpers/receiver.ts';

const DAY = 86_400_000;
const MINUTE = 60_000;
const IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url));
const WRITE = process.env.LECTERN_TEST_SCREENSHOTS === '1';
/** Largest screenshot kept: the README loads several. */
const MAX_BYTES = 150 * 1024;
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const OPERATOR: TestUser = { username: 'ops', password: 'ops-screenshot-pass', scopes: ['admin', 'all'], agent: { mbox: 'mailto:ops@example.com' } };

interface Shot {
  /** docs/images/console-<name>.png */
  name: string;
  /** The page, or a function of the data set up (a statement's id, a learner). */
  path: string | ((d: Data) => string);
  viewport?: { width: number; height: number };
  /** Signed out (the sign-in page). */
  anonymous?: boolean;
  /** Runs on the page before the screenshot (open a detail, press a button). */
  prepare?: (page: Page) => Promise<void>;
}

interface Data {
  statementId: string;
  learner: string;
}

/** One entry per screenshot: the README and docs/console.md name them. */
const SHOTS: Shot[] = [
  { name: 'sign-in', path: '/console/sign-in', anonymous: true },
  // The figures and the chart of statements per day.
  { name: 'overview', path: '/console/overview', viewport: { width: 1280, height: 960 } },
  // Taller: the filters and a page of results.
  { name: 'statements', path: '/console/statements', viewport: { width: 1280, height: 960 } },
  { name: 'statement', path: (d) => `/console/statements/${d.statementId}` },
  { name: 'learner', path: (d) => `/console/learner?agent=${encodeURIComponent(d.learner)}` },
  {
    name: 'erase',
    path: (d) => `/console/learner?agent=${encodeURIComponent(d.learner)}`,
    prepare: async (page) => {
      // The dry run is a form POST: the screenshot waits for its answer, the typed confirmation.
      await page.getByRole('button', { name: 'Dry run' }).click();
      await page.locator('#confirm').waitFor();
    },
  },
  { name: 'access', path: '/console/access' },
  { name: 'rejections', path: '/console/rejections' },
  { name: 'forwarding', path: '/console/forwarding' },
  { name: 'stores', path: '/console/stores' },
  // The results, one card per statement.
  { name: 'statements-phone', path: '/console/statements', viewport: PHONE, prepare: (page) => page.locator('#results-title').evaluate((e) => e.scrollIntoView()) },
];

/** PNG width and height, from its IHDR chunk. */
const pngSize = (png: Buffer) => ({ width: png.readUInt32BE(16), height: png.readUInt32BE(20) });

describe('console screenshots', () => {
  let browser: Browser;
  let t: TestLrs;
  let receiver: Receiver;
  let data: Data;
  let cookie: { name: string; value: string; url: string };

  before(async () => {
    if (WRITE) mkdirSync(IMAGES, { recursive: true });
    receiver = await new Receiver().listen();
    // A target that refuses the first batch and takes the others: dead letters, and delivered statements.
    receiver.respond = (_r, n) => ({ status: n <= 1 ? 503 : 200 });
    const forwardings = [{ is_active: true, url: receiver.url, basic_username: 'fw', basic_password: 'fw-target-password', max_retries: 0, timeout: 10 }];
    // The server's clock starts 30 days back and is moved forward as an LMS would have sent them.
    const now = Date.now();
    const clock = new ManualClock(now - 30 * DAY);
    t = await startTestLrs(sqliteBackend, {
      users: [ADMIN, OPERATOR],
      clock,
      storeClock: clock,
      env: { LECTERN_XAPI_FORWARDINGS: JSON.stringify(forwardings), LECTERN_XAPI_FORWARDING_BACKOFF: '20', LECTERN_AUTH_CREDENTIALS_REFRESH: '0' },
    });
    // Statements as an LMS sends them over 30 days (fewer at weekends), then batches of the last
    // minutes, so the Overview's days and minutes have a history (voidings left out: they name
    // statements of a longer stream).
    const statements = Array.from({ length: 1400 }, (_, i) => generated(7, i)).filter((s) => (s.verb as { id: string }).id !== VERB.voided);
    let next = 0;
    const send = async (n: number) => {
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', statements.slice(next, next + n)));
      assert.equal(res.status, 200, await res.clone().text());
      next += n;
    };
    for (let day = 0; day < 30; day++) {
      const weekend = [0, 6].includes(new Date(clock.now()).getUTCDay());
      await send(weekend ? 8 + (day % 5) : 30 + ((day * 7) % 19));
      clock.advance(DAY);
    }
    clock.advance(now - clock.now() - 8 * MINUTE);
    for (let minute = 0; minute < 8; minute++) {
      await send(20 + ((minute * 5) % 13));
      clock.advance(MINUTE);
    }
    statements.splice(next);
    // The most active learner known by an email address.
    const counts = new Map<string, number>();
    for (const s of statements) {
      const actor = s.actor as { objectType?: string; mbox?: string };
      if (actor.objectType !== 'Group' && actor.mbox) counts.set(actor.mbox, (counts.get(actor.mbox) ?? 0) + 1);
    }
    const mbox = [...counts].sort((x, y) => y[1] - x[1])[0][0];
    // A few more of theirs, for a Learner page with a history.
    const theirs = statements.find((s) => (s.actor as { mbox?: string }).mbox === mbox)!.actor;
    const more = Array.from({ length: 12 }, (_, i) => generated(7, 5000 + i)).filter(
      (s) => (s.actor as { objectType?: string }).objectType !== 'Group' && (s.object as { objectType?: string }).objectType !== 'StatementRef',
    );
    assert.equal(
      (
        await t.fetch(
          '/xAPI/statements',
          jsonInit(
            'POST',
            more.slice(0, 5).map((s) => ({ ...s, actor: theirs })),
          ),
        )
      ).status,
      200,
    );
    data = { statementId: statements[statements.length - 1].id, learner: mbox.replace('mailto:', '') };
    // Credentials of the LMSs and a report, one revoked; refused writes as clients send them.
    const agent = (name: string) => ({ objectType: 'Agent' as const, account: { homePage: 'https://lms.example.com', name } });
    await createCredential(t.lrs.store, { label: 'Moodle (production)', scopes: ['statements/write', 'state'], agent: agent('moodle') }, { clock });
    await createCredential(
      t.lrs.store,
      { label: 'Analytics dashboard', scopes: ['statements/read'], agent: agent('analytics'), expires: new Date(clock.now() + 90 * 86_400_000).toISOString().slice(0, 10) },
      { clock },
    );
    const old = await createCredential(t.lrs.store, { label: 'Old SCORM player', scopes: ['statements/write'], agent: agent('scorm'), validation: 'lax' }, { clock });
    await revokeCredential(t.lrs.store, old.key, { clock });
    const base = generated(7, 1000);
    for (const bad of [
      { ...base, id: undefined, verb: { id: 'completed' } },
      { ...base, id: undefined, timestamp: 'yesterday' },
      { ...base, id: undefined, lms_course_code: 'BIO-101' },
    ]) {
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', bad))).status, 400);
    }
    await eventually(
      'dead letters of the refusing target',
      async () => {
        const res = await t.fetch('/admin/api/forwarding', { user: OPERATOR });
        return ((await res.json()) as { targets: { dead: number }[] }).targets[0]?.dead > 0;
      },
      60_000,
    );

    const res = await fetch(`${t.url}/console/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ username: OPERATOR.username, password: OPERATOR.password }),
    });
    const [name, value] = res.headers.get('set-cookie')!.split(';')[0].split('=');
    cookie = { name, value, url: t.url };
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--hide-scrollbars'],
    });
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await receiver?.close();
  });

  for (const shot of SHOTS) {
    test(`console-${shot.name}.png: a small PNG of ${typeof shot.path === 'string' ? shot.path : 'its page'}`, async () => {
      const viewport = shot.viewport ?? DESKTOP;
      const context = await browser.newContext({ viewport, colorScheme: 'light', deviceScaleFactor: 1, reducedMotion: 'reduce' });
      try {
        if (!shot.anonymous) await context.addCookies([cookie]);
        const page = await context.newPage();
        const response = await page.goto(`${t.url}${typeof shot.path === 'string' ? shot.path : shot.path(data)}`);
        assert.equal(response?.status(), 200);
        await shot.prepare?.(page);
        const png = await page.screenshot({ animations: 'disabled', caret: 'hide' });
        assert.deepEqual(pngSize(png), viewport, 'the fixed viewport');
        assert.ok(png.length < MAX_BYTES, `${png.length} bytes: at most ${MAX_BYTES}`);
        if (WRITE) writeFileSync(join(IMAGES, `console-${shot.name}.png`), png);
      } finally {
        await context.close();
      }
    });
  }
});
