/**
 * Every console page at a laptop's and a phone's width (1280 and 390 px) on realistic data (long
 * keys, IRIs, names, labels and store names; lax statements, rejections, dead letters, audit
 * entries): nothing wider than the screen, no word cut by a line break, no label apart from its
 * value or past its card (browser-kit.ts pageProblems), and no axe violation at either width nor
 * in dark mode. One browser, one operator's session working in a store with a long name. On
 * SQLite and PostgreSQL. The pages that answer a form (erasure's dry run, revoke's question, a
 * rotated secret, a replay) are reached by their buttons.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createCredential, revokeCredential, rotateCredential } from '../../src/ops/admin/credentials.ts';
import { cliActor } from '../../src/ops/admin/roles.ts';
import { systemClock } from '../../src/clock.ts';
import { ADMIN, jsonInit, postgresBackend, sqliteBackend, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { eventually, Receiver } from '../helpers/receiver.ts';
import { axeViolations, launchBrowser, pageProblems, WIDTHS } from './browser-kit.ts';

/** A store named as a university names its continuing-education tenant. */
const STORE = 'acme-university-continuing-education-emea';
const OPERATOR: TestUser = { username: 'operator', password: 'operator-layout-pass', scopes: ['all', 'admin'], agent: { mbox: 'mailto:operator@example.com' } };
const LMS: TestUser = {
  username: 'moodle-continuing-education',
  password: 'lms-layout-pass',
  scopes: ['all'],
  agent: { name: 'Moodle', mbox: 'mailto:moodle@continuing-education.acme-university.example.com' },
  target: STORE,
};
const LEARNER = { objectType: 'Agent', name: 'Maximiliane Oyelaran-Fitzgerald', mbox: 'mailto:maximiliane.oyelaran-fitzgerald@continuing-education.acme-university.example.com' };
const LEAVER = { objectType: 'Agent', name: 'Jean-Baptiste Nakamura-Lindqvist', mbox: 'mailto:jb.nakamura-lindqvist@alumni.acme-university.example.com' };
const LONG_ACTIVITY = 'https://lms.acme-university.example.com/courses/continuing-education/2026/spring/organic-chemistry-101/module-3/lesson-12';
const LONG_VERB = 'https://w3id.org/xapi/acme/verbs/submitted-for-peer-review';
const LONG_KEY = 'acme-moodle-production-eu-west-1-primary-ingest';

interface Data {
  lax: string;
  voided: string;
  rejection: string;
  reason: string;
}

