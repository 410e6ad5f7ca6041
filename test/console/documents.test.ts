/**
 * The console's document pages over HTTP (the browser flow is in ./first-day-browser.test.ts): a
 * learner's State, Agent Profile and Activity Profile documents listed on the Learner page,
 * opened (JSON as a tree, text as text, other types offered as a download) and downloaded with
 * their content type, never run by the browser; within the session's scopes and store. On SQLite
 * and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ADMIN, jsonInit, postgresBackend, sqliteBackend, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { type Signed, signIn } from './sign-in.ts';

const SECRET = 'a-console-secret-of-at-least-32-characters';
/** Reads statements and profiles, not state. */
const NO_STATE: TestUser = { username: 'no-state', password: 'no-state-pass', scopes: ['statements/read', 'profile/read'], agent: { mbox: 'mailto:ns@example.com' } };
const COURSE = 'http://example.com/course/intro';
const ADA = JSON.stringify({ mbox: 'mailto:ada@example.com' });
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 3]);

const get = (t: TestLrs, path: string, s: Signed) => fetch(`${t.url}${path}`, { redirect: 'manual', headers: { cookie: s.cookie } });
const q = (params: Record<string, string>) => new URLSearchParams(params).toString();
const decodeEntities = (href: string) => href.replaceAll('&amp;', '&');

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`console documents (${backend.name})`, () => {
    let t: TestLrs;
    let admin: Signed;
    let statementId: string;
    const put = async (path: string, type: string, body: string | Buffer) => {
      const res = await t.fetch(path, { method: 'PUT', headers: { 'content-type': type, 'if-none-match': '*' }, body: typeof body === 'string' ? body : new Uint8Array(body) });
      assert.equal(res.status, 204, await res.text());
    };
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, TENANT_B, NO_STATE], env: { LECTERN_CONSOLE_SECRET: SECRET } });
      const ada = { name: 'Ada', mbox: 'mailto:ada@example.com' };
      const posted = await t.fetch('/xAPI/statements', jsonInit('POST', statement({ actor: ada, object: { id: COURSE, definition: { name: { 'en-US': 'Introduction' } } } })));
      assert.equal(posted.status, 200);
      [statementId] = (await posted.json()) as string[];
      await put(`/xAPI/activities/state?${q({ activityId: COURSE, agent: ADA, stateId: 'bookmark' })}`, 'application/json', '{"page":3,"visited":["intro","quiz"]}');
      await put(`/xAPI/agents/profile?${q({ agent: ADA, profileId: 'notes' })}`, 'text/plain; charset=utf-8', 'Likes <b>maths</b>.');
      await put(`/xAPI/activities/profile?${q({ activityId: COURSE, profileId: 'badge' })}`, 'image/png', PNG);
      await put(`/xAPI/agents/profile?${q({ agent: ADA, profileId: 'page' })}`, 'text/html', '<script>alert(1)</script>');
      admin = await signIn(t, ADMIN);
    });
    after(() => t.close());

    test('the Learner page lists the three kinds, each a link to its document, by the activity’s name', async () => {
      const page = await (await get(t, `/console/learner?agent=ada%40example.com`, admin)).text();
      const links = [...page.matchAll(/<a href="(\/console\/documents\/[^"]+)">([^<]+)<\/a>/g)].map((m) => [m[2], decodeEntities(m[1])]);
      assert.deepEqual(links, [
        ['notes', `/console/documents/agent-profile?${q({ agent: ADA, profileId: 'notes' })}`],
        ['page', `/console/documents/agent-profile?${q({ agent: ADA, profileId: 'page' })}`],
        ['bookmark', `/console/documents/state?${q({ activityId: COURSE, agent: ADA, stateId: 'bookmark' })}`],
        ['badge', `/console/documents/activity-profile?${q({ activityId: COURSE, profileId: 'badge' })}`],
      ]);
      // The activity by the name its statements carry, beside its IRI; so on the statement's page.
      assert.equal(page.match(/<dt>Introduction <code class="iri">http:\/\/example\.com\/course\/intro<\/code><\/dt>/g)?.length, 2, 'state and activity profiles');
      assert.match(await (await get(t, `/console/statements/${statementId}`, admin)).text(), /<p class="context">Ada · passed · Introduction · stored /);
    });

    test('opened: JSON as a tree with its paths, text as text (escaped), other types offered as a download', async () => {
      const state = await (await get(t, `/console/documents/state?${q({ activityId: COURSE, agent: ADA, stateId: 'bookmark' })}`, admin)).text();
      assert.match(state, /<h1>State <code>bookmark<\/code><\/h1>/);
      assert.match(
        state,
        /<li class="json-node" data-path="visited\[1\]"><span class="json-line"><span class="json-index">1<\/span>: <span class="json-string">&quot;quiz&quot;<\/span>/,
      );
      assert.match(state, /<dt>Content type<\/dt><dd><code>application\/json<\/code><\/dd>/);
      const notes = await (await get(t, `/console/documents/agent-profile?${q({ agent: ADA, profileId: 'notes' })}`, admin)).text();
      assert.match(notes, /<pre class="json"[^>]*><code>Likes &lt;b&gt;maths&lt;\/b&gt;\.<\/code><\/pre>/);
      const badge = await (await get(t, `/console/documents/activity-profile?${q({ activityId: COURSE, profileId: 'badge' })}`, admin)).text();
      assert.match(badge, /A image\/png document of 12 bytes: download it to open it/);
      assert.match(badge, /<a class="button" href="\/console\/documents\/activity-profile\/download\?activityId=[^"]+&amp;profileId=badge" download>Download<\/a>/);
    });

    test('downloaded with their content type, as attachments a browser never runs', async () => {
      const cases: [string, string, Buffer][] = [
        [`activity-profile/download?${q({ activityId: COURSE, profileId: 'badge' })}`, 'image/png', PNG],
        [`agent-profile/download?${q({ agent: ADA, profileId: 'page' })}`, 'text/html', Buffer.from('<script>alert(1)</script>')],
        [`state/download?${q({ activityId: COURSE, agent: ADA, stateId: 'bookmark' })}`, 'application/json', Buffer.from('{"page":3,"visited":["intro","quiz"]}')],
      ];
      for (const [path, type, body] of cases) {
        const res = await get(t, `/console/documents/${path}`, admin);
        assert.equal(res.status, 200, path);
        assert.equal(res.headers.get('content-type'), type);
        assert.deepEqual(Buffer.from(await res.arrayBuffer()), body);
        assert.match(res.headers.get('content-disposition')!, /^attachment; filename="(badge|page|bookmark)"/);
        assert.equal(res.headers.get('content-security-policy'), "default-src 'none'; sandbox");
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      }
    });

    test('within the session’s scopes and store; a bad request is its 4xx', async () => {
      const state = `/console/documents/state?${q({ activityId: COURSE, agent: ADA, stateId: 'bookmark' })}`;
      const noState = await signIn(t, NO_STATE);
      const refused = await get(t, state, noState);
      assert.equal(refused.status, 403);
      assert.match(await refused.text(), /state\/read/);
      assert.equal((await get(t, state.replace('/state?', '/state/download?'), noState)).status, 403);
      assert.equal((await get(t, `/console/documents/agent-profile?${q({ agent: ADA, profileId: 'notes' })}`, noState)).status, 200, 'profile/read suffices for a profile');
      // Another store's document is as absent as a missing one.
      const b = await signIn(t, TENANT_B);
      assert.equal((await get(t, state, b)).status, 404);
      assert.equal((await get(t, state.replace('/state?', '/state/download?'), b)).status, 404);
      assert.equal((await get(t, `/console/documents/state?${q({ activityId: COURSE, agent: ADA })}`, admin)).status, 400);
      assert.equal((await get(t, `/console/documents/state?${q({ activityId: 'not an iri', agent: ADA, stateId: 'x' })}`, admin)).status, 400);
      assert.equal((await get(t, `/console/documents/statement?${q({ profileId: 'x' })}`, admin)).status, 404);
      assert.equal((await fetch(`${t.url}${state}`, { redirect: 'manual' })).status, 303, 'no session: the sign-in page');
    });
  });
}
