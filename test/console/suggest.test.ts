/**
 * The console's suggestions over HTTP (the browser flow is in ./first-day-browser.test.ts): the
 * store's own verbs, activities and agents containing what is typed, with their names; bounded
 * (the text's length, the number answered), within the session's scopes and store (another
 * store's never suggested); a typed text that is no IRI answered "did you mean …" on the page
 * itself, each suggestion a filter the page accepts; the Overview's top verbs named. On SQLite
 * and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ADMIN, jsonInit, postgresBackend, sqliteBackend, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { type Signed, signIn } from './sign-in.ts';

const SECRET = 'a-console-secret-of-at-least-32-characters';
const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const MINE: TestUser = { username: 'mine', password: 'mine-pass', scopes: ['statements/write', 'statements/read/mine'], agent: { mbox: 'mailto:mine@example.com' } };
const WRITER: TestUser = { username: 'writer', password: 'writer-pass', scopes: ['statements/write'], agent: { mbox: 'mailto:writer@example.com' } };
const ADL = 'http://adlnet.gov/expapi/verbs/';

type Suggested = { suggestions: { value: string; name?: string }[] };
const get = (t: TestLrs, path: string, s: Signed, headers: Record<string, string> = {}) =>
  fetch(`${t.url}${path}`, { redirect: 'manual', headers: { cookie: s.cookie, ...headers } });
const suggest = async (t: TestLrs, s: Signed, kind: string, q: string) => {
  const res = await get(t, `/console/suggest?kind=${kind}&q=${encodeURIComponent(q)}`, s);
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as Suggested).suggestions;
};

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`console suggestions (${backend.name})`, () => {
    let t: TestLrs;
    let admin: Signed;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, TENANT_B, OPERATOR, MINE, WRITER], env: { LECTERN_CONSOLE_SECRET: SECRET } });
      const statements = [
        statement({ verb: { id: `${ADL}passed`, display: { 'en-US': 'passed', fr: 'réussi' } } }),
        statement({ actor: { name: 'Ada Lovelace', mbox: 'mailto:ada@example.com' }, verb: { id: `${ADL}completed`, display: { 'en-US': 'completed' } } }),
        statement({
          actor: { name: 'Grace', account: { homePage: 'https://lms.example.com', name: 'grace' } },
          verb: { id: `${ADL}experienced` },
          object: { id: 'http://example.com/course/quiz', definition: { name: { 'en-US': 'The quiz' } } },
        }),
        // Many verbs containing "bulk": more than one answer carries.
        ...Array.from({ length: 25 }, (_, i) => statement({ verb: { id: `http://example.com/verbs/bulk-${String(i).padStart(2, '0')}` } })),
      ];
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statements))).status, 200);
      const inB = statement({ actor: { name: 'Bea', mbox: 'mailto:bea@example.com' }, verb: { id: `${ADL}passed-in-b` }, object: { id: 'http://example.com/course-b' } });
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', inB, { user: TENANT_B }))).status, 200);
      admin = await signIn(t, ADMIN);
    });
    after(() => t.close());

    test('typing `passed` suggests the store’s own verb, named in the browser’s language', async () => {
      assert.deepEqual(await suggest(t, admin, 'verb', 'passed'), [{ value: `${ADL}passed`, name: 'passed' }]);
      const fr = await get(t, '/console/suggest?kind=verb&q=PASSED', admin, { 'accept-language': 'fr' });
      assert.deepEqual(((await fr.json()) as Suggested).suggestions, [{ value: `${ADL}passed`, name: 'réussi' }]);
      assert.deepEqual(await suggest(t, admin, 'activity', 'quiz'), [{ value: 'http://example.com/course/quiz', name: 'The quiz' }]);
    });

    test('agents as the Agent filter takes them (an address, or JSON), named; each chosen one is a filter the page accepts', async () => {
      const ada = await suggest(t, admin, 'agent', 'ada');
      assert.deepEqual(ada, [{ value: 'ada@example.com', name: 'Ada Lovelace' }]);
      const grace = await suggest(t, admin, 'agent', 'grace');
      assert.deepEqual(grace, [{ value: JSON.stringify({ account: { homePage: 'https://lms.example.com', name: 'grace' } }), name: 'Grace' }]);
      for (const [value, verb] of [
        [ada[0].value, 'completed'],
        [grace[0].value, 'experienced'],
      ]) {
        const page = await get(t, `/console/statements?agent=${encodeURIComponent(value)}`, admin);
        assert.equal(page.status, 200);
        assert.match(await page.text(), new RegExp(`verbs/${verb}"`));
      }
    });

    test('bounded: at most 20, a text of at most 200 characters, a known kind', async () => {
      const bulk = await suggest(t, admin, 'verb', 'bulk');
      assert.equal(bulk.length, 20);
      assert.equal(bulk[0].value, 'http://example.com/verbs/bulk-00');
      assert.equal((await get(t, `/console/suggest?kind=verb&q=${'x'.repeat(201)}`, admin)).status, 400);
      const bad = await get(t, '/console/suggest?kind=statement&q=x', admin);
      assert.equal(bad.status, 400);
      assert.match(((await bad.json()) as { detail: string }).detail, /kind: one of verb, activity, agent/);
    });

    test('within the session’s store and scopes: another store’s keys are never suggested', async () => {
      for (const kind of ['verb', 'activity', 'agent']) {
        const values = (await suggest(t, admin, kind, '')).map((x) => x.value).join(' ');
        assert.doesNotMatch(values, /-in-b|course-b|bea@/, kind);
      }
      const b = await signIn(t, TENANT_B);
      assert.deepEqual(
        (await suggest(t, b, 'verb', 'passed')).map((x) => x.value),
        [`${ADL}passed-in-b`],
      );
      assert.deepEqual(await suggest(t, b, 'agent', 'ada'), []);
      // A reader of its own statements only, and a writer, get none: they are drawn from every statement.
      for (const user of [MINE, WRITER]) assert.equal((await get(t, '/console/suggest?kind=verb&q=passed', await signIn(t, user))).status, 403, user.username);
      assert.equal((await fetch(`${t.url}/console/suggest?kind=verb&q=passed`)).status, 401);
    });

    test('a verb typed as `passed` is answered on the page: did you mean the store’s verb, a link that filters by it', async () => {
      const res = await get(t, '/console/statements?verb=passed', admin);
      assert.equal(res.status, 400);
      const page = await res.text();
      const link = /<div class="card" id="did-you-mean">[\s\S]*?<a href="([^"]+)">passed<\/a> <code class="iri">http:\/\/adlnet\.gov\/expapi\/verbs\/passed<\/code>/.exec(page);
      assert.ok(link, page);
      const followed = await get(t, link[1].replaceAll('&amp;', '&'), admin);
      assert.equal(followed.status, 200);
      assert.equal((await followed.text()).match(/<tr data-id=/g)?.length, 1);
      // An agent typed as a part of its address is answered the same way, with its name; a text nothing contains says so.
      assert.match(
        await (await get(t, '/console/statements?agent=ada', admin)).text(),
        /Did you mean[\s\S]*?agent=ada%40example\.com">Ada Lovelace<\/a> <code class="iri">ada@example\.com</,
      );
      assert.match(await (await get(t, '/console/statements?activity=nothing-here', admin)).text(), /No activities of this store contain “nothing-here”/);
    });

    test('the Overview’s top verbs show their display names beside their IRIs', async () => {
      const page = await (await get(t, '/console/overview', await signIn(t, OPERATOR))).text();
      const verbs = page.slice(page.indexOf('id="verbs-title"'));
      assert.match(
        verbs,
        /<a href="\/console\/statements\?verb=http%3A%2F%2Fadlnet\.gov%2Fexpapi%2Fverbs%2Fpassed">passed<\/a> <code class="iri">http:\/\/adlnet\.gov\/expapi\/verbs\/passed<\/code>/,
      );
      // A verb sent without a display is shown by its IRI alone.
      assert.match(verbs, /<a href="[^"]+bulk-00">http:\/\/example\.com\/verbs\/bulk-00<\/a><\/td>/);
    });
  });
}
