/**
 * The front door (issue 27, item 2): a request is authenticated and authorised before its body is
 * read, so a refused one costs its headers and not its body; the bodies being read at once are
 * bounded (LECTERN_MAX_BODIES_IN_FLIGHT). Shown by counting the bytes the server's own socket read,
 * never by timing.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, basic, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { rawRequest, serverSockets, until } from '../helpers/raw.ts';

const MiB = 1024 * 1024;
const READER: TestUser = { username: 'reader', password: 'reader-pass', scopes: ['statements/read'], agent: { mbox: 'mailto:reader@example.com' } };
const JSON_HEADERS = { 'content-type': 'application/json', 'x-experience-api-version': '1.0.3' };
/** What a refused request may cost: its headers, plus what Node reads ahead before a body is asked for. */
const READ_AHEAD = 512 * 1024;

/** A statement padded to exactly `size` bytes of JSON. */
function statementOfSize(size: number): Buffer {
  const base = JSON.stringify(statement({ result: { response: '' } }));
  return Buffer.from(JSON.stringify(statement({ result: { response: 'x'.repeat(size - base.length) } })));
}

for (const backend of BACKENDS) {
  describe(`refused requests cost their headers, not their bodies [${backend.name}]`, () => {
    let t: TestLrs;
    let sockets: Map<number, Socket>;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, READER] });
      sockets = serverSockets(t);
    });
    after(async () => t?.close());

    // The request: 60 MB (under the default LECTERN_MAX_REQUEST_SIZE of 64 MiB).
    const size = 60_000_000;
    const cases: [string, { method?: string; path: string; headers: Record<string, string> }, number][] = [
      ['no credentials', { path: '/xAPI/statements', headers: JSON_HEADERS }, 401],
      ['a wrong password', { path: '/xAPI/statements', headers: { ...JSON_HEADERS, authorization: basic({ ...ADMIN, password: 'wrong' }) } }, 401],
      ['a user without statements/write', { path: '/xAPI/statements', headers: { ...JSON_HEADERS, authorization: basic(READER) } }, 403],
      ['a method the resource does not define', { method: 'DELETE', path: '/xAPI/statements', headers: JSON_HEADERS }, 405],
      ['a method the About resource does not define', { path: '/xAPI/about', headers: JSON_HEADERS }, 405],
      ['an alternate-syntax method not defined, credentials in the header', { path: '/xAPI/agents?method=PUT', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(ADMIN) } }, 405],
      ['an alternate-syntax request with wrong credentials in the header', { path: '/xAPI/statements?method=POST', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic({ ...ADMIN, password: 'wrong' }) } }, 401],
      ['a path that does not exist', { path: '/nowhere', headers: JSON_HEADERS }, 404],
      ['a CORS preflight', { method: 'OPTIONS', path: '/xAPI/statements', headers: { ...JSON_HEADERS, origin: 'https://example.com' } }, 204],
    ];
    for (const [name, req, status] of cases) {
      test(`${name}: ${status} answered after reading far less than the 60 MB body, and the connection closed`, async () => {
        const ex = rawRequest(t, sockets, { ...req, size });
        const res = await ex.answer;
        assert.equal(res.status, status, res.body);
        assert.ok(res.serverRead < READ_AHEAD, `the server read ${res.serverRead} bytes`);
        assert.ok(res.sent < size, 'the answer came before the body was sent');
        assert.equal(res.headers.connection, 'close');
        if (status === 401) {
          assert.match(String(res.headers['www-authenticate']), /^Basic/);
          assert.ok(res.headers['x-experience-api-consistent-through'], 'statements answers carry Consistent-Through');
        }
        if (status === 405) assert.ok(res.headers.allow);
        if (status !== 204) assert.ok(JSON.parse(res.body).detail ?? JSON.parse(res.body).error);
      });
    }

    test('an authorised request reads its body and keeps the connection', async () => {
      const body = statementOfSize(MiB);
      const ex = rawRequest(t, sockets, { path: '/xAPI/statements', headers: { ...JSON_HEADERS, authorization: basic(ADMIN) }, size: body.length, fill: body });
      const res = await ex.answer;
      assert.equal(res.status, 200, res.body);
      assert.ok(res.serverRead > MiB);
      assert.notEqual(res.headers.connection, 'close');
    });
  });
}
