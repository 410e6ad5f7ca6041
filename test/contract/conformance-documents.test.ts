/**
 * Cross-resource requirements the ADL conformance suite checks on the non-Statement resources
 * (xAPI-Communication §1.1 HEAD, §1.3 alternate syntax, §2.8 About, §3.2 error codes, §3.3
 * versioning, §4 authentication), through HTTP on every backend.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, startTestLrs, type TestLrs } from '../helpers/lrs.ts';

const AGENT = JSON.stringify({ objectType: 'Agent', account: { homePage: 'http://www.example.com/agentId/1', name: 'Rick James' } });
const ACTIVITY = 'http://www.example.com/activityId/hashset';
const qs = (p: Record<string, string>) => new URLSearchParams(p).toString();
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** One GET-able request per resource, with the parameters it needs. */
const RESOURCES: [string, () => string][] = [
  ['statements', () => '/xAPI/statements'],
  ['activities', () => `/xAPI/activities?${qs({ activityId: ACTIVITY })}`],
  ['agents', () => `/xAPI/agents?${qs({ agent: AGENT })}`],
  ['state', () => `/xAPI/activities/state?${qs({ activityId: ACTIVITY, agent: AGENT })}`],
  ['activity profile', () => `/xAPI/activities/profile?${qs({ activityId: ACTIVITY })}`],
  ['agent profile', () => `/xAPI/agents/profile?${qs({ agent: AGENT })}`],
];

