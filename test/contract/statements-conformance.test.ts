/**
 * Statement resource behaviours the ADL LRS conformance suite (test/v1_0_3) checks and the other
 * statements-* files do not: exact response Content-Type, 405 for undefined methods, strict UTF-8,
 * LRS-assigned `stored`, unencoded `+` in since/until, and the voiding/targeting case of
 * XAPI-00162, through HTTP, on every backend.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, jsonInit, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';

const VOIDED = 'http://adlnet.gov/expapi/verbs/voided';

for (const backend of BACKENDS) {
  describe(`statements conformance [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const post = (body: unknown) => t.fetch('/xAPI/statements', jsonInit('POST', body));
    const postRaw = (body: Buffer, contentType = 'application/json') =>
      t.fetch('/xAPI/statements', { method: 'POST', headers: { 'content-type': contentType }, body: new Uint8Array(body) });

    test('JSON results are Content-Type application/json exactly (XAPI-00161, XAPI-00165)', async () => {
      const created = await post(statement());
      assert.equal(created.status, 200);
      assert.equal(created.headers.get('content-type'), 'application/json');
      const [id] = (await created.json()) as string[];
      for (const path of [`?statementId=${id}`, `?statementId=${id}&attachments=false`, '?limit=1', '?format=ids&limit=1', `?statementId=${id}&format=canonical`]) {
        const res = await t.fetch(`/xAPI/statements${path}`);
        assert.equal(res.status, 200, path);
        assert.equal(res.headers.get('content-type'), 'application/json', path);
        await res.arrayBuffer();
      }
      const head = await t.fetch(`/xAPI/statements?statementId=${id}`, { method: 'HEAD' });
      assert.equal(head.headers.get('content-type'), 'application/json');
      const alt = await t.fetch('/xAPI/statements?method=GET', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'limit=1',
      });
      assert.equal(alt.status, 200);
      assert.equal(alt.headers.get('content-type'), 'application/json');
      const body = await alt.json();
      assert.ok(Array.isArray(body.statements) && typeof body.more === 'string');
    });

    test('a method the spec does not define is 405 with Allow, directly or by the alternate syntax (Communication 3.2)', async () => {
      const id = randomUUID();
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement()))).status, 204);
      const res = await t.fetch(`/xAPI/statements?statementId=${id}`, { method: 'DELETE' });
      assert.equal(res.status, 405);
      assert.equal(res.headers.get('allow'), 'GET, HEAD, PUT, POST');
      assert.ok(res.headers.get('x-experience-api-consistent-through'));
      assert.match((await res.json()).detail, /DELETE/);
      const alt = await t.fetch('/xAPI/statements?method=DELETE', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `statementId=${id}`,
      });
      assert.equal(alt.status, 405);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 200, 'nothing deleted');
    });

    test('bodies must be UTF-8: invalid bytes are a 400 and store nothing; a BOM is ignored (Communication 1.4)', async () => {
      const id = randomUUID();
      const text = JSON.stringify(statement({ id, verb: { id: 'http://example.com/verbs/x', display: { 'en-US': 'café' } } }));
      const latin1 = await postRaw(Buffer.from(text, 'latin1'), 'application/json; charset=iso-8859-1');
      assert.equal(latin1.status, 400);
      assert.deepEqual((await latin1.json()).detail[0], { loc: ['body'], msg: 'the body is not valid UTF-8', type: 'value_error.encoding' });
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);

      const bom = await postRaw(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text, 'utf8')]));
      assert.equal(bom.status, 200, await bom.clone().text());
      const got = await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json();
      assert.equal(got.verb.display['en-US'], 'café');
    });

    test('strings in many scripts come back exactly as sent (Communication 1.4.s1.b1)', async () => {
      const display = { 'en-GB': 'attended', 'ja-JP': '出席した', 'ko-KR': '참석', 'ar-EG': 'حضر', 'hy-AM': 'ներկա է գտնվել', 'kn-IN': 'ಹಾಜರಿದ್ದರು' };
      const verb = `http://example.com/verbs/${randomUUID()}`;
      assert.equal((await post(statement({ verb: { id: verb, display } }))).status, 200);
      const res = await (await t.fetch(`/xAPI/statements?verb=${encodeURIComponent(verb)}`)).json();
      assert.deepEqual(res.statements[0].verb.display, display);
    });

    test('a stored sent by the client is replaced by the LRS’s, on POST and PUT (XAPI-00097)', async () => {
      const sent = '2011-07-15T00:00:00.000Z';
      const [postId] = (await (await post(statement({ stored: sent }))).json()) as string[];
      const putId = randomUUID();
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${putId}`, jsonInit('PUT', statement({ stored: sent })))).status, 204);
      for (const id of [postId, putId]) {
        const s = await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json();
        assert.notEqual(s.stored, sent);
        assert.ok(Date.parse(s.stored) > Date.parse('2020-01-01T00:00:00Z'));
      }
    });

    test('since/until with an offset whose "+" was not percent-encoded still parse', async () => {
      const verb = `http://example.com/verbs/${randomUUID()}`;
      assert.equal((await post(statement({ verb: { id: verb } }))).status, 200);
      const v = encodeURIComponent(verb);
      // A literal "+" in a query string decodes to a space.
      const since = await t.fetch(`/xAPI/statements?verb=${v}&since=2012-06-01T19:09:13.245+00:00`);
      assert.equal(since.status, 200, await since.clone().text());
      assert.equal((await since.json()).statements.length, 1);
      const until = await t.fetch(`/xAPI/statements?verb=${v}&until=2012-06-01T19:09:13+0200`);
      assert.equal(until.status, 200);
      assert.equal((await until.json()).statements.length, 0);
      assert.equal((await t.fetch(`/xAPI/statements?since=2012-06-01T19:09:13.245 junk`)).status, 400);
    });

    test('a verb query returns the statements targeting a voided match, and its voiding statement, newest first (XAPI-00162)', async () => {
      const verb = `http://example.com/verbs/${randomUUID()}`;
      const voidedId = randomUUID();
      const voidingId = randomUUID();
      const refId = randomUUID();
      assert.equal((await post(statement({ id: voidedId, verb: { id: verb } }))).status, 200);
      assert.equal((await post(statement({ id: voidingId, verb: { id: VOIDED }, object: { objectType: 'StatementRef', id: voidedId } }))).status, 200);
      assert.equal((await post(statement({ id: refId, verb: { id: verb }, object: { objectType: 'StatementRef', id: voidedId } }))).status, 200);
      const all = await (await t.fetch(`/xAPI/statements?verb=${encodeURIComponent(verb)}`)).json();
      assert.deepEqual(
        all.statements.map((s: { id: string }) => s.id),
        [refId, voidingId],
      );
      const one = await (await t.fetch(`/xAPI/statements?verb=${encodeURIComponent(verb)}&limit=1`)).json();
      assert.deepEqual(
        one.statements.map((s: { id: string }) => s.id),
        [refId],
      );
      assert.notEqual(one.more, '');
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${voidedId}`)).status, 404);
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${voidedId}`)).status, 200);
    });
  });
}
