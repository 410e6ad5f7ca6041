/**
 * Kept rejections through the admin API (/admin/api/rejections), on every backend: list with
 * filters (no bodies), show (the body), replay (stored and removed once fixed; refused again and
 * kept), clear; each change audited; a store administrator confined to its store (404 for another
 * store's rejection, as for an unknown id; 403 for every store at once); bad input refused with
 * nothing done. A replay re-checks each rejection's writer (hardening 46, item 2): a revoked,
 * expired or changed credential, a changed file user or a token's subject is skipped with the
 * reason unless the audited override is asked for.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { ADMIN, BACKENDS, credentialEntries, jsonInit, sqliteBackend, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { LRS_AUDIENCE, startProvider, type TestProvider } from '../helpers/oidc.ts';

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

    test("list (filters, no bodies) and show (the body); a store administrator sees its store's only", async () => {
      assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', badVerb()))).status, 400);
      assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', badVerb(), { user: TENANT_B }))).status, 400);
      // A JSON POST cannot merge into a stored text document: a 400 until the text one is gone.
      assert.equal((await lrs.fetch(STATE, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'plain' })).status, 204);
      assert.equal((await lrs.fetch(STATE, jsonInit('POST', { progress: 3 }))).status, 400);

      const all = await list(OPERATOR);
      assert.deepEqual(
        all.map((r) => [r.target, r.status, r.path, r.username]),
        [
          ['', 400, '/xAPI/statements', 'admin'],
          ['b', 400, '/xAPI/statements', 'tenant-b'],
          ['', 400, '/xAPI/activities/state', 'admin'],
        ],
      );
      [invalid, inB, merge] = all;
      assert.ok(
        all.every((r) => !('body' in r)),
        'lists leave bodies out',
      );
      assert.deepEqual(
        (await list(OPERATOR, '?target=b')).map((r) => r.id),
        [inB.id],
      );
      assert.deepEqual(
        (await list(OPERATOR, '?reason=value_error')).map((r) => r.id),
        [invalid.id, inB.id],
      );
      assert.deepEqual(await list(OPERATOR, '?since=2999-01-01T00:00:00Z'), []);
      assert.deepEqual(
        (await list(OPERATOR, '?limit=1')).map((r) => r.id),
        [invalid.id],
      );

      const shown = await call(OPERATOR, 'GET', `/admin/api/rejections/${invalid.id}`);
      assert.equal(shown.status, 200);
      assert.deepEqual((shown.body.body as { verb: unknown }).verb, { id: 'not an iri' });
      assert.equal(shown.body.writer, undefined);

      assert.deepEqual(
        (await list(B_ADMIN)).map((r) => r.id),
        [inB.id],
      );
      assert.equal((await call(B_ADMIN, 'GET', '/admin/api/rejections?target=')).status, 404);
      assert.equal((await call(B_ADMIN, 'GET', `/admin/api/rejections/${inB.id}`)).status, 200);
      const foreign = await call(B_ADMIN, 'GET', `/admin/api/rejections/${invalid.id}`);
      const unknown = await call(B_ADMIN, 'GET', '/admin/api/rejections/999999');
      assert.equal(foreign.status, 404);
      assert.equal(unknown.status, 404);
      assert.equal(String(foreign.body.detail).replace(invalid.id, '999999'), unknown.body.detail);
      assert.equal((await call(OPERATOR, 'GET', '/admin/api/rejections/abc')).status, 400);
    });

    test("replay: the fixed one stored and removed, the other refused again and kept; audited; another store's id is a 404 with nothing replayed", async () => {
      assert.equal((await call(B_ADMIN, 'POST', '/admin/api/rejections/replay', { ids: [inB.id, merge.id] })).status, 404);
      assert.equal((await lrs.fetch(STATE, { method: 'DELETE' })).status, 204);
      assert.equal((await list(OPERATOR)).length, 3, 'nothing replayed by the refused request');

      const r = await call(OPERATOR, 'POST', '/admin/api/rejections/replay', { ids: [merge.id, invalid.id] });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(
        (r.body.results as Json[]).map((x) => [x.id, x.outcome]),
        [
          [merge.id, 'stored'],
          [invalid.id, 'refused'],
        ],
      );
      assert.deepEqual([r.body.replayed, r.body.stored, r.body.refused, r.body.notReplayable], [2, 1, 1, 0]);
      const doc = await lrs.fetch(STATE);
      assert.deepEqual(await doc.json(), { progress: 3 });
      assert.deepEqual(
        (await list(OPERATOR)).map((x) => x.id),
        [invalid.id, inB.id],
      );

      // The store administrator's `all` is its own store's.
      const own = await call(B_ADMIN, 'POST', '/admin/api/rejections/replay', { all: true });
      assert.deepEqual(
        (own.body.results as Json[]).map((x) => x.id),
        [inB.id],
      );

      // Each replay twice: when it started (what was asked), and when it ended (what came of it).
      const entries = await auditOf('rejections.replay');
      assert.deepEqual(
        entries.map((e) => [e.actor, e.target, e.details]),
        [
          ['b-admin', 'b', { phase: 'end', startId: entries[1].id, all: true, replayed: 1, stored: 0, refused: 1, notReplayable: 0, skipped: 0, claimed: 0 }],
          ['b-admin', 'b', { phase: 'start', all: true }],
          ['operator', null, { phase: 'end', startId: entries[3].id, ids: [merge.id, invalid.id], replayed: 2, stored: 1, refused: 1, notReplayable: 0, skipped: 0, claimed: 0 }],
          ['operator', null, { phase: 'start', ids: [merge.id, invalid.id] }],
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
      assert.deepEqual(
        (await list(OPERATOR)).map((r) => r.target),
        [''],
      );
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

const PLANTED = 'http://example.com/activities/planted';
/** A statement (re)defining the planted activity's name; `extra` a property xAPI does not define makes strict validation refuse it. */
const naming = (name: string, extra: Record<string, unknown> = {}) =>
  statement({ object: { objectType: 'Activity', id: PLANTED, definition: { name: { 'en-US': name } } }, ...extra });
