/**
 * Kept rejections through the admin API (/admin/api/rejections), on every backend: list with
 * filters (no bodies), show (the body), replay (stored and removed once fixed; refused again and
 * kept), clear; each change audited; a store administrator confined to its store (404 for another
 * store's rejection, as for an unknown id; 403 for every store at once); bad input refused with
 * nothing done.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const B_ADMIN: TestUser = { username: 'b-admin', password: 'b-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:b-admin@example.com' }, target: 'b' };
const STATE = `/xAPI/activities/state?activityId=${encodeURIComponent('http://example.com/act')}&agent=${encodeURIComponent(JSON.stringify({ mbox: 'mailto:ann@example.com' }))}&stateId=s1`;
const badVerb = () => statement({ verb: { id: 'not an iri' } });

type Json = Record<string, unknown>;
type Shown = { id: string; target: string; status: number; path: string; username: string; body?: unknown; bodyCut: boolean; reasons: { type: string }[] };

for (const backend of BACKENDS) {
  describe(`admin API: kept rejections (${backend.name})`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend, { users: [ADMIN, TENANT_B, OPERATOR, B_ADMIN] });
    });
    after(() => lrs?.close());

    const call = async (user: TestUser, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> => {
      const res = await lrs.fetch(path, body === undefined ? { method, user, version: null } : jsonInit(method, body, { user, version: null }));
      return { status: res.status, body: (await res.json()) as Json };
    };
    const list = async (user: TestUser, query = '') => {
      await lrs.lrs.rejections.flush();
      const r = await call(user, 'GET', `/admin/api/rejections${query}`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body.rejections as Shown[];
    };
    const auditOf = async (action: string) => (await call(OPERATOR, 'GET', `/admin/api/audit?action=${action}`)).body.entries as Json[];

    let invalid: Shown;
    let merge: Shown;
    let inB: Shown;

    test('list (filters, no bodies) and show (the body); a store administrator sees its store\'s only', async () => {
      assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', badVerb()))).status, 400);
      assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', badVerb(), { user: TENANT_B }))).status, 400);
      // A JSON POST cannot merge into a stored text document: a 400 until the text one is gone.
      assert.equal((await lrs.fetch(STATE, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'plain' })).status, 204);
      assert.equal((await lrs.fetch(STATE, jsonInit('POST', { progress: 3 }))).status, 400);

      const all = await list(OPERATOR);
      assert.deepEqual(all.map((r) => [r.target, r.status, r.path, r.username]), [
        ['', 400, '/xAPI/statements', 'admin'],
        ['b', 400, '/xAPI/statements', 'tenant-b'],
        ['', 400, '/xAPI/activities/state', 'admin'],
      ]);
      [invalid, inB, merge] = all;
      assert.ok(all.every((r) => !('body' in r)), 'lists leave bodies out');
      assert.deepEqual((await list(OPERATOR, '?target=b')).map((r) => r.id), [inB.id]);
      assert.deepEqual((await list(OPERATOR, '?reason=value_error')).map((r) => r.id), [invalid.id, inB.id]);
      assert.deepEqual(await list(OPERATOR, '?since=2999-01-01T00:00:00Z'), []);
      assert.deepEqual((await list(OPERATOR, '?limit=1')).map((r) => r.id), [invalid.id]);

      const shown = await call(OPERATOR, 'GET', `/admin/api/rejections/${invalid.id}`);
      assert.equal(shown.status, 200);
      assert.deepEqual((shown.body.body as { verb: unknown }).verb, { id: 'not an iri' });
      assert.equal(shown.body.writer, undefined);

      assert.deepEqual((await list(B_ADMIN)).map((r) => r.id), [inB.id]);
      assert.equal((await call(B_ADMIN, 'GET', '/admin/api/rejections?target=')).status, 404);
      assert.equal((await call(B_ADMIN, 'GET', `/admin/api/rejections/${inB.id}`)).status, 200);
      const foreign = await call(B_ADMIN, 'GET', `/admin/api/rejections/${invalid.id}`);
      const unknown = await call(B_ADMIN, 'GET', '/admin/api/rejections/999999');
      assert.equal(foreign.status, 404);
      assert.equal(unknown.status, 404);
      assert.equal(String(foreign.body.detail).replace(invalid.id, '999999'), unknown.body.detail);
      assert.equal((await call(OPERATOR, 'GET', '/admin/api/rejections/abc')).status, 400);
    });

    test('replay: the fixed one stored and removed, the other refused again and kept; audited; another store\'s id is a 404 with nothing replayed', async () => {
      assert.equal((await call(B_ADMIN, 'POST', '/admin/api/rejections/replay', { ids: [inB.id, merge.id] })).status, 404);
      assert.equal((await lrs.fetch(STATE, { method: 'DELETE' })).status, 204);
      assert.equal((await list(OPERATOR)).length, 3, 'nothing replayed by the refused request');

      const r = await call(OPERATOR, 'POST', '/admin/api/rejections/replay', { ids: [merge.id, invalid.id] });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual((r.body.results as Json[]).map((x) => [x.id, x.outcome]), [
        [merge.id, 'stored'],
        [invalid.id, 'refused'],
      ]);
      assert.deepEqual([r.body.replayed, r.body.stored, r.body.refused, r.body.notReplayable], [2, 1, 1, 0]);
      const doc = await lrs.fetch(STATE);
      assert.deepEqual(await doc.json(), { progress: 3 });
      assert.deepEqual((await list(OPERATOR)).map((x) => x.id), [invalid.id, inB.id]);

      // The store administrator's `all` is its own store's.
      const own = await call(B_ADMIN, 'POST', '/admin/api/rejections/replay', { all: true });
      assert.deepEqual((own.body.results as Json[]).map((x) => x.id), [inB.id]);

      assert.deepEqual(
        (await auditOf('rejections.replay')).map((e) => [e.actor, e.target, e.details]),
        [
          ['b-admin', 'b', { all: true, replayed: 1, stored: 0, refused: 1, notReplayable: 0, skipped: 0 }],
          ['operator', null, { ids: [merge.id, invalid.id], replayed: 2, stored: 1, refused: 1, notReplayable: 0, skipped: 0 }],
        ],
      );
    });

    test('bad input: a 400 naming the field, and nothing done', async () => {
      const before = (await list(OPERATOR)).length;
      const field = async (user: TestUser, path: string, body: unknown, loc: string[]) => {
        const r = await call(user, 'POST', path, body);
        assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
        assert.deepEqual((r.body.detail as { loc: string[] }[])[0].loc, loc);
      };
      await field(OPERATOR, '/admin/api/rejections/replay', {}, ['body', 'ids']);
      await field(OPERATOR, '/admin/api/rejections/replay', { ids: [invalid.id], all: true }, ['body', 'ids']);
      await field(OPERATOR, '/admin/api/rejections/replay', { ids: invalid.id }, ['body', 'ids']);
      await field(OPERATOR, '/admin/api/rejections/replay', { ids: [invalid.id], validation: 'loose' }, ['body', 'validation']);
      await field(OPERATOR, '/admin/api/rejections/clear', {}, ['body', 'target']);
      await field(OPERATOR, '/admin/api/rejections/clear', { target: 'b', all: true }, ['body', 'all']);
      await field(OPERATOR, '/admin/api/rejections/clear', { all: 'yes' }, ['body', 'all']);
      assert.equal((await call(B_ADMIN, 'POST', '/admin/api/rejections/clear', { all: true })).status, 403);
      assert.equal((await call(B_ADMIN, 'POST', '/admin/api/rejections/clear', { target: '' })).status, 404);
      assert.equal((await list(OPERATOR)).length, before);
      assert.deepEqual(await auditOf('rejections.clear'), []);
    });

    test('clear: a store administrator its own store, the operator every store; audited', async () => {
      const own = await call(B_ADMIN, 'POST', '/admin/api/rejections/clear', {});
      assert.deepEqual(own.body, { cleared: 1 });
      assert.deepEqual((await list(OPERATOR)).map((r) => r.target), ['']);
      const all = await call(OPERATOR, 'POST', '/admin/api/rejections/clear', { all: true });
      assert.deepEqual(all.body, { cleared: 1 });
      assert.deepEqual(await list(OPERATOR), []);
      assert.deepEqual(
        (await auditOf('rejections.clear')).map((e) => [e.actor, e.target, e.details]),
        [
          ['operator', null, { all: true, cleared: 1 }],
          ['b-admin', 'b', { cleared: 1 }],
        ],
      );
    });
  });
}

for (const backend of BACKENDS) {
  describe(`admin API: a replay's default validation (${backend.name})`, () => {
    const STRICT: TestUser = { username: 'strict-lms', password: 'strict-pass', scopes: ['all'], agent: { mbox: 'mailto:strict@example.com' }, validation: 'strict' };
    let strict: TestLrs;
    let lax: TestLrs | undefined;
    before(async () => {
      strict = await startTestLrs(backend, { users: [ADMIN, OPERATOR, STRICT] });
    });
    after(async () => {
      await lax?.close();
      await strict?.close();
    });

    test('without a mode: the credential’s, else the server’s LECTERN_XAPI_VALIDATION', async () => {
      // A property xAPI does not define: refused under strict validation, kept out under lax.
      const extra = () => statement({ lms_course_code: 'BIO-101' });
      assert.equal((await strict.fetch('/xAPI/statements', jsonInit('POST', extra()))).status, 400);
      assert.equal((await strict.fetch('/xAPI/statements', jsonInit('POST', extra(), { user: STRICT }))).status, 400);
      await strict.lrs.rejections.flush();
      // Another server on the same database, lax by default, replays them.
      lax = await startTestLrs(backend, { shareWith: strict, env: { LECTERN_XAPI_VALIDATION: 'lax' } });
      const kept = (await (await lax.fetch('/admin/api/rejections', { user: OPERATOR, version: null })).json()) as { rejections: Shown[] };
      const who = new Map(kept.rejections.map((r) => [r.id, r.username]));
      const res = await lax.fetch('/admin/api/rejections/replay', jsonInit('POST', { all: true }, { user: OPERATOR, version: null }));
      assert.equal(res.status, 200);
      const body = (await res.json()) as { results: { id: string; outcome: string }[]; stored: number; refused: number };
      const outcomes = Object.fromEntries(body.results.map((r) => [who.get(r.id), r.outcome]));
      assert.deepEqual(outcomes, { admin: 'stored', 'strict-lms': 'refused' }, 'the server’s lax for a credential that chose none; strict for the one that chose it');
      assert.deepEqual([body.stored, body.refused], [1, 1]);
    });
  });
}