/** Statements an LMS sends over a term, documents, credentials with their audit entries, refused writes, dead letters. */
async function fill(t: TestLrs): Promise<Data> {
  const post = async (body: unknown, user: TestUser = LMS) => {
    const res = await t.fetch('/xAPI/statements', jsonInit('POST', body, { user }));
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as string[];
  };
  const verb = (v: string) => ({ id: `http://adlnet.gov/expapi/verbs/${v}`, display: { 'en-US': v } });
  const named = {
    objectType: 'Activity',
    id: 'https://lms.acme-university.example.com/courses/chem-101',
    definition: { name: { 'en-US': 'Introduction to Organic Chemistry: Functional Groups and Reaction Mechanisms' } },
  };
  const ids = await post([
    statement({ actor: LEARNER, verb: verb('attempted'), object: named, context: { registration: '6f0e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b' } }),
    statement({
      actor: LEARNER,
      verb: { id: LONG_VERB },
      object: { objectType: 'Activity', id: LONG_ACTIVITY },
      result: { score: { scaled: 0.87 }, success: true, duration: 'PT1H12M30S' },
    }),
    statement({ actor: { objectType: 'Group', name: 'Study group 7 (Tuesday evening, remote)', member: [LEARNER] }, verb: verb('experienced'), object: named }),
    statement({ actor: LEARNER, verb: verb('failed'), object: { objectType: 'Activity', id: LONG_ACTIVITY } }),
    statement({
      actor: { objectType: 'Agent', account: { homePage: 'https://sso.acme-university.example.com/identity', name: 'student-2026-000123456' } },
      verb: verb('completed'),
      object: { objectType: 'Agent', mbox: 'mailto:tutor.ramanathan-okonkwo@acme-university.example.com' },
    }),
  ]);
  await post(statement({ actor: LEARNER, verb: verb('voided'), object: { objectType: 'StatementRef', id: ids[3] } }));
  await post(statement({ actor: LEARNER, verb: verb('commented'), object: { objectType: 'StatementRef', id: ids[0] } }));
  await post(statement({ verb: { id: 'http://example.com/verbs/in-default' } }), ADMIN);
  // A learner who asked to be forgotten.
  await post(statement({ actor: LEAVER, verb: verb('launched'), object: named }));
  // A lax credential of an old SCORM player, a statement of which broke two rules.
  const ctx = { store: t.lrs.store, config: t.config, clock: systemClock };
  const by = cliActor();
  const agent = (name: string) => ({ objectType: 'Agent' as const, account: { homePage: 'https://lms.acme-university.example.com/integrations', name } });
  const scorm = await createCredential(ctx, by, {
    target: STORE,
    label: 'Legacy SCORM 1.2 player (chemistry labs, to retire in 2027)',
    scopes: ['statements/write'],
    agent: agent('scorm-player'),
    validation: 'lax',
  });
  const [lax] = await post(
    statement({
      actor: LEARNER,
      verb: verb('answered'),
      object: { objectType: 'Activity', id: LONG_ACTIVITY },
      lms_course_code: 'CHEM-101-SPRING',
      context: { contextActivities: { parent: [{ id: '0b7c3c4e-0000-4000-8000-000000000000' }] } },
    }),
    { username: scorm.key, password: scorm.secret, scopes: [], agent: {} },
  );
  // Credentials: generated keys, a long chosen one, an expiry, a revoked one, a rotation's grace, an administrator's.
  const ingest = await createCredential(ctx, by, {
    target: STORE,
    key: LONG_KEY,
    label: 'Moodle production (EU West, primary ingest)',
    scopes: ['statements/write', 'statements/read/mine', 'state', 'profile'],
    agent: agent('moodle-production-ingest'),
    expires: '2027-06-30',
  });
  const dashboard = await createCredential(ctx, by, { target: STORE, label: 'Learning analytics dashboard', scopes: ['statements/read'], agent: agent('analytics') });
  await rotateCredential(ctx, by, { key: dashboard.key, target: STORE, graceSeconds: 86_400 });
  const old = await createCredential(ctx, by, { target: STORE, label: 'Old reporting export', scopes: ['statements/read'], agent: agent('reporting') });
  await revokeCredential(ctx, by, { key: old.key, target: STORE });
  await createCredential(ctx, by, { target: STORE, label: 'Faculty IT administrator', scopes: ['admin/store'], agent: agent('faculty-it') });
  // Documents: the learner's profile and state in the long activity.
  const who = encodeURIComponent(JSON.stringify({ mbox: LEARNER.mbox }));
  const doc = { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"fontSize":"large"}', user: LMS };
  const profile = { ...doc, headers: { ...doc.headers, 'if-none-match': '*' } };
  assert.equal(
    (
      await t.fetch(
        `/xAPI/agents/profile?agent=${who}&profileId=${encodeURIComponent('https://lms.acme-university.example.com/xapi/profiles/learner-preferences/accessibility')}`,
        profile,
      )
    ).status,
    204,
  );
  assert.equal(
    (await t.fetch(`/xAPI/activities/state?agent=${who}&activityId=${encodeURIComponent(LONG_ACTIVITY)}&stateId=suspend-data-cmi-core-lesson-location`, doc)).status,
    204,
  );
  // Refused writes, as clients send them (the LMS's production credential, a long key, as the writer).
  const writer: TestUser = { username: ingest.key, password: ingest.secret, scopes: [], agent: {} };
  const bad = [statement({ verb: { id: 'completed' } }), statement({ timestamp: 'yesterday at noon' }), statement({ lms_course_code: 'CHEM-101', lms_section: 'evening' })];
  for (const body of bad) assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', body, { user: writer }))).status, 400);
  const put = await t.fetch(`/xAPI/statements?statementId=${ids[0]}`, jsonInit('PUT', statement({ verb: verb('passed') }), { user: writer }));
  assert.equal(put.status, 409);
  await t.lrs.rejections.flush();
  const kept = await t.lrs.store.listRejections({ tenant: STORE, limit: 10 });
  assert.ok(kept.length >= 3);
  return { lax, voided: ids[3], rejection: kept[0].id, reason: kept[0].reasons[0]?.type ?? 'value_error' };
}

