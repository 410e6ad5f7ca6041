/**
 * Credentials through the admin API (/admin/api/credentials), on every backend: create (the secret
 * in that answer only), use, list, rotate with a grace, revoke, each audited without a secret; a
 * store administrator confined to its store (404 for another's key, 403 for the admin scope); bad
 * input refused with nothing written. The server reads the change counter on every request
 * (LECTERN_AUTH_CREDENTIALS_REFRESH=0) and its clock is moved by hand.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { createLogger } from '../../src/log.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const B_ADMIN: TestUser = { username: 'b-admin', password: 'b-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:b-admin@example.com' }, target: 'b' };
const AGENT = { mbox: 'mailto:reports@example.com' };

type Json = Record<string, unknown>;

for (const backend of BACKENDS) {
  describe(`admin API: credentials (${backend.name})`, () => {
    let lrs: TestLrs;
    const clock = new ManualClock(Date.now());
    const log: string[] = [];
    /** Every secret handed out: none may appear anywhere but its own answer. */
    const secrets: string[] = [];

    before(async () => {
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          log.push(chunk.toString());
          done();
        },
      });
      lrs = await startTestLrs(backend, {
        users: [ADMIN, TENANT_B, OPERATOR, B_ADMIN],
        env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0' },
        logger: createLogger('debug', sink),
        clock,
      });
    });
    after(() => lrs?.close());

    const call = async (user: TestUser | null, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> => {
      const res = await lrs.fetch(path, body === undefined ? { method, user, version: null } : jsonInit(method, body, { user, version: null }));
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
    };
    const as = (key: string, secret: string): TestUser => ({ username: key, password: secret, scopes: [], agent: AGENT });
    const xapiStatus = async (user: TestUser) => (await lrs.fetch('/xAPI/statements?limit=1', { user })).status;
    const auditOf = async (action: string) => (await call(OPERATOR, 'GET', `/admin/api/audit?action=${action}`)).body.entries as Json[];

    test('create: the secret once, then used as a Basic user; listed without it; audited without it', async () => {
      const created = await call(OPERATOR, 'POST', '/admin/api/credentials', { scopes: ['all'], agent: AGENT, target: 'b', label: 'reports' });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const { key, secret } = created.body as { key: string; secret: string };
      secrets.push(secret);
      assert.match(key, /^lk_/);
      assert.equal(created.body.target, 'b');
      const user = as(key, secret);
      const stored = await lrs.fetch('/xAPI/statements', jsonInit('POST', statement(), { user }));
      assert.equal(stored.status, 200);
      // It works in its store: TENANT_B sees the statement.
      const inB = (await (await lrs.fetch('/xAPI/statements?limit=0', { user: TENANT_B })).json()) as { statements: unknown[] };
      assert.equal(inB.statements.length, 1);

      const listed = await call(OPERATOR, 'GET', '/admin/api/credentials');
      assert.equal(listed.status, 200);
      const mine = (listed.body.credentials as Json[]).find((c) => c.key === key)!;
      assert.equal(mine.label, 'reports');
      assert.equal(mine.secret, undefined);
      assert.ok(!JSON.stringify(listed.body).includes(secret));
      const [entry] = await auditOf('credentials.create');
      assert.deepEqual(
        { ...entry, id: undefined, time: undefined, client: undefined },
        {
          id: undefined,
          time: undefined,
          client: undefined,
          actor: 'operator',
          actorKind: 'file-user',
          role: 'operator',
          via: 'http',
          action: 'credentials.create',
          target: 'b',
          details: { key, scopes: ['all'], label: 'reports' },
        },
      );
    });

    test("a store administrator: its own store only (404 for another store or another store's key, as for an unknown one), never the admin scope", async () => {
      const own = await call(B_ADMIN, 'POST', '/admin/api/credentials', { scopes: ['admin/store', 'statements/read'], agent: AGENT, key: 'b-reader' });
      assert.equal(own.status, 201, JSON.stringify(own.body));
      assert.equal(own.body.target, 'b');
      secrets.push(String(own.body.secret));
      // A database credential reaches the admin API too, with the role its scopes give.
      const dbAdmin = as('b-reader', String(own.body.secret));
      const stores = await call(dbAdmin, 'GET', '/admin/api/stores');
      assert.deepEqual(
        (stores.body.stores as Json[]).map((s) => s.target),
        ['b'],
      );

      assert.equal((await call(B_ADMIN, 'POST', '/admin/api/credentials', { scopes: ['all'], agent: AGENT, target: '' })).status, 404);
      const escalate = await call(B_ADMIN, 'POST', '/admin/api/credentials', { scopes: ['admin'], agent: AGENT });
      assert.equal(escalate.status, 403);
      assert.match(String(escalate.body.detail), /admin scope/);

      const other = await call(OPERATOR, 'POST', '/admin/api/credentials', { scopes: ['all'], agent: AGENT, key: 'default-store-app' });
      assert.equal(other.status, 201);
      secrets.push(String(other.body.secret));
      const listed = await call(B_ADMIN, 'GET', '/admin/api/credentials');
      assert.ok((listed.body.credentials as Json[]).every((c) => c.target === 'b'));
      assert.ok(!(listed.body.credentials as Json[]).some((c) => c.key === 'default-store-app'));
      assert.equal((await call(B_ADMIN, 'GET', '/admin/api/credentials?target=')).status, 404);
      for (const action of ['revoke', 'rotate']) {
        const foreign = await call(B_ADMIN, 'POST', `/admin/api/credentials/default-store-app/${action}`, {});
        const unknown = await call(B_ADMIN, 'POST', `/admin/api/credentials/no-such-key/${action}`, {});
        assert.equal(foreign.status, 404, action);
        assert.equal(unknown.status, 404, action);
        assert.equal(String(foreign.body.detail).replace('default-store-app', 'no-such-key'), unknown.body.detail);
      }
      assert.equal(await xapiStatus(as('default-store-app', String(other.body.secret))), 200, 'untouched');
    });

    test('rotate with a grace: both secrets work until it ends; revoke: refused; unknown key 404; both audited', async () => {
      const created = await call(OPERATOR, 'POST', '/admin/api/credentials', { scopes: ['all'], agent: AGENT, key: 'rotating' });
      const first = String(created.body.secret);
      const rotated = await call(OPERATOR, 'POST', '/admin/api/credentials/rotating/rotate', { grace: 600 });
      assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
      const second = String(rotated.body.secret);
      secrets.push(first, second);
      assert.notEqual(first, second);
      assert.equal(await xapiStatus(as('rotating', first)), 200, 'the old secret during its grace');
      assert.equal(await xapiStatus(as('rotating', second)), 200);
      clock.advance(601_000);
      assert.equal(await xapiStatus(as('rotating', first)), 401, 'the old secret after its grace');
      assert.equal(await xapiStatus(as('rotating', second)), 200);

      const revoked = await call(OPERATOR, 'POST', '/admin/api/credentials/rotating/revoke');
      assert.equal(revoked.status, 200);
      assert.equal(typeof revoked.body.revoked, 'string');
      assert.equal(await xapiStatus(as('rotating', second)), 401);
      assert.equal((await call(OPERATOR, 'POST', '/admin/api/credentials/rotating/rotate', {})).status, 409, 'a revoked credential is not rotated');
      assert.equal((await call(OPERATOR, 'POST', '/admin/api/credentials/nothing-here/revoke')).status, 404);

      assert.deepEqual(
        (await auditOf('credentials.rotate')).map((e) => e.details),
        [{ key: 'rotating', grace: 600 }],
      );
      assert.deepEqual(
        (await auditOf('credentials.revoke')).map((e) => e.details),
        [{ key: 'rotating' }],
      );
    });

    test('bad input: a 4xx naming the field, and no credential, no audit entry', async () => {
      const count = async () => ((await call(OPERATOR, 'GET', '/admin/api/credentials')).body.credentials as Json[]).length;
      const before = [await count(), (await auditOf('credentials.create')).length];
      const refused = async (body: unknown, status: number, field: RegExp | string[]) => {
        const r = await call(OPERATOR, 'POST', '/admin/api/credentials', body);
        assert.equal(r.status, status, `${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
        if (Array.isArray(field)) assert.deepEqual((r.body.detail as { loc: string[] }[])[0].loc, field);
        else assert.match(String(r.body.detail), field);
      };
      await refused({ agent: AGENT }, 400, ['body', 'scopes']);
      await refused({ scopes: 'all', agent: AGENT }, 400, ['body', 'scopes']);
      await refused({ scopes: ['all'] }, 400, ['body', 'agent']);
      await refused({ scopes: ['all'], agent: 'mailto:x@example.com' }, 400, ['body', 'agent']);
      await refused({ scopes: ['all'], agent: AGENT, secret: 'mine' }, 400, ['body', 'secret']);
      await refused({ scopes: [], agent: AGENT }, 400, /^scopes/);
      await refused({ scopes: ['everything'], agent: AGENT }, 400, /unknown scope "everything"/);
      await refused({ scopes: ['all'], agent: { name: 'no identifier' } }, 400, /agent/);
      await refused({ scopes: ['all'], agent: AGENT, expires: '2000-01-01' }, 400, /^expires/);
      await refused({ scopes: ['all'], agent: AGENT, validation: 'loose' }, 400, /^validation/);
      await refused({ scopes: ['all'], agent: AGENT, key: 'operator' }, 409, /^key/);
      await refused({ scopes: ['all'], agent: AGENT, key: 'rotating' }, 409, /^key/);
      const grace = await call(OPERATOR, 'POST', '/admin/api/credentials/default-store-app/rotate', { grace: 'soon' });
      assert.equal(grace.status, 400);
      assert.deepEqual((grace.body.detail as { loc: string[] }[])[0].loc, ['body', 'grace']);
      assert.deepEqual([await count(), (await auditOf('credentials.create')).length], before);
    });

    test('no secret in any listing, the audit log or the server log', async () => {
      const everything = JSON.stringify([(await call(OPERATOR, 'GET', '/admin/api/credentials')).body, (await call(OPERATOR, 'GET', '/admin/api/audit?limit=1000')).body]);
      assert.ok(secrets.length >= 5);
      for (const s of secrets) {
        assert.ok(!everything.includes(s), 'no secret listed');
        assert.ok(!log.join('').includes(s), 'no secret logged');
      }
    });
  });
}

/** `admin/store` without a target: the default store's administrator, where the operator's database credentials live. */
const D_ADMIN: TestUser = { username: 'd-admin', password: 'd-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:d-admin@example.com' } };

for (const backend of BACKENDS) {
  describe(`admin API: who may rotate or revoke whom (hardening 46, item 1) (${backend.name})`, () => {
    let lrs: TestLrs;
    /** key → secret of the credentials the operator creates before each test. */
    const issued = new Map<string, string>();
    before(async () => {
      lrs = await startTestLrs(backend, { users: [OPERATOR, D_ADMIN, B_ADMIN], env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0' } });
      // The operator's own key (admin), a fellow store administrator's (admin/store), a producer's,
      // and one the default store's administrator signs in with itself: all in the default store.
      for (const [key, scopes] of [
        ['ops-key', ['admin']],
        ['fellow', ['admin/store']],
        ['lms', ['statements/write']],
        ['d-self', ['admin/store']],
      ] as const) {
        const r = await call(OPERATOR, 'POST', '/admin/api/credentials', { key, scopes, agent: AGENT });
        assert.equal(r.status, 201, JSON.stringify(r.body));
        issued.set(key, String(r.body.secret));
      }
    });
    after(() => lrs?.close());

    const call = async (user: TestUser, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> => {
      const res = await lrs.fetch(path, body === undefined ? { method, user, version: null } : jsonInit(method, body, { user, version: null }));
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
    };
    const as = (key: string, secret = issued.get(key)!): TestUser => ({ username: key, password: secret, scopes: [], agent: AGENT });

    test("a store administrator of the default store cannot rotate or revoke the operator's key, nor a fellow administrator's: the 404 of an unknown key, nothing changed", async () => {
      const listed = await call(D_ADMIN, 'GET', '/admin/api/credentials');
      assert.ok(
        (listed.body.credentials as Json[]).some((c) => c.key === 'ops-key'),
        'listed (never its secret)',
      );
      for (const key of ['ops-key', 'fellow']) {
        for (const [action, body] of [
          ['rotate', { grace: 0 }],
          ['revoke', {}],
        ] as const) {
          const refused = await call(D_ADMIN, 'POST', `/admin/api/credentials/${key}/${action}`, body);
          const unknown = await call(D_ADMIN, 'POST', `/admin/api/credentials/no-such-key/${action}`, body);
          assert.equal(refused.status, 404, `${action} ${key}: ${JSON.stringify(refused.body)}`);
          assert.equal(refused.body.secret, undefined);
          assert.equal(String(refused.body.detail).replace(key, 'no-such-key'), unknown.body.detail);
        }
      }
      // Both keys work as before: the operator's still reaches what only an operator may.
      assert.equal((await call(as('ops-key'), 'GET', '/admin/api/status')).status, 200);
      assert.equal((await call(as('fellow'), 'GET', '/admin/api/stores')).status, 200);
      const audit = (await call(OPERATOR, 'GET', '/admin/api/audit?actor=d-admin')).body.entries as Json[];
      assert.deepEqual(audit, [], 'nothing done, nothing audited');
    });

    test("a store administrator rotates and revokes its store's credentials without an admin scope, and its own; the operator any", async () => {
      const rotated = await call(D_ADMIN, 'POST', '/admin/api/credentials/lms/rotate', { grace: 0 });
      assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
      assert.equal((await call(D_ADMIN, 'POST', '/admin/api/credentials/lms/revoke', {})).status, 200);
      // Signed in with its own database credential: it may rotate that one (and still not a fellow's).
      const own = await call(as('d-self'), 'POST', '/admin/api/credentials/d-self/rotate', { grace: 0 });
      assert.equal(own.status, 200, JSON.stringify(own.body));
      const self = as('d-self', String(own.body.secret));
      assert.equal((await call(self, 'GET', '/admin/api/stores')).status, 200);
      assert.equal((await call(self, 'POST', '/admin/api/credentials/fellow/rotate', {})).status, 404);
      assert.equal((await call(self, 'POST', '/admin/api/credentials/ops-key/revoke', {})).status, 404);
      // Another store's administrator: none of the default store's.
      assert.equal((await call(B_ADMIN, 'POST', '/admin/api/credentials/lms/rotate', {})).status, 404);
      // The operator rotates a fellow administrator's credential.
      assert.equal((await call(OPERATOR, 'POST', '/admin/api/credentials/fellow/rotate', {})).status, 200);
      const audit = ((await call(OPERATOR, 'GET', '/admin/api/audit?action=credentials.rotate')).body.entries as Json[]).map((e) => [e.actor, (e.details as Json).key]);
      assert.deepEqual(audit, [
        ['operator', 'fellow'],
        ['d-self', 'd-self'],
        ['d-admin', 'lms'],
      ]);
    });
  });
}