const CHANGING: TestUser = { username: 'changing', password: 'changing-pass', scopes: ['all'], agent: { mbox: 'mailto:changing@example.com' } };
const STEADY: TestUser = { username: 'steady', password: 'steady-pass', scopes: ['all'], agent: { mbox: 'mailto:steady@example.com' } };

for (const backend of BACKENDS) {
  describe(`admin API: a replay re-checks each rejection's writer (hardening 46, item 2) (${backend.name})`, () => {
    let lrs: TestLrs;
    const clock = new ManualClock(Date.now());
    before(async () => {
      lrs = await startTestLrs(backend, { users: [ADMIN, OPERATOR, CHANGING, STEADY], env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0' }, clock });
    });
    after(() => lrs?.close());

    const call = async (user: TestUser, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> => {
      const res = await lrs.fetch(path, body === undefined ? { method, user, version: null } : jsonInit(method, body, { user, version: null }));
      return { status: res.status, body: (await res.json()) as Json };
    };
    const credential = async (key: string, extra: Json = {}): Promise<TestUser> => {
      const r = await call(OPERATOR, 'POST', '/admin/api/credentials', { key, scopes: ['statements/write', 'define'], agent: { mbox: `mailto:${key}@example.com` }, ...extra });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      return { username: key, password: String(r.body.secret), scopes: [], agent: {} };
    };
    const refused = async (user: TestUser, n: number, name = 'Planted') => {
      for (let i = 0; i < n; i++) assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', naming(name, { lms_course_code: `c${i}` }), { user }))).status, 400);
      await lrs.lrs.rejections.flush();
    };
    const activityName = async () => {
      const res = await lrs.fetch(`/xAPI/activities?activityId=${encodeURIComponent(PLANTED)}`);
      return ((await res.json()) as { definition?: { name?: Record<string, string> } }).definition?.name?.['en-US'];
    };
    const replay = async (body: Json) => {
      const r = await call(OPERATOR, 'POST', '/admin/api/rejections/replay', body);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body as { results: { id: string; outcome: string; writer?: string }[]; replayed: number; stored: number; skipped: number };
    };
    /** The last replay's end entry, its details without the id of its start entry (the entry before it). */
    const lastReplayAudit = async () => {
      const [end, start] = (await call(OPERATOR, 'GET', '/admin/api/audit?action=rejections.replay&limit=2')).body.entries as Json[];
      const { phase, startId, ...details } = end.details as Json;
      assert.deepEqual([phase, startId, (start.details as Json).phase], ['end', start.id, 'start']);
      return { ...end, details } as Json & { details: Json };
    };

    test('a revoked key\'s refused writes: "all" as lax skips them with the reason, stores nothing, plants nothing; the override replays them, audited', async () => {
      assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', naming('Original')))).status, 200);
      const planter = await credential('planter');
      await refused(planter, 20);
      assert.equal((await call(OPERATOR, 'POST', '/admin/api/credentials/planter/revoke')).status, 200);
      assert.equal((await lrs.fetch('/xAPI/statements', { user: planter })).status, 401);

      const skipped = await replay({ all: true, validation: 'lax' });
      assert.deepEqual([skipped.replayed, skipped.stored, skipped.skipped], [0, 0, 20]);
      assert.ok(
        skipped.results.every((r) => r.outcome === 'skipped' && /the credential "planter", is revoked/.test(r.writer ?? '')),
        JSON.stringify(skipped.results[0]),
      );
      assert.equal(await activityName(), 'Original', 'the canonical name is not the planted one');
      assert.equal(((await call(OPERATOR, 'GET', '/admin/api/rejections')).body.rejections as Json[]).length, 20, 'kept as they were');
      assert.deepEqual((await lastReplayAudit()).details, { all: true, validation: 'lax', replayed: 0, stored: 0, refused: 0, notReplayable: 0, skipped: 20, claimed: 0 });

      const forced = await replay({ all: true, validation: 'lax', overrideWriter: true });
      assert.deepEqual([forced.replayed, forced.stored, forced.skipped], [20, 20, 0]);
      assert.ok(
        forced.results.every((r) => /revoked/.test(r.writer ?? '')),
        'each result says what it was replayed despite',
      );
      assert.equal(await activityName(), 'Planted');
      const audit = await lastReplayAudit();
      assert.deepEqual(
        [audit.actor, audit.details],
        ['operator', { all: true, validation: 'lax', overrideWriter: true, overridden: 20, replayed: 20, stored: 20, refused: 0, notReplayable: 0, skipped: 0, claimed: 0 }],
      );
    });

    test("an expired credential, a file user whose grant changed, then removed: skipped; an unchanged file user's: replayed", async () => {
      const expiring = await credential('expiring', { expires: new Date(clock.now() + 3_600_000).toISOString() });
      await refused(expiring, 1);
      await refused(CHANGING, 1);
      await refused(STEADY, 1);
      clock.advance(2 * 3_600_000);
      // The credentials file rewritten: `changing` keeps its name with other scopes.
      writeFileSync(lrs.env.LECTERN_AUTH_FILE, JSON.stringify(await credentialEntries([ADMIN, OPERATOR, STEADY, { ...CHANGING, scopes: ['statements/read'] }])));
      const by = new Map((await lrs.lrs.store.listRejections({ limit: 10 })).map((x) => [x.id, x.username]));
      const r = await replay({ all: true, validation: 'lax' });
      const outcomes = Object.fromEntries(r.results.map((x) => [by.get(x.id), [x.outcome, x.writer]]));
      assert.deepEqual(outcomes.steady, ['stored', undefined]);
      assert.equal(outcomes.expiring[0], 'skipped');
      assert.match(String(outcomes.expiring[1]), /the credential "expiring", has expired/);
      assert.equal(outcomes.changing[0], 'skipped');
      assert.match(String(outcomes.changing[1]), /the credentials file's user "changing" no longer has the grant it wrote with/);
      writeFileSync(lrs.env.LECTERN_AUTH_FILE, JSON.stringify(await credentialEntries([ADMIN, OPERATOR])));
      const gone = await replay({ all: true });
      assert.ok(
        gone.results.some((x) => /"changing" is neither a user of the credentials file nor a database credential/.test(x.writer ?? '')),
        JSON.stringify(gone.results),
      );
      const bad = await call(OPERATOR, 'POST', '/admin/api/rejections/replay', { all: true, overrideWriter: 'yes' });
      assert.equal(bad.status, 400);
      assert.deepEqual((bad.body.detail as { loc: string[] }[])[0].loc, ['body', 'overrideWriter']);
    });
  });
}

describe("admin API: a token subject's kept writes cannot be re-checked: replayed by the override only", () => {
  let op: TestProvider;
  let lrs: TestLrs;
  before(async () => {
    op = await startProvider();
    lrs = await startTestLrs(sqliteBackend, {
      users: [ADMIN, OPERATOR],
      env: { LECTERN_RUNSERVER_AUTH_BACKENDS: 'basic,oidc', LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: op.issuer, LECTERN_RUNSERVER_AUTH_OIDC_AUDIENCE: LRS_AUDIENCE },
    });
  });
  after(async () => {
    await lrs?.close();
    await op?.close();
  });

  test('skipped with the reason, then stored under the override', async () => {
    const token = await op.sign({ sub: 'lms-service', scope: 'statements/write' });
    const sent = await lrs.fetch('/xAPI/statements', jsonInit('POST', statement({ lms_course_code: 'BIO-101' }), { user: null, headers: { authorization: `Bearer ${token}` } }));
    assert.equal(sent.status, 400);
    await lrs.lrs.rejections.flush();
    const replay = async (body: Json) =>
      (await (await lrs.fetch('/admin/api/rejections/replay', jsonInit('POST', body, { user: OPERATOR, version: null }))).json()) as {
        results: { outcome: string; writer?: string }[];
      };
    const [skipped] = (await replay({ all: true, validation: 'lax' })).results;
    assert.equal(skipped.outcome, 'skipped');
    assert.match(String(skipped.writer), /"lms-service" signed in with an OpenID Connect token, whose grant cannot be checked again here/);
    assert.equal((await replay({ all: true, validation: 'lax', overrideWriter: true })).results[0].outcome, 'stored');
  });
});