/** A page to check: how to open it on the operator's page (a URL, or a button of another page). */
type Step = { name: string; open: (page: Page, url: string, d: Data) => Promise<unknown>; as?: 'anonymous' | 'plain' };
const go = (path: string | ((d: Data) => string)) => (page: Page, url: string, d: Data) => page.goto(`${url}${typeof path === 'string' ? path : path(d)}`);
const learner = `/console/learner?agent=${encodeURIComponent(LEARNER.mbox.replace('mailto:', ''))}`;

/** Every console page. */
const PAGES: Step[] = [
  { name: 'sign-in', open: go('/console/sign-in'), as: 'anonymous' },
  { name: 'overview', open: go('/console/overview') },
  { name: 'statements', open: go('/console/statements') },
  { name: 'statements, filtered', open: go(`/console/statements?agent=${encodeURIComponent(LEARNER.mbox)}&verb=${encodeURIComponent(LONG_VERB)}&related_agents=true`) },
  { name: 'statements, a bad filter', open: go('/console/statements?since=last%20Tuesday%20morning') },
  { name: 'statement (lax)', open: go((d) => `/console/statements/${d.lax}`) },
  { name: 'statement (voided)', open: go((d) => `/console/statements/${d.voided}`) },
  { name: 'no such statement', open: go('/console/statements/00000000-0000-4000-8000-000000000000') },
  { name: 'learner', open: go(learner) },
  {
    name: "a learner's document",
    open: async (page, url) => {
      await page.goto(`${url}${learner}`);
      await page.locator('ul.documents a').first().click();
      await page.locator('h1 code').waitFor();
    },
  },
  {
    name: 'statements, a later page',
    open: async (page, url) => {
      await page.goto(`${url}/console/statements?limit=2`);
      await page.getByRole('link', { name: 'Next page' }).click();
      await page.getByRole('link', { name: 'Previous page' }).waitFor();
    },
  },
  {
    name: 'erase: the dry run',
    open: async (page, url) => {
      await page.goto(`${url}${learner}`);
      await page.getByRole('button', { name: 'Dry run' }).click();
      await page.locator('#confirm').waitFor();
    },
  },
  {
    name: 'erased',
    open: async (page, url) => {
      await page.goto(`${url}/console/learner?agent=${encodeURIComponent(LEAVER.mbox)}`);
      await page.getByRole('button', { name: 'Dry run' }).click();
      await page.locator('#confirm').fill(LEAVER.mbox.replace('mailto:', ''));
      await page.getByRole('button', { name: 'Erase for good' }).click();
      await page.locator('h1', { hasText: 'Erased' }).waitFor();
    },
  },
  { name: 'access', open: go('/console/access') },
  {
    name: 'revoke: the question',
    open: async (page, url) => {
      await page.goto(`${url}/console/access`);
      await page.getByRole('button', { name: `Revoke ${LONG_KEY}` }).click();
      await page.getByRole('button', { name: 'Revoke for good' }).waitFor();
    },
  },
  {
    name: 'rotated: the new secret',
    open: async (page, url) => {
      await page.goto(`${url}/console/access`);
      await page.locator(`tr[data-key="${LONG_KEY}"] input[name="grace"]`).fill('3600');
      await page.getByRole('button', { name: `Rotate ${LONG_KEY}` }).click();
      await page.locator('#issued-secret').waitFor();
    },
  },
  { name: 'rejections', open: go('/console/rejections') },
  { name: 'rejections of a reason', open: go((d) => `/console/rejections?reason=${encodeURIComponent(d.reason)}`) },
  { name: 'rejection', open: go((d) => `/console/rejections/${d.rejection}`) },
  {
    name: 'replayed',
    open: async (page, url, d) => {
      await page.goto(`${url}/console/rejections/${d.rejection}`);
      await page.getByRole('button', { name: 'Replay this one' }).click();
      await page.locator('#replay-summary').waitFor();
    },
  },
  { name: 'forwarding', open: go('/console/forwarding') },
  { name: 'forwarding, after a retry', open: go('/console/forwarding?retried=12') },
  { name: 'stores', open: go('/console/stores') },
  { name: 'not allowed (a plain user on Access)', open: go('/console/access'), as: 'plain' },
];

