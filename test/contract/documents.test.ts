/**
 * The document resources (State, Activity Profile, Agent Profile: xAPI-Communication §2.2-§2.7,
 * §3.1) through HTTP, on every backend: storage byte-exact, merging, listing, deleting,
 * concurrency preconditions, parameter errors, size limit, alternate syntax and tenants.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { DocumentKey } from '../../src/store/types.ts';
import { ifiKey } from '../../src/xapi/agents.ts';
import { BACKENDS, OTHER, startTestLrs, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const MAX_DOC = 65536;
const AGENT = { objectType: 'Agent', mbox: 'mailto:ben@example.com' };
const sha1 = (b: Buffer | string) => `"${createHash('sha1').update(b).digest('hex')}"`;
const newActivity = () => `http://example.com/activities/${randomUUID()}`;
const newAgent = () => ({ mbox: `mailto:${randomUUID()}@example.com` });

type Params = Record<string, string>;
const qs = (p: Params) => new URLSearchParams(p).toString();

/** One document resource: its path, id parameter, store kind and a fresh scope of parameters. */
interface Resource {
  name: string;
  path: string;
  idParam: 'stateId' | 'profileId';
  kind: DocumentKey['kind'];
  /** PUT without If-Match/If-None-Match on an existing document is a 409 (profiles, §3.1.s4.b13). */
  guardedPut: boolean;
  /** Parameters of a fresh scope (no document in it yet). */
  scope(): Params;
}

const RESOURCES: Resource[] = [
  {
    name: 'State',
    path: '/xAPI/activities/state',
    idParam: 'stateId',
    kind: 'state',
    guardedPut: false,
    scope: () => ({ activityId: newActivity(), agent: JSON.stringify(newAgent()) }),
  },
  {
    name: 'Activity Profile',
    path: '/xAPI/activities/profile',
    idParam: 'profileId',
    kind: 'activity_profile',
    guardedPut: true,
    scope: () => ({ activityId: newActivity() }),
  },
  {
    name: 'Agent Profile',
    path: '/xAPI/agents/profile',
    idParam: 'profileId',
    kind: 'agent_profile',
    guardedPut: true,
    scope: () => ({ agent: JSON.stringify(newAgent()) }),
  },
];

type Init = RequestInit & { user?: TestUser | null; version?: string | null };

