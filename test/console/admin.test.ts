/**
 * The console's admin pages over HTTP (the browser flows are in ./admin-browser.test.ts): what a
 * session sees follows its admin role (operator: every store, with the switcher; store
 * administrator: its own; a plain user: no admin page), and the Access page's changes, audited
 * and CSRF-protected. On SQLite and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ADMIN, jsonInit, postgresBackend, sqliteBackend, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { createCredential } from '../../src/ops/credentials.ts';
import { eventually, Receiver } from '../helpers/receiver.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { type Signed, signIn } from './sign-in.ts';

const SECRET = 'a-console-secret-of-at-least-32-characters';
const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const B_ADMIN: TestUser = { username: 'b-admin', password: 'b-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:b-admin@example.com' }, target: 'b' };
const C_USER: TestUser = { username: 'c-user', password: 'c-user-pass', scopes: ['all'], agent: { mbox: 'mailto:c@example.com' }, target: 'c' };

const get = (t: TestLrs, path: string, s: Signed) => fetch(`${t.url}${path}`, { redirect: 'manual', headers: { cookie: s.cookie } });
/** A console form posted with the session's cookie and (unless `csrf` is given) its CSRF token. */
const post = (t: TestLrs, path: string, s: Signed, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${t.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: s.cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams({ csrf: s.csrf, ...fields }),
  });
