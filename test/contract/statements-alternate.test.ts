/** Alternate Request Syntax (xAPI-Communication §1.3) on the statements resource, through HTTP, on every backend. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, basic, jsonInit, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';

const FORM = 'application/x-www-form-urlencoded';

for (const backend of BACKENDS) {
  describe(`alternate request syntax [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    /** A cross-domain style request: no headers but the form's Content-Type; headers travel as form fields. */
    const alt = (method: string, fields: Record<string, string>, opts: { query?: string; httpMethod?: string; contentType?: string } = {}) =>
      t.fetch(`/xAPI/statements?method=${method}${opts.query ?? ''}`, {
        method: opts.httpMethod ?? 'POST',
        user: null,
        version: null,
        headers: { 'content-type': opts.contentType ?? FORM },
        body: new URLSearchParams(fields).toString(),
      });
    const auth = { Authorization: basic(ADMIN), 'X-Experience-API-Version': '1.0.3' };

    test('method=PUT: content, headers and statementId as form fields; 204 and stored', async () => {
      const id = randomUUID();
      const res = await alt('PUT', { ...auth, statementId: id, 'Content-Type': 'application/json', content: JSON.stringify(statement({ result: { response: 'é ü' } })) });
      assert.equal(res.status, 204, await res.clone().text());
      const got = await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json();
      assert.equal(got.result.response, 'é ü', 'content is read as UTF-8');
    });

    test('method=POST: content without a Content-Type field is JSON; 200 with the ids', async () => {
      const ids = [randomUUID(), randomUUID()];
      const res = await alt('POST', { ...auth, content: JSON.stringify(ids.map((id) => statement({ id }))) });
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(await res.json(), ids);
    });

    test('method=GET: query parameters as form fields, a single statement or a query', async () => {
      const verb = `http://example.com/verbs/${randomUUID()}`;
      const posted: string[] = await (await t.fetch('/xAPI/statements', jsonInit('POST', [statement({ verb: { id: verb } }), statement({ verb: { id: verb } })]))).json();
      const one = await alt('GET', { ...auth, statementId: posted[0] });
      assert.equal(one.status, 200);
      assert.ok(one.headers.get('last-modified'));
      assert.ok(one.headers.get('x-experience-api-consistent-through'));
      assert.equal((await one.json()).id, posted[0]);

      const page = await alt('GET', { ...auth, verb, limit: '1', ascending: 'true', format: 'ids' });
      assert.equal(page.status, 200);
      const body = await page.json();
      assert.deepEqual(
        body.statements.map((s: { id: string }) => s.id),
        [posted[0]],
      );
      assert.deepEqual(body.statements[0].verb, { id: verb });
      assert.ok(body.more, 'the more link is a plain GET');
      const next = await (await t.fetch(body.more)).json();
      assert.deepEqual(
        next.statements.map((s: { id: string }) => s.id),
        [posted[1]],
      );
    });

    test('method=HEAD: the GET headers and no body', async () => {
      const [id] = await (await t.fetch('/xAPI/statements', jsonInit('POST', statement()))).json();
      const res = await alt('HEAD', { ...auth, statementId: id });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(await res.text(), '');
    });

    test('form-field credentials are checked like the header: wrong ones get 401', async () => {
      const res = await alt('GET', { Authorization: basic({ ...ADMIN, password: 'wrong' }), 'X-Experience-API-Version': '1.0.3' });
      assert.equal(res.status, 401);
      assert.ok(res.headers.get('x-experience-api-consistent-through'));
      const noVersion = await alt('GET', { Authorization: basic(ADMIN) });
      assert.equal(noVersion.status, 400);
      assert.match((await noVersion.json()).detail, /X-Experience-API-Version/);
    });

    test('credentials in an Authorization header are used (checked before the form is read); a form field contradicting them is a 400', async () => {
      const withHeader = (fields: Record<string, string>) =>
        t.fetch('/xAPI/statements?method=GET', { method: 'POST', user: ADMIN, version: null, headers: { 'content-type': FORM }, body: new URLSearchParams(fields).toString() });
      assert.equal((await withHeader({ 'X-Experience-API-Version': '1.0.3', limit: '1' })).status, 200);
      assert.equal((await withHeader({ Authorization: basic(ADMIN), 'X-Experience-API-Version': '1.0.3', limit: '1' })).status, 200, 'the same credentials twice');
      const other = await withHeader({ Authorization: basic({ ...ADMIN, password: 'wrong' }), 'X-Experience-API-Version': '1.0.3' });
      assert.equal(other.status, 400);
      assert.match((await other.json()).detail, /Authorization header/);
    });

    test('any other query-string parameter is a 400', async () => {
      const res = await alt('GET', auth, { query: '&limit=1' });
      assert.equal(res.status, 400);
      assert.match((await res.json()).detail, /limit/);
      const id = randomUUID();
      const put = await alt('PUT', { ...auth, content: JSON.stringify(statement()) }, { query: `&statementId=${id}` });
      assert.equal(put.status, 400);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);
    });

    test('the method parameter on anything but POST is a 400', async () => {
      const get = await t.fetch('/xAPI/statements?method=GET');
      assert.equal(get.status, 400);
      assert.match((await get.json()).detail, /only allowed on POST/);
      const id = randomUUID();
      const put = await alt('PUT', { ...auth, statementId: id, content: JSON.stringify(statement()) }, { httpMethod: 'PUT' });
      assert.equal(put.status, 400);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);
    });

    test('an unknown method, or a body that is not a form, is a 400', async () => {
      assert.equal((await alt('PATCH', auth)).status, 400);
      const res = await alt('GET', auth, { contentType: 'application/json' });
      assert.equal(res.status, 400);
      assert.match((await res.json()).detail, /x-www-form-urlencoded/);
    });

    test('an unknown form field is an unknown query parameter: 400', async () => {
      const res = await alt('GET', { ...auth, color: 'blue' });
      assert.equal(res.status, 400);
      assert.deepEqual((await res.json()).detail[0].loc, ['query', 'color']);
    });

    test('a form of more than 64 fields is a 400 naming the cap, whatever their number (parsing stops there); nothing stored', async () => {
      const id = randomUUID();
      const fields = (n: number) => Array.from({ length: n }, (_, i) => `f${i}=`).join('&');
      const content = encodeURIComponent(JSON.stringify(statement({ id })));
      for (const n of [65, 1_000_000]) {
        // Credentials in the header, so a form of megabytes is read (LECTERN_MAX_REQUEST_SIZE).
        const res = await t.fetch('/xAPI/statements?method=POST', {
          method: 'POST',
          headers: { 'content-type': FORM },
          body: `content=${content}&${fields(n)}`,
        });
        assert.equal(res.status, 400, String(n));
        assert.match((await res.json()).detail, /the form \(alternate request syntax\) has more than 64 form fields/);
      }
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);
      // 64 are read (and the unknown ones refused by name, as ever).
      const at = await t.fetch('/xAPI/statements?method=POST', { method: 'POST', headers: { 'content-type': FORM }, body: `content=${content}&${fields(63)}` });
      assert.equal(at.status, 400);
      assert.deepEqual((await at.json()).detail[0].loc, ['query', 'f0']);
    });

    test('a query string of more than 64 parameters is a 400 naming the cap', async () => {
      const query = Array.from({ length: 65 }, (_, i) => `p${i}=1`).join('&');
      const res = await t.fetch(`/xAPI/statements?${query}`);
      assert.equal(res.status, 400);
      assert.match((await res.json()).detail, /the query string has more than 64 query parameters/);
    });

    test('a POST without the method parameter never lists statements: query parameters are a 400', async () => {
      const res = await t.fetch('/xAPI/statements?limit=1', jsonInit('POST', statement()));
      assert.equal(res.status, 400);
    });
  });
}