async function signedIn(browser: Browser, url: string, user: TestUser): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: WIDTHS[0], height: 900 } });
  const page = await context.newPage();
  await page.goto(`${url}/console/sign-in`);
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/console\/statements$/);
  await page.close();
  return context;
}

let browser: Browser;
before(async () => {
  browser = await launchBrowser();
});
after(() => browser?.close());

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`every console page fits 1280 and 390 px, cuts no word, and is axe clean (${backend.name})`, () => {
    let t: TestLrs;
    let receiver: Receiver;
    let data: Data;
    const contexts: Partial<Record<'operator' | 'anonymous' | 'plain', BrowserContext>> = {};
    before(async () => {
      receiver = await new Receiver().listen();
      receiver.respond = () => ({ status: 503 });
      const forwardings = [
        {
          is_active: true,
          url: `${receiver.url}/data/xAPI/forwarded/acme-university-continuing-education`,
          basic_username: 'fw',
          basic_password: 'fw-target-password',
          max_retries: 0,
          timeout: 10,
        },
      ];
      t = await startTestLrs(backend, {
        users: [ADMIN, OPERATOR, LMS],
        env: { LECTERN_XAPI_FORWARDINGS: JSON.stringify(forwardings), LECTERN_XAPI_FORWARDING_BACKOFF: '20', LECTERN_AUTH_CREDENTIALS_REFRESH: '0' },
      });
      data = await fill(t);
      await eventually('dead letters', async () => (await t.lrs.store.outbox.deadLetters({ limit: 1 })).length > 0, 60_000);
      contexts.operator = await signedIn(browser, t.url, OPERATOR);
      // The operator works in the long-named store.
      const page = await contexts.operator.newPage();
      await page.goto(`${t.url}/console/stores`);
      await page.getByLabel('Store', { exact: true }).fill(STORE);
      await page.getByRole('button', { name: 'Work in this store' }).click();
      await page.waitForURL(/\/console\/statements$/);
      await page.close();
      contexts.plain = await signedIn(browser, t.url, LMS);
      contexts.anonymous = await browser.newContext({ viewport: { width: WIDTHS[0], height: 900 } });
    });
    after(async () => {
      for (const c of Object.values(contexts)) await c?.close();
      await t?.close();
      await receiver?.close();
    });

    for (const step of PAGES) {
      test(step.name, async () => {
        const page = await contexts[step.as ?? 'operator']!.newPage();
        try {
          await step.open(page, t.url, data);
          const problems: string[] = [];
          for (const width of WIDTHS) {
            await page.setViewportSize({ width, height: 900 });
            problems.push(...(await pageProblems(page)).map((p) => `${width} px: ${p}`));
            problems.push(...(await axeViolations(page)).map((v) => `${width} px, axe: ${v}`));
          }
          await page.emulateMedia({ colorScheme: 'dark' });
          problems.push(...(await axeViolations(page)).map((v) => `390 px, dark, axe: ${v}`));
          assert.deepEqual(problems, []);
        } finally {
          await page.close();
        }
      });
    }
  });
}