/** The session after a switch: the new cookie when one was set. */
const switched = (s: Signed, res: Response): Signed => {
  const set = res.headers.get('set-cookie');
  return set ? { ...s, cookie: set.split(';')[0] } : s;
};
const verbs = (page: string) => [...page.matchAll(/verbs\/(in-[a-z]+)/g)].map((m) => m[1]);
const secretOf = (page: string) => /id="issued-secret">([^<]+)</.exec(page)?.[1];
const keyOf = (page: string) => /id="issued-key">([^<]+)</.exec(page)?.[1];

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`console admin pages (${backend.name})`, () => {
    let t: TestLrs;
    const auditFile = join(mkdtempSync(join(tmpdir(), 'lectern-console-audit-')), 'audit.log');
    before(async () => {
      t = await startTestLrs(backend, {
        users: [ADMIN, TENANT_B, OPERATOR, B_ADMIN, C_USER],
        env: { LECTERN_CONSOLE_SECRET: SECRET, LECTERN_AUTH_CREDENTIALS_REFRESH: '0', LECTERN_AUDIT_FILE: auditFile },
      });
      for (const [user, store] of [
        [ADMIN, 'default'],
        [TENANT_B, 'b'],
        [C_USER, 'c'],
      ] as const) {
        const res = await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: `http://example.com/verbs/in-${store}` } }), { user }));
        assert.equal(res.status, 200);
      }
    });
    after(() => t.close());

    test('a plain xAPI user sees no admin page: no Access or Stores link, 403 on them, no switching', async () => {
      const s = await signIn(t, TENANT_B);
      const page = await (await get(t, '/console/statements', s)).text();
      assert.doesNotMatch(page, /href="\/console\/(access|stores)"/);
      assert.deepEqual(verbs(page), ['in-b']);
      assert.equal((await get(t, '/console/access', s)).status, 403);
      assert.equal((await get(t, '/console/stores', s)).status, 403);
      const sw = await post(t, '/console/store', s, { store: 'c' });
      assert.equal(sw.status, 403);
      assert.equal(sw.headers.get('set-cookie'), null);
      assert.equal((await post(t, '/console/access/create', s, { agent: 'x@example.com', 'scope.all': 'on' })).status, 403);
    });

    test('an operator sees every store, switches between them, and the pages follow', async () => {
      let s = await signIn(t, OPERATOR);
      const first = await (await get(t, '/console/statements', s)).text();
      assert.deepEqual(verbs(first), ['in-default'], 'the default store at first');
      assert.match(first, /href="\/console\/stores"/);
      const stores = await (await get(t, '/console/stores', s)).text();
      for (const name of ['b', 'c']) assert.match(stores, new RegExp(`<option value="${name}">`));

      const sw = await post(t, '/console/store', s, { store: 'c', next: '/console/statements' });
      assert.equal(sw.status, 303);
      assert.equal(sw.headers.get('location'), '/console/statements');
      s = switched(s, sw);
      const inC = await (await get(t, '/console/statements', s)).text();
      assert.deepEqual(verbs(inC), ['in-c']);
      assert.match(inC, /store “c”/);
      assert.equal(((await (await get(t, '/console/session', s)).json()) as { store: string }).store, 'c');
      const learner = await (await get(t, '/console/learner?agent=ben%40example.com', s)).text();
      assert.deepEqual(verbs(learner), ['in-c']);
      assert.equal((await post(t, '/console/store', s, { store: 'x'.repeat(201) })).status, 400);
      // Back to the default store: an empty name.
      s = switched(s, await post(t, '/console/store', s, { store: '' }));
      assert.deepEqual(verbs(await (await get(t, '/console/statements', s)).text()), ['in-default']);
    });

    test('a store administrator sees its own store only, whatever it sends to the switcher', async () => {
      const s = await signIn(t, B_ADMIN);
      const page = await (await get(t, '/console/statements', s)).text();
      assert.deepEqual(verbs(page), ['in-b']);
      assert.match(page, /href="\/console\/access"/);
      assert.doesNotMatch(page, /href="\/console\/stores"/, 'no switcher');
      const stores = await (await get(t, '/console/stores', s)).text();
      assert.doesNotMatch(stores, /<option value="(c|)">/);
      for (const store of ['c', '', 'B', 'b ']) {
        const sw = await post(t, '/console/store', s, { store });
        if (store === 'b ') {
          // Its own store's name (trimmed): accepted, and nothing changes.
          assert.equal(sw.status, 303);
        } else {
          assert.equal(sw.status, 404, JSON.stringify(store));
          assert.match(await sw.text(), /no store/);
        }
        assert.equal(sw.headers.get('set-cookie'), null);
      }
      // Another store's statement is not found, by id or through the learner page.
      const [inC] = (
        (await (await t.fetch(`/xAPI/statements?verb=${encodeURIComponent('http://example.com/verbs/in-c')}`, { user: C_USER })).json()) as { statements: { id: string }[] }
      ).statements;
      assert.equal((await get(t, `/console/statements/${inC.id}`, s)).status, 404);
      assert.deepEqual(verbs(await (await get(t, '/console/learner?agent=ben%40example.com', s)).text()), ['in-b']);
      // Query parameters do not choose a store either.
      assert.deepEqual(verbs(await (await get(t, '/console/statements?store=c&target=c', s)).text()), ['in-b']);
      // Another store's credential is out of reach: listed nowhere, not revocable.
      const other = await createCredential(t.lrs.store, {
        scopes: ['statements/write'],
        agent: { objectType: 'Agent', mbox: 'mailto:lms-c@example.com' },
        target: 'c',
        label: 'in c',
      });
      const access = await (await get(t, '/console/access', s)).text();
      assert.doesNotMatch(access, new RegExp(other.key));
      for (const confirm of [{}, { confirm: 'yes' }] as Record<string, string>[])
        assert.equal((await post(t, '/console/access/revoke', s, { key: other.key, ...confirm })).status, 404);
      assert.equal(
        (await t.fetch('/xAPI/statements', { user: { ...C_USER, username: other.key, password: other.secret } })).status,
        403,
        'still a working credential (without read scope)',
      );
    });

    test('changes need the session’s CSRF token and no foreign Origin', async () => {
      const s = await signIn(t, OPERATOR);
      const fields = { agent: 'csrf@example.com', 'scope.statements/write': 'on', label: 'csrf-check' };
      assert.equal((await post(t, '/console/access/create', { ...s, csrf: 'wrong' }, fields)).status, 403);
      assert.equal((await post(t, '/console/access/create', s, fields, { origin: 'https://evil.example' })).status, 403);
      assert.equal((await post(t, '/console/store', { ...s, csrf: '' }, { store: 'c' })).status, 403);
      const noSession = await fetch(`${t.url}/console/access/create`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields),
      });
      assert.equal(noSession.status, 401);
      assert.doesNotMatch(await (await get(t, '/console/access', s)).text(), /csrf-check/);
    });

    test('Access: create a credential (its secret shown once), use it, rotate with a grace, revoke it; each change audited', async () => {
      const s = await signIn(t, B_ADMIN);
      const created = await post(t, '/console/access/create', s, {
        label: 'LMS in b',
        agent: 'lms-b@example.com',
        'scope.statements/write': 'on',
        'scope.statements/read': 'on',
        expires: '2999-01-01',
      });
      assert.equal(created.status, 200);
      assert.equal(created.headers.get('cache-control'), 'no-store');
      const page = await created.text();
      const [key, secret] = [keyOf(page)!, secretOf(page)!];
      assert.match(secret, /^[\w-]{43}$/);
      assert.match(page, /data-copy="issued-secret"/);
      const lms: TestUser = { username: key, password: secret, scopes: [], agent: {} };
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'http://example.com/verbs/in-b' } }), { user: lms }))).status, 200);

      const access = await (await get(t, '/console/access', s)).text();
      assert.match(access, new RegExp(`<code class="token">${key}</code>`));
      assert.match(access, /LMS in b/);
      assert.match(access, /2999-01-01<\/span> 00:00:00 UTC/);
      assert.doesNotMatch(access, new RegExp(secret), 'never the secret again');

      const rotated = await post(t, '/console/access/rotate', s, { key, grace: '600' });
      assert.equal(rotated.status, 200);
      const newSecret = secretOf(await rotated.text())!;
      assert.notEqual(newSecret, secret);
      for (const password of [secret, newSecret]) assert.equal((await t.fetch('/xAPI/statements', { user: { ...lms, password } })).status, 200);

      // Revoke asks first: the row's button answers the question, and nothing is revoked yet.
      const asked = await post(t, '/console/access/revoke', s, { key });
      assert.equal(asked.status, 200);
      assert.match(
        await asked.text(),
        new RegExp(`<h1>Revoke <code>${key}</code>\\?</h1>[\\s\\S]*LMS in b[\\s\\S]*name="confirm" value="yes"[\\s\\S]*Revoke for good[\\s\\S]*href="/console/access">Cancel`),
      );
      assert.equal((await t.fetch('/xAPI/statements', { user: { ...lms, password: newSecret } })).status, 200, 'not revoked by the question');
      const revoked = await post(t, '/console/access/revoke', s, { key, confirm: 'yes' });
      assert.equal(revoked.status, 303);
      assert.equal((await t.fetch('/xAPI/statements', { user: { ...lms, password: newSecret } })).status, 401);
      assert.match(await (await get(t, '/console/access', s)).text(), /revoked \d{4}-/);

      const audit = (await t.lrs.store.listAudit({ target: 'b', actor: 'b-admin', limit: 10 })).map((e) => [e.action, e.role, e.details.key]);
      assert.deepEqual(audit.slice(0, 3), [
        ['credentials.revoke', 'store', key],
        ['credentials.rotate', 'store', key],
        ['credentials.create', 'store', key],
      ]);
      const shown = await (await get(t, '/console/access', s)).text();
      assert.match(shown, /credentials\.rotate/);
      assert.match(shown, /b-admin <span class="hint">\(file user, store, http, /, 'who, and what kind of name');
    });

    test('Access: a refused change shows the page with the reason, and nothing changes', async () => {
      const s = await signIn(t, B_ADMIN);
      const admin = await post(t, '/console/access/create', s, { agent: 'x@example.com', 'scope.admin': 'on' });
      assert.equal(admin.status, 403);
      assert.match(await admin.text(), /may not give the admin scope/);
      const none = await post(t, '/console/access/create', s, { agent: 'x@example.com' });
      assert.equal(none.status, 400);
      assert.match(await none.text(), /give at least one scope/);
      const past = await post(t, '/console/access/create', s, { agent: 'x@example.com', 'scope.all': 'on', expires: '2001-01-01' });
      assert.equal(past.status, 400);
      assert.match(await past.text(), /in the past/);
      const grace = await post(t, '/console/access/rotate', s, { key: 'nope', grace: '1' });
      assert.equal(grace.status, 404);
      assert.equal((await t.lrs.store.listCredentials('b')).filter((c) => c.agent.mbox === 'mailto:x@example.com').length, 0);
    });

    test('an operator creates credentials in the store it works in', async () => {
      let s = await signIn(t, OPERATOR);
      s = switched(s, await post(t, '/console/store', s, { store: 'new-store' }));
      const created = await (await post(t, '/console/access/create', s, { agent: 'first@example.com', 'scope.all': 'on', 'scope.admin': 'on' })).text();
      const key = keyOf(created)!;
      assert.equal((await t.lrs.store.getCredential(key))?.target, 'new-store');
      const [entry] = await t.lrs.store.listAudit({ target: 'new-store', limit: 1 });
      assert.deepEqual([entry.action, entry.actor, entry.role], ['credentials.create', 'operator', 'operator']);
    });

    test('Rejections: grouped by reason, one shown with its body, replayed as lax (audited), the rest cleared; another store’s out of reach', async () => {
      const extra = () => statement({ verb: { id: 'http://example.com/verbs/in-b' }, lms_course_code: 'BIO-101' });
      for (const body of [extra(), statement({ verb: { id: 'not an iri' } })]) {
        assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', body, { user: TENANT_B }))).status, 400);
      }
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', extra(), { user: C_USER }))).status, 400);
      await t.lrs.rejections.flush();
      const s = await signIn(t, B_ADMIN);
      const list = await (await get(t, '/console/rejections', s)).text();
      const ids = [...list.matchAll(/<tr data-id="(\d+)">/g)].map((m) => m[1]);
      assert.equal(ids.length, 2, 'store b’s two only');
      assert.match(list, /value_error\.extra<\/a><\/td><td data-label="Rejections">1</);
      assert.match(list, /value_error\.iri<\/a><\/td><td data-label="Rejections">1</);
      const [extraId, iriId] = ids;
      const one = await (await get(t, `/console/rejections/${extraId}`, s)).text();
      assert.match(one, /lms_course_code/);
      assert.match(one, /BIO-101/);
      const cRejection = (await t.lrs.store.listRejections({ tenant: 'c', limit: 10 }))[0];
      assert.equal((await get(t, `/console/rejections/${cRejection.id}`, s)).status, 404);
      assert.equal((await post(t, '/console/rejections/replay', s, { [`id.${cRejection.id}`]: 'on' })).status, 404);
      assert.equal((await post(t, '/console/rejections/replay', s, {})).status, 400);

      // Strict (the credential's mode): refused again, kept with its reasons.
      const strict = await (await post(t, '/console/rejections/replay', s, { [`id.${extraId}`]: 'on' })).text();
      assert.match(strict, /1 replayed: 0 stored, 1 refused again/);
      const lax = await post(t, '/console/rejections/replay', s, { [`id.${extraId}`]: 'on', [`id.${iriId}`]: 'on', validation: 'lax' });
      assert.equal(lax.status, 200);
      assert.match(await lax.text(), /2 replayed as lax: 1 stored, 1 refused again/);
      const [entry] = await t.lrs.store.listAudit({ target: 'b', action: 'rejections.replay', limit: 1 });
      const { startId: _, ...details } = entry.details;
      assert.deepEqual(details, { phase: 'end', ids: [extraId, iriId], validation: 'lax', replayed: 2, stored: 1, refused: 1, notReplayable: 0, skipped: 0, claimed: 0 });
      const stored = (await (await t.fetch('/xAPI/statements?verb=http%3A%2F%2Fexample.com%2Fverbs%2Fin-b', { user: TENANT_B })).json()) as {
        statements: Record<string, unknown>[];
      };
      assert.ok(stored.statements.some((st) => st.lms_course_code === 'BIO-101'));

      assert.equal((await post(t, '/console/rejections/clear', { ...s, csrf: 'x' }, {})).status, 403);
      assert.equal((await post(t, '/console/rejections/clear', s, {})).status, 303);
      assert.deepEqual(await t.lrs.store.listRejections({ tenant: 'b', limit: 10 }), []);
      const [cleared] = await t.lrs.store.listAudit({ action: 'rejections.clear', limit: 1 });
      assert.deepEqual([cleared.actor, cleared.via, cleared.target, cleared.details], ['b-admin', 'http', 'b', { cleared: 1 }]);
      assert.equal((await t.lrs.store.listRejections({ tenant: 'c', limit: 10 })).length, 1, 'another store’s untouched');
      assert.equal((await get(t, '/console/rejections', await signIn(t, TENANT_B))).status, 403);
    });

    test('Learner erase: the dry run’s figures first, then the identifier typed; audited like the admin API’s', async () => {
      const DORA = { objectType: 'Agent', mbox: 'mailto:dora@example.com' };
      for (let i = 0; i < 2; i++) assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ actor: DORA }), { user: TENANT_B }))).status, 200);
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ actor: DORA }), { user: C_USER }))).status, 200);
      const s = await signIn(t, B_ADMIN);
      const learner = await (await get(t, '/console/learner?agent=dora%40example.com', s)).text();
      assert.match(learner, /action="\/console\/learner\/erase"/);
      const agent = JSON.stringify({ mbox: 'mailto:dora@example.com' });
      const dry = await post(t, '/console/learner/erase', s, { agent, mode: 'erase' });
      assert.equal(dry.status, 200);
      const dryPage = await dry.text();
      assert.match(dryPage, /<dd id="n-statements">2<\/dd>/);
      assert.match(dryPage, /Type <code>dora@example.com<\/code> to confirm/);
      const wrong = await post(t, '/console/learner/erase', s, { agent, mode: 'erase', run: 'yes', confirm: 'dora@example.org' });
      assert.equal(wrong.status, 400);
      assert.match(await wrong.text(), /Type dora@example.com exactly/);
      assert.deepEqual(await t.lrs.store.listAudit({ action: 'erase', limit: 5 }), [], 'nothing erased, nothing recorded');
      assert.equal((await post(t, '/console/learner/erase', { ...s, csrf: 'x' }, { agent, mode: 'erase', run: 'yes', confirm: 'dora@example.com' })).status, 403);

      const run = await post(t, '/console/learner/erase', s, { agent, mode: 'erase', run: 'yes', confirm: 'dora@example.com' });
      assert.equal(run.status, 200);
      assert.match(await run.text(), /<h1>Erased<\/h1>[\s\S]*<dd id="n-statements">2<\/dd>/);
      const dora = encodeURIComponent(agent);
      assert.deepEqual(((await (await t.fetch(`/xAPI/statements?agent=${dora}`, { user: TENANT_B })).json()) as { statements: unknown[] }).statements, []);
      assert.equal(
        ((await (await t.fetch(`/xAPI/statements?agent=${dora}`, { user: C_USER })).json()) as { statements: unknown[] }).statements.length,
        1,
        'another store’s untouched',
      );
      const [entry, start] = await t.lrs.store.listAudit({ action: 'erase', limit: 5 });
      assert.deepEqual([entry.actor, entry.role, entry.target, entry.details.phase, entry.details.statements], ['b-admin', 'store', 'b', 'end', 2]);
      assert.deepEqual([start.actor, start.details], ['b-admin', { phase: 'start', dryRun: false }]);
      const lines = readFileSync(auditFile, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.deepEqual(
        lines.map((l) => [l.phase, l.command, l.user, l.userKind, l.statements, l.dryRun]),
        [
          ['start', 'erase', 'b-admin', 'file-user', undefined, false],
          ['end', 'erase', 'b-admin', 'file-user', 2, false],
        ],
      );
      assert.doesNotMatch(readFileSync(auditFile, 'utf8'), /dora/, 'never the agent');
      // Pseudonymizing needs the key this server lacks; a plain user may not erase.
      const pseudo = await post(t, '/console/learner/erase', s, { agent, mode: 'pseudonymize' });
      assert.equal(pseudo.status, 400);
      const plain = await signIn(t, TENANT_B);
      assert.doesNotMatch(await (await get(t, '/console/learner?agent=ben%40example.com', plain)).text(), /learner\/erase/);
      assert.equal((await post(t, '/console/learner/erase', plain, { agent })).status, 403);
    });

    test('Forwarding is the operator’s: a store administrator is refused', async () => {
      const s = await signIn(t, B_ADMIN);
      assert.equal((await get(t, '/console/forwarding', s)).status, 403);
      assert.equal((await post(t, '/console/forwarding/retry', s, {})).status, 403);
      assert.doesNotMatch(await (await get(t, '/console/statements', s)).text(), /href="\/console\/forwarding"/);
    });
  });
}

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`console forwarding page (${backend.name})`, () => {
    let t: TestLrs;
    let receiver: Receiver;
    before(async () => {
      receiver = await new Receiver().listen();
      receiver.respond = () => ({ status: 403 });
      const forwardings = [{ is_active: true, url: receiver.url, basic_username: 'fw', basic_password: 'fw-target-password', max_retries: 0, timeout: 10 }];
      t = await startTestLrs(backend, {
        users: [ADMIN, OPERATOR],
        env: { LECTERN_CONSOLE_SECRET: SECRET, LECTERN_XAPI_FORWARDINGS: JSON.stringify(forwardings), LECTERN_XAPI_FORWARDING_BACKOFF: '20' },
      });
    });
    after(async () => {
      await t?.close();
      await receiver?.close();
    });

    test('per-target figures and dead letters with their errors; retry puts them back, audited', async () => {
      const [id] = (await (await t.fetch('/xAPI/statements', jsonInit('POST', statement()))).json()) as string[];
      const s = await signIn(t, OPERATOR);
      const page = await eventually('the dead letter shown', async () => {
        const text = await (await get(t, '/console/forwarding', s)).text();
        return text.includes(id) ? text : undefined;
      });
      assert.match(page, /<td data-label="Dead">1<\/td>/);
      assert.match(page, /403/);
      assert.doesNotMatch(page, /fw-target-password/);
      receiver.respond = () => ({ status: 200 });
      const retry = await post(t, '/console/forwarding/retry', s, { url: receiver.url });
      assert.equal(retry.status, 303);
      assert.equal(retry.headers.get('location'), '/console/forwarding?retried=1');
      const done = await eventually('delivered', async () => {
        const text = await (await get(t, '/console/forwarding', s)).text();
        return text.includes('No dead letter.') && text.includes('<td data-label="Queued">0</td>') ? text : undefined;
      });
      assert.match(done, /<td data-label="Lag"[^>]*>none<\/td>/, 'nothing queued: no lag');
      const [entry] = await t.lrs.store.listAudit({ action: 'forwarding.retry', limit: 1 });
      assert.deepEqual([entry.actor, entry.details], ['operator', { url: receiver.url, requeued: 1 }]);
      const unknown = await post(t, '/console/forwarding/retry', s, { url: 'http://127.0.0.1:9/nothing' });
      assert.equal(unknown.status, 404);
    });
  });
}