for (const backend of BACKENDS) {
  describe(`conformance: resources other than Statements [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    test('a method a resource does not define is 405 with Allow, before authentication (§3.2)', async () => {
      const cases: [string, string, string][] = [
        ['DELETE', '/xAPI/statements', 'GET, HEAD, PUT, POST'],
        ['DELETE', `/xAPI/activities?${qs({ activityId: ACTIVITY })}`, 'GET, HEAD'],
        ['POST', `/xAPI/activities?${qs({ activityId: ACTIVITY })}`, 'GET, HEAD'],
        ['PUT', `/xAPI/activities?${qs({ activityId: ACTIVITY })}`, 'GET, HEAD'],
        ['DELETE', `/xAPI/agents?${qs({ agent: AGENT })}`, 'GET, HEAD'],
        ['POST', `/xAPI/agents?${qs({ agent: AGENT })}`, 'GET, HEAD'],
        ['PUT', `/xAPI/agents?${qs({ agent: AGENT })}`, 'GET, HEAD'],
        ['POST', '/xAPI/about', 'GET, HEAD'],
        ['DELETE', '/xAPI/about', 'GET, HEAD'],
      ];
      for (const [method, path, allow] of cases) {
        for (const user of [undefined, null]) {
          const res = await t.fetch(path, { method, ...(user === null && { user: null }) });
          assert.equal(res.status, 405, `${method} ${path}`);
          assert.equal(res.headers.get('allow'), allow);
          assert.equal(res.headers.get('x-experience-api-version'), '1.0.3');
          assert.ok((await res.json()).detail);
        }
      }
      // The alternate syntax's method is the one checked.
      const alt = await t.fetch('/xAPI/agents?method=DELETE', { method: 'POST', headers: FORM, body: qs({ agent: AGENT }) });
      assert.equal(alt.status, 405);
      assert.equal(alt.headers.get('allow'), 'GET, HEAD');
      // Documents define all five methods: a DELETE there is not a 405.
      assert.equal((await t.fetch(`/xAPI/activities/profile?${qs({ activityId: ACTIVITY, profileId: randomUUID() })}`, { method: 'DELETE' })).status, 204);
    });

    test('HEAD answers every resource like GET, without a body (§1.1)', async () => {
      for (const [name, path] of [...RESOURCES, ['about', () => '/xAPI/about'] as [string, () => string]]) {
        const get = await t.fetch(path());
        const head = await t.fetch(path(), { method: 'HEAD' });
        assert.equal(head.status, 200, name);
        assert.equal(head.headers.get('content-type'), get.headers.get('content-type'), name);
        assert.equal(await head.text(), '', name);
      }
    });

    test('About: version lists 2.0.0 and the 1.0.x versions, ETag on GET, parameters are 400', async () => {
      const res = await t.fetch('/xAPI/about', { user: null, version: null });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('etag') ?? '', /^"[0-9a-f]{40}"$/);
      const body = await res.json();
      assert.deepEqual(body.version, ['2.0.0', '1.0.3', '1.0.2', '1.0.1', '1.0.0']);
      const extra = await t.fetch('/xAPI/about?foo=bar', { user: null });
      assert.equal(extra.status, 400);
      assert.deepEqual((await extra.json()).detail[0].loc, ['query', 'foo']);
    });

    test('version header: 1.0, 1.0.x, 2.0 and 2.0.x accepted and answered in kind; missing, pre-1.0, 1.1+ and garbage are 400 on every resource (§3.3)', async () => {
      for (const [name, path] of RESOURCES) {
        for (const v of ['1.0', '1.0.0', '1.0.3', '1.0.9', '2.0', '2.0.0']) {
          const res = await t.fetch(path(), { version: v });
          assert.equal(res.status, 200, `${name} ${v}`);
          assert.equal(res.headers.get('x-experience-api-version'), v.startsWith('2') ? '2.0.0' : '1.0.3', `${name} ${v}`);
        }
        for (const v of [null, '', '0.9', '0.95', '1.1', '1.1.0', '3.0.0', '2.1', '1.0.', 'garbage']) {
          const res = await t.fetch(path(), { version: v });
          assert.equal(res.status, 400, `${name} ${v}`);
          assert.equal(res.headers.get('x-experience-api-version'), '2.0.0', 'a request naming no served version: the newest');
          assert.ok((await res.json()).detail, `${name} ${v}`);
        }
      }
    });

    test('missing, wrong or malformed credentials are 401 with WWW-Authenticate on every resource (§4)', async () => {
      const headers: Record<string, string>[] = [
        {},
        { authorization: `Basic ${Buffer.from('RobCIsNot:AUserOnThisLRS123').toString('base64')}` },
        { authorization: `Basic:${Buffer.from('admin:admin-pass').toString('base64')}` },
        { authorization: 'Bearer abc' },
      ];
      for (const [name, path] of RESOURCES) {
        for (const h of headers) {
          const res = await t.fetch(path(), { user: null, headers: h });
          assert.equal(res.status, 401, `${name} ${JSON.stringify(h)}`);
          assert.match(res.headers.get('www-authenticate') ?? '', /^Basic/);
        }
      }
    });

    test('a Content-Type that does not parse is a 400, not a 415', async () => {
      const p = { activityId: ACTIVITY, agent: AGENT, stateId: randomUUID() };
      const res = await t.fetch(`/xAPI/activities/state?${qs(p)}`, { method: 'PUT', headers: { 'content-type': ';;;' }, body: 'x' });
      assert.equal(res.status, 400);
      assert.ok((await res.json()).detail);
    });

    test('documents: a form-typed body without ?method= is a document; merging it into JSON is 400 (§2.2.s7-s8)', async () => {
      for (const path of ['/xAPI/activities/state', '/xAPI/activities/profile', '/xAPI/agents/profile']) {
        const p: Record<string, string> = path === '/xAPI/agents/profile' ? { agent: AGENT } : { activityId: ACTIVITY };
        if (path === '/xAPI/activities/state') p.agent = AGENT;
        p[path === '/xAPI/activities/state' ? 'stateId' : 'profileId'] = randomUUID();
        const url = `${path}?${qs(p)}`;
        // Bodies a client library sends as strings: accepted whatever they hold (XAPI-00233 family).
        assert.equal((await t.fetch(url, { method: 'POST', headers: FORM, body: 'true' })).status, 204, path);
        assert.equal(await (await t.fetch(url)).text(), 'true');
        const json = { ...p, [path === '/xAPI/activities/state' ? 'stateId' : 'profileId']: randomUUID() };
        const jsonUrl = `${path}?${qs(json)}`;
        assert.equal((await t.fetch(jsonUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"car":"Honda"}' })).status, 204);
        for (const [type, body] of [
          ['application/x-www-form-urlencoded', 'abc'],
          ['not/json', 'abcdefg'],
          ['application/json', '{"a":1}{'],
        ]) {
          assert.equal((await t.fetch(jsonUrl, { method: 'POST', headers: { 'content-type': type }, body })).status, 400, `${path} ${type}`);
        }
        assert.deepEqual(await (await t.fetch(jsonUrl)).json(), { car: 'Honda' }, 'unchanged');
      }
    });

    test('profile PUT with neither concurrency header: 400 when new, 409 when existing; If-None-Match: * creates (§3.1)', async () => {
      for (const path of ['/xAPI/activities/profile', '/xAPI/agents/profile']) {
        const p: Record<string, string> = path === '/xAPI/agents/profile' ? { agent: AGENT, profileId: randomUUID() } : { activityId: ACTIVITY, profileId: randomUUID() };
        const url = `${path}?${qs(p)}`;
        const put = (headers: Record<string, string> = {}) => t.fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json', ...headers }, body: '{"v":1}' });
        assert.equal((await put()).status, 400, path);
        assert.equal((await t.fetch(url)).status, 404, 'nothing stored');
        assert.equal((await put({ 'if-none-match': '*' })).status, 204);
        const conflict = await put();
        assert.equal(conflict.status, 409);
        assert.ok((await conflict.text()).length > 0);
        // The same through the alternate syntax, headers as form fields.
        const alt = await t.fetch(`${path}?method=PUT`, { method: 'POST', headers: FORM, body: qs({ ...p, content: '{"v":2}' }) });
        assert.equal(alt.status, 409);
      }
    });
  });
}
