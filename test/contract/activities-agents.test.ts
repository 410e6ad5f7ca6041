/**
 * The Activities (§2.5), Agents (§2.4) and About (§2.8) resources through HTTP, on every backend:
 * canonical definitions merged from statements, Person objects, parameter errors, HEAD,
 * alternate syntax and tenants.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { REPLICA_BACKENDS, jsonInit, startTestLrs, statement, TENANT_B, type TestLrs } from '../helpers/lrs.ts';

const sha1 = (s: string) => `"${createHash('sha1').update(s).digest('hex')}"`;
const newActivity = () => `http://example.com/activities/${randomUUID()}`;
const q = (p: Record<string, string>) => new URLSearchParams(p).toString();

for (const backend of REPLICA_BACKENDS) {
  describe(`activities, agents and about [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const post = async (body: unknown, user = {}) => {
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', body, user));
      assert.equal(res.status, 200, await res.clone().text());
    };
    const activity = (id: string, init = {}) => t.fetch(`/xAPI/activities?${q({ activityId: id })}`, init);
    const agents = (agent: unknown, init = {}) => t.fetch(`/xAPI/agents?${q({ agent: JSON.stringify(agent) })}`, init);

    describe('Activities', () => {
      test('an activity the LRS never saw is a bare Activity object', async () => {
        const id = newActivity();
        const res = await activity(id);
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-type')!, /^application\/json/);
        const body = await res.text();
        assert.deepEqual(JSON.parse(body), { objectType: 'Activity', id });
        assert.equal(res.headers.get('etag'), sha1(body));
      });

      test('the canonical definition merges definitions from several statements: later wins, language maps merge', async () => {
        const id = newActivity();
        await post(
          statement({
            object: {
              id,
              definition: {
                name: { 'en-US': 'Quiz', 'de-DE': 'Quiz (alt)' },
                description: { 'en-US': 'A quiz' },
                type: 'http://adlnet.gov/expapi/activities/assessment',
                extensions: { 'http://example.com/ext/a': 1 },
              },
            },
          }),
        );
        await post(
          statement({
            object: {
              id,
              definition: {
                name: { 'de-DE': 'Prüfung', 'fr-FR': 'Examen' },
                type: 'http://adlnet.gov/expapi/activities/cmi.interaction',
                moreInfo: 'http://example.com/more',
                extensions: { 'http://example.com/ext/b': 2 },
              },
            },
          }),
        );
        const res = await activity(id);
        assert.equal(res.status, 200);
        assert.deepEqual(await res.json(), {
          objectType: 'Activity',
          id,
          definition: {
            name: { 'en-US': 'Quiz', 'de-DE': 'Prüfung', 'fr-FR': 'Examen' },
            description: { 'en-US': 'A quiz' },
            type: 'http://adlnet.gov/expapi/activities/cmi.interaction',
            moreInfo: 'http://example.com/more',
            extensions: { 'http://example.com/ext/a': 1, 'http://example.com/ext/b': 2 },
          },
        });
      });

      test('definitions in one batch and in context activities count too, in statement order', async () => {
        const id = newActivity();
        await post([
          statement({ object: { id, definition: { name: { 'en-US': 'first' } } } }),
          statement({
            object: { id: newActivity() },
            context: { contextActivities: { parent: [{ id, definition: { name: { 'en-US': 'second' }, description: { 'en-GB': 'from a parent' } } }] } },
          }),
        ]);
        const def = (await (await activity(id)).json()).definition;
        assert.deepEqual(def, { name: { 'en-US': 'second' }, description: { 'en-GB': 'from a parent' } });
      });

      test('a statement without a definition leaves the kept one alone', async () => {
        const id = newActivity();
        await post(statement({ object: { id, definition: { name: { 'en-US': 'kept' } } } }));
        await post(statement({ object: { id } }));
        assert.deepEqual((await (await activity(id)).json()).definition, { name: { 'en-US': 'kept' } });
      });

      test('HEAD and the alternate syntax', async () => {
        const id = newActivity();
        await post(statement({ object: { id, definition: { name: { 'en-US': 'x' } } } }));
        const head = await activity(id, { method: 'HEAD' });
        assert.equal(head.status, 200);
        assert.ok(head.headers.get('etag'));
        assert.equal(await head.text(), '');
        const alt = await t.fetch('/xAPI/activities?method=GET', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: q({ activityId: id }),
        });
        assert.equal(alt.status, 200);
        assert.deepEqual((await alt.json()).definition, { name: { 'en-US': 'x' } });
      });

      test('parameter errors are 400, other methods 405', async () => {
        for (const qs of ['', 'activityId=not%20an%20iri', `activityId=${encodeURIComponent(newActivity())}&foo=1`, `activityid=${encodeURIComponent(newActivity())}`]) {
          const res = await t.fetch(`/xAPI/activities?${qs}`);
          assert.equal(res.status, 400, qs);
          assert.equal((await res.json()).detail[0].loc[0], 'query', qs);
        }
        for (const method of ['PUT', 'POST', 'DELETE']) {
          const res = await activity(newActivity(), { method });
          assert.equal(res.status, 405, method);
          assert.equal(res.headers.get('allow'), 'GET, HEAD');
          assert.ok((await res.json()).detail);
        }
        assert.equal((await activity(newActivity(), { version: null })).status, 400);
        assert.equal((await activity(newActivity(), { user: null })).status, 401);
      });

      test('canonical definitions belong to the tenant', async () => {
        const id = newActivity();
        await post(statement({ object: { id, definition: { name: { 'en-US': 'default tenant' } } } }));
        assert.deepEqual(await (await activity(id, { user: TENANT_B })).json(), { objectType: 'Activity', id });
        await post(statement({ object: { id, definition: { name: { 'en-US': 'tenant b' } } } }), { user: TENANT_B });
        assert.deepEqual((await (await activity(id, { user: TENANT_B })).json()).definition, { name: { 'en-US': 'tenant b' } });
        assert.deepEqual((await (await activity(id)).json()).definition, { name: { 'en-US': 'default tenant' } });
      });
    });

    describe('Agents', () => {
      test('an agent never seen: a Person with what the request gave', async () => {
        const mbox = `mailto:${randomUUID()}@example.com`;
        const res = await agents({ objectType: 'Agent', name: 'Nobody Yet', mbox });
        assert.equal(res.status, 200);
        const body = await res.text();
        assert.deepEqual(JSON.parse(body), { objectType: 'Person', name: ['Nobody Yet'], mbox: [mbox] });
        assert.equal(res.headers.get('etag'), sha1(body));
      });

      test('a known agent, with each kind of identifier', async () => {
        const actors = [
          { objectType: 'Agent', name: 'Ben', mbox: `mailto:${randomUUID()}@example.com` },
          { mbox_sha1sum: createHash('sha1').update(`mailto:${randomUUID()}@example.com`).digest('hex') },
          { openid: `http://openid.example.com/${randomUUID()}` },
          { name: 'Acc', account: { homePage: 'http://www.example.com', name: randomUUID() } },
        ];
        await post(actors.map((actor) => statement({ actor })));
        const expected = [
          { objectType: 'Person', name: ['Ben'], mbox: [actors[0].mbox] },
          { objectType: 'Person', mbox_sha1sum: [actors[1].mbox_sha1sum] },
          { objectType: 'Person', openid: [actors[2].openid] },
          { objectType: 'Person', name: ['Acc'], account: [actors[3].account] },
        ];
        for (const [i, actor] of actors.entries()) {
          const res = await agents(actor);
          assert.equal(res.status, 200, JSON.stringify(actor));
          assert.deepEqual(await res.json(), expected[i]);
        }
      });

      test('a Person carries every name the store has seen for the agent, newest first, in any role', async () => {
        const mbox = `mailto:${randomUUID()}@example.com`;
        await post([statement({ actor: { name: 'Ben', mbox } })]);
        await post([statement({ context: { instructor: { name: 'B. Smith', mbox } } })]);
        await post([
          statement({
            actor: {
              objectType: 'Group',
              name: 'Team',
              member: [
                { name: 'Benjamin', mbox },
                { mbox: 'mailto:other@example.com', name: 'Other' },
              ],
            },
          }),
        ]);
        await post([statement({ actor: { name: 'Ben', mbox } })]);
        assert.deepEqual(await (await agents({ mbox })).json(), { objectType: 'Person', name: ['Ben', 'Benjamin', 'B. Smith'], mbox: [mbox] });
        assert.deepEqual((await (await agents({ name: 'Asked', mbox })).json()).name, ['Asked', 'Ben', 'Benjamin', 'B. Smith'], "the request's own name first");
        // Another tenant's statements are not seen.
        assert.deepEqual(await (await agents({ mbox }, { user: TENANT_B })).json(), { objectType: 'Person', mbox: [mbox] });
      });

      test('HEAD and the alternate syntax', async () => {
        const agent = { mbox: 'mailto:head@example.com' };
        const head = await agents(agent, { method: 'HEAD' });
        assert.equal(head.status, 200);
        assert.ok(head.headers.get('etag'));
        assert.equal(await head.text(), '');
        const alt = await t.fetch('/xAPI/agents?method=GET', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: q({ agent: JSON.stringify(agent) }),
        });
        assert.equal(alt.status, 200);
        assert.deepEqual(await alt.json(), { objectType: 'Person', mbox: ['mailto:head@example.com'] });
      });

      test('the agent parameter is required and must be an Agent, not a Group', async () => {
        const bad = [
          '',
          'agent=not%20json',
          `agent=${encodeURIComponent('{"name":"no identifier"}')}`,
          `agent=${encodeURIComponent('{"objectType":"Group","mbox":"mailto:team@example.com"}')}`,
          `agent=${encodeURIComponent('{"mbox":"mailto:a@example.com","openid":"http://example.com/a"}')}`,
          `agent=${encodeURIComponent('{"mbox":["mailto:a@example.com"]}')}`,
          `agent=${encodeURIComponent('{"mbox":"mailto:a@example.com"}')}&extra=1`,
        ];
        for (const qs of bad) {
          const res = await t.fetch(`/xAPI/agents?${qs}`);
          assert.equal(res.status, 400, qs);
          assert.equal((await res.json()).detail[0].loc[0], 'query', qs);
        }
        assert.equal((await agents({ mbox: 'mailto:a@example.com' }, { method: 'POST' })).status, 405);
      });
    });

    describe('About', () => {
      test('GET needs no credentials nor version header: versions and extensions only', async () => {
        const res = await t.fetch('/xAPI/about', { user: null, version: null });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('x-experience-api-version'), '2.0.0', 'no header: the newest version served');
        const body = await res.json();
        assert.deepEqual(Object.keys(body).sort(), ['extensions', 'version']);
        assert.ok(Array.isArray(body.version));
        assert.ok(body.version.includes('1.0.3'));
        assert.ok(body.version.includes('1.0.0'));
        for (const v of body.version) assert.match(v, /^(?:1|2)\.0\.\d+$/);
        assert.equal(typeof body.extensions, 'object');
      });

      test('works with any version header and with wrong credentials; HEAD has no body', async () => {
        assert.equal((await t.fetch('/xAPI/about', { user: null, version: '0.9' })).status, 200);
        const wrong = await t.fetch('/xAPI/about', { user: { username: 'nobody', password: 'x', scopes: [], agent: {} } });
        assert.equal(wrong.status, 200);
        const head = await t.fetch('/xAPI/about', { method: 'HEAD', user: null });
        assert.equal(head.status, 200);
        assert.equal(await head.text(), '');
        assert.equal((await t.fetch('/xAPI/about', { method: 'PUT', user: null })).status, 405);
        const alt = await t.fetch('/xAPI/about?method=GET', { method: 'POST', user: null, headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
        assert.equal(alt.status, 200);
        assert.ok((await alt.json()).version.includes('1.0.3'));
      });
    });
  });
}