for (const backend of BACKENDS) {
  describe(`document resources [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { env: { LECTERN_MAX_DOCUMENT_SIZE: String(MAX_DOC) } });
    });
    after(async () => t?.close());

    for (const r of RESOURCES) {
      /** Parameters of one fresh document. */
      const one = (id = randomUUID()): Params => ({ ...r.scope(), [r.idParam]: id });
      const url = (p: Params) => `${r.path}?${qs(p)}`;
      const send = (method: string, p: Params, body?: string | Buffer, headers: Record<string, string> = {}, extra: Init = {}) =>
        t.fetch(url(p), {
          ...extra,
          method,
          headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
          body: typeof body === 'string' || body === undefined ? body : new Uint8Array(body),
        });
      const get = (p: Params, extra: Init = {}) => t.fetch(url(p), extra);
      /** Creates a document whatever the resource's PUT rule: If-None-Match: * on a new document. */
      const create = async (p: Params, body: string | Buffer, contentType = 'application/json') => {
        const res = await send('PUT', p, body, { 'content-type': contentType, 'if-none-match': '*' });
        assert.equal(res.status, 204, await res.text());
        return res;
      };
      const etagNow = async (p: Params) => (await get(p)).headers.get('etag')!;
      /** The stored document, straight from the store (ADMIN's tenant ''). */
      const storedDoc = (p: Params) => {
        const key: DocumentKey = {
          kind: r.kind,
          activityId: p.activityId ?? '',
          agent: p.agent ? ifiKey(JSON.parse(p.agent))! : '',
          registration: p.registration ?? '',
          docId: p[r.idParam],
        };
        return t.lrs.store.getDocument('', key);
      };

      describe(r.name, () => {
        test('PUT stores a document: 204 with its ETag; GET serves it with Content-Type, ETag and Last-Modified', async () => {
          const p = one();
          const body = '{"x": "foo", "y": "bar"}';
          const put = await create(p, body);
          assert.equal(await put.text(), '');
          assert.equal(put.headers.get('etag'), sha1(body));
          assert.equal(put.headers.get('x-experience-api-version'), '1.0.3');
          const res = await get(p);
          assert.equal(res.status, 200);
          assert.equal(res.headers.get('content-type'), 'application/json');
          assert.equal(res.headers.get('etag'), sha1(body));
          assert.ok(!Number.isNaN(Date.parse(res.headers.get('last-modified')!)), 'Last-Modified is an HTTP date');
          assert.equal(await res.text(), body, 'served byte-exact, not re-serialised');
        });

        test('HEAD answers like GET without the body', async () => {
          const p = one();
          await create(p, '{"a": 1}');
          const res = await t.fetch(url(p), { method: 'HEAD' });
          assert.equal(res.status, 200);
          assert.equal(res.headers.get('etag'), sha1('{"a": 1}'));
          assert.equal(res.headers.get('content-type'), 'application/json');
          assert.ok(res.headers.get('last-modified'));
          assert.equal(await res.text(), '');
          const { [r.idParam]: _id, ...scope } = p;
          const list = await t.fetch(url(scope), { method: 'HEAD' });
          assert.equal(list.status, 200);
          assert.ok(list.headers.get('etag'));
          assert.equal(await list.text(), '');
          const missing = await t.fetch(url(one()), { method: 'HEAD' });
          assert.equal(missing.status, 404);
          assert.equal(await missing.text(), '');
        });

        test('GET of a document that does not exist is 404 with a JSON detail', async () => {
          const res = await get(one());
          assert.equal(res.status, 404);
          assert.ok((await res.json()).detail);
        });

        test('non-JSON documents round-trip byte-exact with their Content-Type, binary included', async () => {
          const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
          const cases: [Buffer, string][] = [
            [all, 'application/octet-stream'],
            [Buffer.concat([all, all.reverse()]), 'image/png'],
            [Buffer.from('caf\xe9 au lait', 'latin1'), 'text/plain; charset=ISO-8859-1'],
            [Buffer.from('{"looks": "like json"}'), 'text/plain'],
            [Buffer.alloc(0), 'application/x-empty'],
          ];
          for (const [bytes, type] of cases) {
            const p = one();
            await create(p, bytes, type);
            const res = await get(p);
            assert.equal(res.status, 200, type);
            assert.equal(res.headers.get('content-type'), type);
            assert.equal(res.headers.get('etag'), sha1(bytes), type);
            assert.deepEqual(Buffer.from(await res.arrayBuffer()), bytes, type);
          }
        });

        test('a document sent without Content-Type is stored as application/octet-stream', async () => {
          const p = one();
          const bytes = Buffer.from([0, 255, 1, 254]);
          const res = await t.fetch(url(p), { method: 'PUT', headers: { 'if-none-match': '*' }, body: new Uint8Array(bytes) });
          assert.equal(res.status, 204);
          const got = await get(p);
          assert.equal(got.headers.get('content-type'), 'application/octet-stream');
          assert.deepEqual(Buffer.from(await got.arrayBuffer()), bytes);
        });

        test('POST creates a document when absent and merges top-level properties into a JSON one', async () => {
          const p = one();
          const first = await send('POST', p, JSON.stringify({ x: 'foo', y: 'bar', deep: { a: 1, b: 2 } }));
          assert.equal(first.status, 204);
          assert.deepEqual(await (await get(p)).json(), { x: 'foo', y: 'bar', deep: { a: 1, b: 2 } });
          const second = await send('POST', p, JSON.stringify({ x: 'bash', z: 'faz', deep: { c: 3 } }));
          assert.equal(second.status, 204);
          const res = await get(p);
          assert.deepEqual(await res.json(), { x: 'bash', y: 'bar', z: 'faz', deep: { c: 3 } }, 'only top-level properties merge; objects are replaced whole');
          assert.equal(res.headers.get('etag'), second.headers.get('etag'));
          assert.equal(res.headers.get('content-type'), 'application/json');

          const q = one();
          await create(q, '{"a": 1}', 'application/json; charset=utf-8');
          assert.equal((await send('POST', q, '{"b": 2}')).status, 204);
          const merged = await get(q);
          assert.equal(merged.headers.get('content-type'), 'application/json; charset=utf-8', 'the merged document keeps its Content-Type');
          assert.deepEqual(await merged.json(), { a: 1, b: 2 });
        });

        test('POST where either document is not JSON is a 400 and changes nothing', async () => {
          const p = one();
          await create(p, '{"a": 1}');
          const before = await etagNow(p);
          const text = await send('POST', p, 'abc', { 'content-type': 'text/plain' });
          assert.equal(text.status, 400);
          assert.ok((await text.json()).detail);
          const array = await send('POST', p, '[1, 2]');
          assert.equal(array.status, 400, 'a JSON array does not merge into an object');
          assert.equal(await etagNow(p), before);

          const q = one();
          await create(q, 'plain text', 'text/plain');
          const json = await send('POST', q, '{"a": 1}');
          assert.equal(json.status, 400, 'JSON does not merge into a text document');
          const res = await get(q);
          assert.equal(await res.text(), 'plain text');
          assert.equal(res.headers.get('content-type'), 'text/plain');
        });

        test('a body labelled application/json that does not parse is a 400, and nothing is stored', async () => {
          const p = one();
          for (const method of ['PUT', 'POST']) {
            const res = await send(method, p, '{"a": ', { 'if-none-match': '*' });
            assert.equal(res.status, 400, method);
            assert.match((await res.json()).detail, /JSON/);
          }
          assert.equal((await get(p)).status, 404);
          await create(p, '{"a": 1}');
          assert.equal((await send('POST', p, '{"b": ')).status, 400);
          assert.deepEqual(await (await get(p)).json(), { a: 1 });
        });

        test('PUT replaces the whole document and its Content-Type', async () => {
          const p = one();
          await create(p, '{"a": 1, "b": 2}');
          const res = await send('PUT', p, 'now text', { 'content-type': 'text/plain', 'if-match': await etagNow(p) });
          assert.equal(res.status, 204);
          const got = await get(p);
          assert.equal(await got.text(), 'now text');
          assert.equal(got.headers.get('content-type'), 'text/plain');
        });

        test('GET without an id lists the ids of the scope, with since (exclusive) on the update time', async () => {
          const scope = r.scope();
          const a = { ...scope, [r.idParam]: 'a' };
          const b = { ...scope, [r.idParam]: 'b' };
          await create(a, '{"n": 1}');
          await create(b, '{"n": 2}');
          await create({ ...r.scope(), [r.idParam]: 'elsewhere' }, '{}');
          const list = await get(scope);
          assert.equal(list.status, 200);
          assert.match(list.headers.get('content-type')!, /^application\/json/);
          assert.ok(list.headers.get('etag'));
          assert.deepEqual(await list.json(), ['a', 'b']);

          // Rewrite b until the store records it strictly later than a, then split the two by since.
          const sa = (await storedDoc(a))!;
          let sb = (await storedDoc(b))!;
          for (let i = 0; sb.updatedMs <= sa.updatedMs && i < 10000; i++) {
            assert.equal((await send('POST', b, '{"n": 3}')).status, 204);
            sb = (await storedDoc(b))!;
          }
          assert.ok(sb.updatedMs > sa.updatedMs);
          const ids = async (since: string) => {
            const res = await get({ ...scope, since });
            assert.equal(res.status, 200, since);
            return res.json();
          };
          assert.deepEqual(await ids(new Date(sa.updatedMs - 1).toISOString()), ['a', 'b']);
          assert.deepEqual(await ids(new Date(sa.updatedMs).toISOString()), ['b'], 'since is exclusive');
          const offset = new Date(sa.updatedMs + 2 * 3600_000).toISOString().replace('Z', '+02:00');
          assert.deepEqual(await ids(offset), ['b'], 'a timestamp with an offset is the same instant');
          assert.deepEqual(await ids(new Date(sb.updatedMs).toISOString()), []);
          assert.deepEqual(await ids('2000-01-01T00:00:00Z'), ['a', 'b']);
          assert.deepEqual(await (await get(r.scope())).json(), [], 'an empty scope lists nothing');
        });

        test('DELETE removes one document; deleting an absent one is still 204', async () => {
          const scope = r.scope();
          const a = { ...scope, [r.idParam]: 'a' };
          const b = { ...scope, [r.idParam]: 'b' };
          await create(a, '{}');
          await create(b, '{}');
          const res = await t.fetch(url(a), { method: 'DELETE' });
          assert.equal(res.status, 204);
          assert.equal(await res.text(), '');
          assert.equal((await get(a)).status, 404);
          assert.deepEqual(await (await get(scope)).json(), ['b']);
          assert.equal((await t.fetch(url(a), { method: 'DELETE' })).status, 204);
        });

        describe('preconditions (§3.1)', () => {
          test('If-Match with the current ETag: PUT, POST and DELETE go through', async () => {
            const p = one();
            await create(p, '{"a": 1}');
            assert.equal((await send('PUT', p, '{"a": 2}', { 'if-match': await etagNow(p) })).status, 204);
            assert.equal((await send('POST', p, '{"b": 3}', { 'if-match': await etagNow(p) })).status, 204);
            assert.deepEqual(await (await get(p)).json(), { a: 2, b: 3 });
            assert.equal((await t.fetch(url(p), { method: 'DELETE', headers: { 'if-match': await etagNow(p) } })).status, 204);
            assert.equal((await get(p)).status, 404);
          });

          test('If-Match with another ETag: 412 for PUT, POST and DELETE, document unchanged', async () => {
            const p = one();
            await create(p, '{"a": 1}');
            const current = await etagNow(p);
            const stale = sha1('something else');
            for (const [method, body] of [
              ['PUT', '{"a": 2}'],
              ['POST', '{"b": 2}'],
              ['DELETE', undefined],
            ] as const) {
              const res = await send(method, p, body, { 'if-match': stale });
              assert.equal(res.status, 412, method);
              assert.ok((await res.json()).detail, method);
            }
            const res = await get(p);
            assert.equal(res.headers.get('etag'), current);
            assert.deepEqual(await res.json(), { a: 1 });
          });

          test('If-Match on a document that does not exist: 412, nothing created', async () => {
            const p = one();
            assert.equal((await send('PUT', p, '{"a": 1}', { 'if-match': sha1('x') })).status, 412);
            assert.equal((await send('POST', p, '{"a": 1}', { 'if-match': '*' })).status, 412);
            assert.equal((await send('DELETE', p, undefined, { 'if-match': '*' })).status, 412);
            assert.equal((await get(p)).status, 404);
          });

          test('If-Match: * matches any existing document; a list matches any of its ETags', async () => {
            const p = one();
            await create(p, '{"a": 1}');
            assert.equal((await send('PUT', p, '{"a": 2}', { 'if-match': '*' })).status, 204);
            const list = `${sha1('other')}, ${await etagNow(p)}`;
            assert.equal((await send('PUT', p, '{"a": 3}', { 'if-match': list })).status, 204);
            assert.deepEqual(await (await get(p)).json(), { a: 3 });
          });

          test('If-None-Match: * creates a new document and is 412 on an existing one, unchanged', async () => {
            const p = one();
            assert.equal((await send('PUT', p, '{"a": 1}', { 'if-none-match': '*' })).status, 204);
            const current = await etagNow(p);
            assert.equal((await send('PUT', p, '{"a": 2}', { 'if-none-match': '*' })).status, 412);
            assert.equal((await send('POST', p, '{"b": 2}', { 'if-none-match': '*' })).status, 412);
            assert.equal(await etagNow(p), current);
          });

          if (r.guardedPut) {
            test('PUT without either header on a new document is 400 and stores nothing (§3.1.s3.b1; ADL XAPI-00273, XAPI-00287)', async () => {
              const p = one();
              const res = await send('PUT', p, '{"a": 1}');
              assert.equal(res.status, 400);
              assert.match((await res.json()).detail, /If-None-Match/);
              assert.equal((await get(p)).status, 404);
            });
          } else {
            test('State: PUT without either header on a new document creates it (204)', async () => {
              const p = one();
              const res = await send('PUT', p, '{"a": 1}');
              assert.equal(res.status, 204);
              assert.deepEqual(await (await get(p)).json(), { a: 1 });
            });
          }

          if (r.guardedPut) {
            test('PUT without either header on an existing document is 409, explains what to do, and changes nothing', async () => {
              const p = one();
              await create(p, '{"a": 1}');
              const res = await send('PUT', p, '{"a": 2}');
              assert.equal(res.status, 409);
              const detail = (await res.json()).detail;
              assert.match(detail, /If-Match/);
              assert.match(detail, /GET/);
              assert.deepEqual(await (await get(p)).json(), { a: 1 });
            });
          } else {
            test('State: PUT without either header overwrites an existing document', async () => {
              const p = one();
              await create(p, '{"a": 1}');
              assert.equal((await send('PUT', p, '{"a": 2}')).status, 204);
              assert.deepEqual(await (await get(p)).json(), { a: 2 });
            });
          }

          test('POST and DELETE without headers need none', async () => {
            const p = one();
            await create(p, '{"a": 1}');
            assert.equal((await send('POST', p, '{"b": 1}')).status, 204);
            assert.equal((await send('DELETE', p)).status, 204);
          });

          test('concurrent writes with the same If-Match: exactly one wins, the others get 412', async () => {
            const p = one();
            await create(p, '{"n": 0}');
            const etag = await etagNow(p);
            const results = await Promise.all(Array.from({ length: 8 }, (_, i) => send('PUT', p, JSON.stringify({ n: i + 1 }), { 'if-match': etag })));
            const statuses = results.map((res) => res.status).sort();
            assert.deepEqual(statuses, [204, 412, 412, 412, 412, 412, 412, 412]);
            const winner = results.findIndex((res) => res.status === 204);
            assert.deepEqual(await (await get(p)).json(), { n: winner + 1 });
          });
        });

        test('parameter errors are 400 with the parameter in loc', async () => {
          const p = one();
          const bad: [string, Params, string][] = [];
          for (const required of Object.keys(p)) {
            const { [required]: _drop, ...rest } = p;
            bad.push(['PUT', rest, required]);
          }
          if (p.activityId) {
            for (const value of ['not an iri', '1', 'true', 'undefined', '{"key":"value"}']) bad.push(['PUT', { ...p, activityId: value }, 'activityId']);
            bad.push(['GET', { ...p, activityId: 'nope' }, 'activityId']);
          }
          if (p.agent) {
            for (const value of [
              'not JSON',
              '1',
              'true',
              '{"name":"no identifier"}',
              '{"mbox":"ben@example.com"}',
              '{"mbox":"mailto:a@example.com","openid":"http://example.com/a"}',
            ]) {
              bad.push(['POST', { ...p, agent: value }, 'agent']);
            }
            bad.push(['GET', { ...p, agent: '{}' }, 'agent']);
          } else {
            bad.push(['PUT', { ...p, agent: JSON.stringify(AGENT) }, 'agent']);
          }
          bad.push(['GET', { ...p, since: 'not a timestamp' }, 'since']);
          bad.push(['PUT', { ...p, since: '2020-01-01T00:00:00Z' }, 'since']);
          bad.push(['GET', { ...p, foo: 'bar' }, 'foo']);
          bad.push(['GET', { ...p, [r.idParam.toUpperCase()]: 'x' }, r.idParam.toUpperCase()]);
          bad.push(['PUT', { ...p, [r.idParam]: '' }, r.idParam]);
          if (r.kind === 'state') bad.push(['PUT', { ...p, registration: 'not-a-uuid' }, 'registration']);
          else bad.push(['PUT', { ...p, registration: randomUUID() }, 'registration']);
          for (const [method, params, loc] of bad) {
            const res = await send(method, params, method === 'PUT' || method === 'POST' ? '{}' : undefined, { 'if-none-match': '*' });
            assert.equal(res.status, 400, `${method} ${qs(params)}`);
            const detail = (await res.json()).detail;
            assert.ok(Array.isArray(detail), `${method} ${qs(params)}`);
            assert.ok(
              detail.some((d: { loc: string[] }) => d.loc[0] === 'query' && d.loc[1] === loc),
              `${method} ${qs(params)}: ${JSON.stringify(detail)}`,
            );
          }
          assert.equal((await get(p)).status, 404, 'nothing was stored');
        });

        test('the X-Experience-API-Version header and credentials are required', async () => {
          const p = one();
          assert.equal((await t.fetch(url(p), { version: null })).status, 400);
          const res = await t.fetch(url(p), { user: null });
          assert.equal(res.status, 401);
          assert.equal((await t.fetch(url(p), { method: 'PUT', body: '{}', user: null, headers: { 'content-type': 'application/json' } })).status, 401);
          assert.equal((await get(p)).status, 404, 'nothing was stored');
        });

        test(`a document larger than LECTERN_MAX_DOCUMENT_SIZE is 413; one of exactly that size is stored`, async () => {
          const p = one();
          for (const method of ['PUT', 'POST']) {
            const res = await send(method, p, Buffer.alloc(MAX_DOC + 1, 0x61), { 'content-type': 'text/plain', 'if-none-match': '*' });
            assert.equal(res.status, 413, method);
            assert.match((await res.json()).detail, /LECTERN_MAX_DOCUMENT_SIZE/);
          }
          assert.equal((await get(p)).status, 404);
          await create(p, Buffer.alloc(MAX_DOC, 0x61), 'text/plain');
          assert.equal((await get(p)).headers.get('etag'), sha1(Buffer.alloc(MAX_DOC, 0x61)));
        });

        test('a POST whose merge would leave a document over LECTERN_MAX_DOCUMENT_SIZE is 413 and changes nothing', async () => {
          const p = one();
          const part = (key: string) => JSON.stringify({ [key]: 'x'.repeat(MAX_DOC * 0.6) });
          const first = await send('POST', p, part('a'));
          assert.equal(first.status, 204, await first.text());
          const before = await get(p);
          const beforeBody = await before.text();
          // Each body is within the limit; together they are not.
          const res = await send('POST', p, part('b'));
          assert.equal(res.status, 413);
          assert.match((await res.json()).detail, /LECTERN_MAX_DOCUMENT_SIZE/);
          const after = await get(p);
          assert.equal(after.headers.get('etag'), before.headers.get('etag'), 'the stored document is unchanged');
          assert.equal(await after.text(), beforeBody);
          // A merge that replaces a property stays within the limit: stored.
          const replaced = await send('POST', p, part('a'));
          assert.equal(replaced.status, 204, await replaced.text());
        });

        test('alternate request syntax: PUT, GET, HEAD, POST, DELETE through ?method= with form fields', async () => {
          const p = one();
          const form = (method: string, fields: Params) =>
            t.fetch(`${r.path}?method=${method}`, {
              method: 'POST',
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              body: new URLSearchParams({ ...p, ...fields }).toString(),
            });
          const put = await form('PUT', { content: '{"a": "é"}', 'If-None-Match': '*' });
          assert.equal(put.status, 204, await put.text());
          const got = await form('GET', {});
          assert.equal(got.status, 200);
          assert.equal(got.headers.get('content-type'), 'application/json', 'content without Content-Type is JSON');
          assert.equal(got.headers.get('etag'), sha1(Buffer.from('{"a": "é"}', 'utf8')), 'content is read as UTF-8');
          assert.equal(await got.text(), '{"a": "é"}');
          const head = await form('HEAD', {});
          assert.equal(head.status, 200);
          assert.equal(head.headers.get('etag'), got.headers.get('etag'));
          assert.equal(await head.text(), '');
          assert.equal((await form('POST', { content: '{"b": 1}', 'If-Match': sha1('stale') })).status, 412, 'If-Match as a form field');
          assert.equal((await form('POST', { content: '{"b": 1}', 'If-Match': got.headers.get('etag')! })).status, 204);
          assert.deepEqual(await (await get(p)).json(), { a: 'é', b: 1 });
          const text = await form('PUT', { content: 'hello', 'Content-Type': 'text/plain', 'If-Match': '*' });
          assert.equal(text.status, 204);
          assert.equal((await get(p)).headers.get('content-type'), 'text/plain');
          assert.equal((await form('DELETE', {})).status, 204);
          assert.equal((await get(p)).status, 404);
          const { [r.idParam]: _id, ...scope } = p;
          const list = await t.fetch(`${r.path}?method=GET`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams(scope).toString(),
          });
          assert.equal(list.status, 200);
          assert.deepEqual(await list.json(), []);
        });

        test('documents belong to the tenant of the credentials', async () => {
          const p = one();
          await create(p, '{"owner": "default"}');
          assert.equal((await get(p, { user: TENANT_B })).status, 404);
          const { [r.idParam]: _id, ...scope } = p;
          assert.deepEqual(await (await get(scope, { user: TENANT_B })).json(), []);
          const fresh: Record<string, string> = r.guardedPut ? { 'if-none-match': '*' } : {};
          assert.equal((await send('PUT', p, '{"owner": "b"}', fresh, { user: TENANT_B })).status, 204, 'new in tenant b: no 412');
          assert.deepEqual(await (await get(p, { user: TENANT_B })).json(), { owner: 'b' });
          assert.deepEqual(await (await get(p)).json(), { owner: 'default' });
          assert.deepEqual(await (await get(p, { user: OTHER })).json(), { owner: 'default' }, 'same tenant, other user');
          if (r.kind === 'state') {
            assert.equal((await send('DELETE', scope, undefined, {}, { user: TENANT_B })).status, 204);
          } else {
            assert.equal((await send('DELETE', p, undefined, {}, { user: TENANT_B })).status, 204);
          }
          assert.equal((await get(p, { user: TENANT_B })).status, 404);
          assert.deepEqual(await (await get(p)).json(), { owner: 'default' });
        });
      });
    }

    describe('State specifics', () => {
      const path = '/xAPI/activities/state';
      const url = (p: Params) => `${path}?${qs(p)}`;
      const put = (p: Params, body: unknown) => t.fetch(url(p), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

      // Store contract: listDocumentIds/deleteDocuments with registration '' match every registration.
      test('registration scopes documents; without it, list and delete-all cover every registration', async () => {
        const scope = { activityId: newActivity(), agent: JSON.stringify(newAgent()) };
        const r1 = randomUUID();
        const r2 = randomUUID();
        assert.equal((await put({ ...scope, stateId: 's' }, { reg: 'none' })).status, 204);
        assert.equal((await put({ ...scope, registration: r1, stateId: 's' }, { reg: 'r1' })).status, 204);
        assert.equal((await put({ ...scope, registration: r1.toUpperCase(), stateId: 't' }, { reg: 'r1' })).status, 204);
        assert.equal((await put({ ...scope, registration: r2, stateId: 'u' }, { reg: 'r2' })).status, 204);

        assert.deepEqual(await (await t.fetch(url({ ...scope, stateId: 's' }))).json(), { reg: 'none' });
        assert.deepEqual(await (await t.fetch(url({ ...scope, registration: r1, stateId: 's' }))).json(), { reg: 'r1' });
        assert.equal((await t.fetch(url({ ...scope, registration: r2, stateId: 's' }))).status, 404);
        assert.deepEqual(await (await t.fetch(url({ ...scope, registration: r1 }))).json(), ['s', 't'], 'registration matched case-insensitively');
        assert.deepEqual(await (await t.fetch(url(scope))).json(), ['s', 't', 'u'], 'every registration, each id once');

        assert.equal((await t.fetch(url({ ...scope, registration: r1 }), { method: 'DELETE' })).status, 204);
        assert.deepEqual(await (await t.fetch(url(scope))).json(), ['s', 'u']);
        assert.deepEqual(await (await t.fetch(url({ ...scope, stateId: 's' }))).json(), { reg: 'none' });
        assert.equal((await t.fetch(url(scope), { method: 'DELETE' })).status, 204);
        assert.deepEqual(await (await t.fetch(url(scope))).json(), []);
        assert.equal((await t.fetch(url({ ...scope, registration: r2, stateId: 'u' }))).status, 404);
      });

      test('delete-all stays within its activity and agent', async () => {
        const activityId = newActivity();
        const agent = JSON.stringify(newAgent());
        const otherAgent = JSON.stringify(newAgent());
        await put({ activityId, agent, stateId: 'a' }, {});
        await put({ activityId, agent: otherAgent, stateId: 'a' }, {});
        await put({ activityId: newActivity(), agent, stateId: 'a' }, {});
        assert.equal((await t.fetch(url({ activityId, agent }), { method: 'DELETE' })).status, 204);
        assert.equal((await t.fetch(url({ activityId, agent, stateId: 'a' }))).status, 404);
        assert.equal((await t.fetch(url({ activityId, agent: otherAgent, stateId: 'a' }))).status, 200);
      });

      test('an agent is the same whichever way its identifier is written; an identified Group is accepted', async () => {
        const activityId = newActivity();
        const mbox = `mailto:${randomUUID()}@example.com`;
        await put({ activityId, agent: JSON.stringify({ mbox }), stateId: 'x' }, { v: 1 });
        const same = { activityId, agent: JSON.stringify({ objectType: 'Agent', name: 'Some Name', mbox }), stateId: 'x' };
        assert.deepEqual(await (await t.fetch(url(same))).json(), { v: 1 });
        const group = { activityId, agent: JSON.stringify({ objectType: 'Group', mbox }), stateId: 'x' };
        assert.equal((await t.fetch(url(group))).status, 200);
      });

      test('delete-all takes no preconditions (400) and GET with a stateId ignores since', async () => {
        const scope = { activityId: newActivity(), agent: JSON.stringify(newAgent()) };
        await put({ ...scope, stateId: 'a' }, {});
        const res = await t.fetch(url(scope), { method: 'DELETE', headers: { 'if-match': '*' } });
        assert.equal(res.status, 400);
        assert.equal((await t.fetch(url({ ...scope, stateId: 'a' }))).status, 200, 'nothing deleted');
        assert.equal((await t.fetch(url({ ...scope, stateId: 'a', since: '2999-01-01T00:00:00Z' }))).status, 200);
      });
    });

    describe('profile specifics', () => {
      test('DELETE without profileId is a 400 (profiles have no multi-document DELETE)', async () => {
        const cases: [string, Params][] = [
          ['/xAPI/activities/profile', { activityId: newActivity() }],
          ['/xAPI/agents/profile', { agent: JSON.stringify(newAgent()) }],
        ];
        for (const [path, p] of cases) {
          const res = await t.fetch(`${path}?${qs(p)}`, { method: 'DELETE' });
          assert.equal(res.status, 400);
          assert.deepEqual((await res.json()).detail[0].loc, ['query', 'profileId']);
        }
      });

      test('the Agent Profile agent must be an Agent, not a Group', async () => {
        const group = JSON.stringify({ objectType: 'Group', mbox: 'mailto:team@example.com' });
        const res = await t.fetch(`/xAPI/agents/profile?${qs({ agent: group, profileId: 'p' })}`);
        assert.equal(res.status, 400);
        assert.deepEqual((await res.json()).detail[0].loc, ['query', 'agent', 'objectType']);
      });
    });

    test('documents survive a restart', async () => {
      const p = { activityId: newActivity(), profileId: 'kept' };
      const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => 255 - i));
      const put = await t.fetch(`/xAPI/activities/profile?${qs(p)}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/octet-stream', 'if-none-match': '*' },
        body: new Uint8Array(bytes),
      });
      assert.equal(put.status, 204);
      await t.restart();
      const res = await t.fetch(`/xAPI/activities/profile?${qs(p)}`);
      assert.equal(res.status, 200);
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), bytes);
      assert.equal(res.headers.get('etag'), put.headers.get('etag'));
    });
  });
}