/** `admin/store` without a target: the default store's administrator, where the operator's database credentials live. */
const D_ADMIN: TestUser = { username: 'd-admin', password: 'd-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:d-admin@example.com' } };
const PLANTED = 'http://example.com/activities/planted';

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`console: who may rotate or revoke whom, and a revoked writer's kept rejections (hardening 46) (${backend.name})`, () => {
    let t: TestLrs;
    const secrets = new Map<string, string>();
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, OPERATOR, D_ADMIN], env: { LECTERN_CONSOLE_SECRET: SECRET, LECTERN_AUTH_CREDENTIALS_REFRESH: '0' } });
      const agent = { objectType: 'Agent' as const, mbox: 'mailto:lms@example.com' };
      for (const [key, scopes] of [
        ['ops-key', ['admin']],
        ['fellow', ['admin/store']],
        ['lms', ['statements/write']],
        ['planter', ['statements/write', 'define']],
      ] as const) {
        secrets.set(key, (await createCredential(t.lrs.store, { key, scopes: [...scopes], agent })).secret);
      }
    });
    after(() => t?.close());
    const as = (key: string): TestUser => ({ username: key, password: secrets.get(key)!, scopes: [], agent: {} });
    const row = (page: string, key: string) => new RegExp(`<tr data-key="${key}">[\\s\\S]*?</tr>`).exec(page)?.[0] ?? '';
    const activityName = async () => {
      const res = await t.fetch(`/xAPI/activities?activityId=${encodeURIComponent(PLANTED)}`);
      return ((await res.json()) as { definition?: { name?: Record<string, string> } }).definition?.name?.['en-US'];
    };

    test("Access: a store administrator is offered Rotate and Revoke only for its store's credentials without an admin scope; the others are a 404", async () => {
      const s = await signIn(t, D_ADMIN);
      const page = await (await get(t, '/console/access', s)).text();
      for (const key of ['ops-key', 'fellow']) {
        assert.match(row(page, key), new RegExp(`<code class="token">${key}</code>`), 'listed');
        assert.doesNotMatch(row(page, key), /access\/(rotate|revoke)/, `no form for ${key}`);
      }
      assert.match(row(page, 'lms'), /action="\/console\/access\/rotate"/);
      assert.match(row(page, 'lms'), /action="\/console\/access\/revoke"/);
      for (const key of ['ops-key', 'fellow']) {
        const rotate = await post(t, '/console/access/rotate', s, { key, grace: '0' });
        assert.equal(rotate.status, 404);
        assert.doesNotMatch(await rotate.text(), /issued-secret/);
        for (const confirm of [{}, { confirm: 'yes' }] as Record<string, string>[]) assert.equal((await post(t, '/console/access/revoke', s, { key, ...confirm })).status, 404);
      }
      assert.equal((await t.fetch('/admin/api/status', { user: as('ops-key'), version: null })).status, 200, "the operator's key untouched");
      const operator = await (await get(t, '/console/access', await signIn(t, OPERATOR))).text();
      assert.match(row(operator, 'ops-key'), /action="\/console\/access\/rotate"/, 'the operator may');
    });

    test("Rejections: a revoked writer's kept writes are skipped by Replay all (its name not planted); replayed only by the override, audited", async () => {
      const define = (name: string, extra: Record<string, unknown> = {}) =>
        statement({ object: { objectType: 'Activity', id: PLANTED, definition: { name: { 'en-US': name } } }, ...extra });
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', define('Original')))).status, 200);
      for (let i = 0; i < 3; i++) {
        // Refused under strict validation (a property xAPI does not define); lax would store it.
        assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', define('Planted', { lms_course_code: `c${i}` }), { user: as('planter') }))).status, 400);
      }
      await t.lrs.rejections.flush();
      const s = await signIn(t, D_ADMIN);
      assert.equal((await post(t, '/console/access/revoke', s, { key: 'planter', confirm: 'yes' })).status, 303);
      assert.equal((await t.fetch('/xAPI/statements', { user: as('planter') })).status, 401);

      const list = await (await get(t, '/console/rejections', s)).text();
      assert.match(list, /name="overrideWriter"/, 'the override is offered');
      const skipped = await post(t, '/console/rejections/replay', s, { all: 'on', validation: 'lax' });
      assert.equal(skipped.status, 200);
      const page = await skipped.text();
      assert.match(page, /0 replayed as lax: 0 stored, 0 refused again, 0 not replayable; 3 skipped/);
      assert.match(page, /the credential &quot;planter&quot;, is revoked/);
      assert.equal(await activityName(), 'Original');
      assert.equal((await t.lrs.store.listRejections({ limit: 10 })).length, 3, 'kept as they were');

      const overridden = await post(t, '/console/rejections/replay', s, { all: 'on', validation: 'lax', overrideWriter: 'on' });
      assert.match(await overridden.text(), /3 replayed as lax, whatever their writer: 3 stored/);
      // Newest first: each replay's end, then its start.
      const [entry, , before] = (await t.lrs.store.listAudit({ action: 'rejections.replay', limit: 4 })).map((e) => ({ ...e, details: { ...e.details, startId: undefined } }));
      assert.deepEqual(
        [entry.actor, entry.via, entry.details],
        [
          'd-admin',
          'http',
          {
            phase: 'end',
            startId: undefined,
            all: true,
            validation: 'lax',
            overrideWriter: true,
            overridden: 3,
            replayed: 3,
            stored: 3,
            refused: 0,
            notReplayable: 0,
            skipped: 0,
            claimed: 0,
          },
        ],
      );
      assert.deepEqual(before.details, {
        phase: 'end',
        startId: undefined,
        all: true,
        validation: 'lax',
        replayed: 0,
        stored: 0,
        refused: 0,
        notReplayable: 0,
        skipped: 3,
        claimed: 0,
      });
    });
  });
}
