/**
 * The admin API (/admin/api/) through HTTP on every backend: roles (xAPI scopes never reach it, a
 * store administrator sees and changes only its store, the operator every one), the stores and
 * their figures, forwarding status and retry, erasure (dry run, then the run, audited as the CLI
 * audits it), the audit log (filters, paging, no secret), bad input, and the failure rate limit.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, sqliteBackend, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { LRS_AUDIENCE, startProvider, type TestProvider } from '../helpers/oidc.ts';
import { eventually, Receiver } from '../helpers/receiver.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const B_ADMIN: TestUser = { username: 'b-admin', password: 'b-admin-secret', scopes: ['admin/store'], agent: { mbox: 'mailto:b-admin@example.com' }, target: 'b' };
/** `admin` held by a store's user: that store's administrator, never an operator. */
const C_ADMIN: TestUser = { username: 'c-admin', password: 'c-admin-secret', scopes: ['admin', 'all'], agent: { mbox: 'mailto:c-admin@example.com' }, target: 'c' };
const USERS = [ADMIN, TENANT_B, OPERATOR, B_ADMIN, C_ADMIN];
const PASSWORDS = USERS.map((u) => u.password);

/** The learner erased (statement()'s default actor is another). */
const CAL = { mbox: 'mailto:cal@example.com' };
const ANN = { mbox: 'mailto:ann@example.com' };

type Json = Record<string, unknown>;

async function call(
  lrs: TestLrs,
  user: TestUser | null,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Json; headers: Headers }> {
  const init = body === undefined ? { method, user, version: null, headers } : jsonInit(method, body, { user, version: null, headers });
  const res = await lrs.fetch(path, init);
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {}, headers: res.headers };
}

async function post(lrs: TestLrs, user: TestUser, statements: unknown[]): Promise<string[]> {
  const res = await lrs.fetch('/xAPI/statements', jsonInit('POST', statements, { user }));
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as string[];
}

/** The admin routes the OpenAPI description lists, as [method, path]. */
async function adminRoutes(lrs: TestLrs): Promise<[string, string][]> {
  const res = await lrs.fetch('/openapi.json', { user: null, version: null });
  const doc = (await res.json()) as { paths: Record<string, Record<string, unknown>> };
  return Object.entries(doc.paths)
    .filter(([p]) => p.startsWith('/admin/api/'))
    .flatMap(([p, item]) => Object.keys(item).map((m) => [m.toUpperCase(), p] as [string, string]));
}

const noSecret = (text: string) => {
  for (const p of PASSWORDS) assert.ok(!text.includes(p), 'no password anywhere');
  assert.doesNotMatch(text, /authorization|basic [a-z0-9+/=]{8,}/i);
};

for (const backend of BACKENDS) {
  describe(`admin API (${backend.name})`, () => {
    let lrs: TestLrs;
    let receiver: Receiver;
    const auditDir = mkdtempSync(join(tmpdir(), 'lectern-admin-audit-'));
    const auditFile = join(auditDir, 'audit.log');
    before(async () => {
      receiver = await new Receiver().listen();
      // Refuses everything: each forwarded statement becomes a dead letter at once.
      receiver.respond = () => ({ status: 403 });
      const forwardings = [{ is_active: true, url: receiver.url, basic_username: 'fw', basic_password: 'fw-target-password', max_retries: 0, timeout: 10 }];
      lrs = await startTestLrs(backend, {
        users: USERS,
        env: { LECTERN_XAPI_FORWARDINGS: JSON.stringify(forwardings), LECTERN_XAPI_FORWARDING_BACKOFF: '20', LECTERN_AUDIT_FILE: auditFile },
      });
    });
    after(async () => {
      await lrs?.close();
      await receiver?.close();
      rmSync(auditDir, { recursive: true, force: true });
    });

    test('every admin route in /openapi.json: 401 without credentials, 403 with xAPI scopes only (all included), never for the operator', async () => {
      const routes = await adminRoutes(lrs);
      assert.ok(routes.length >= 6, `the admin routes are described: ${routes.map((r) => r.join(' ')).join(', ')}`);
      for (const [method, path] of routes) {
        const body = method === 'POST' ? {} : undefined;
        assert.equal((await call(lrs, null, method, path, body)).status, 401, `${method} ${path} without credentials`);
        for (const user of [ADMIN, TENANT_B]) {
          const r = await call(lrs, user, method, path, body);
          assert.equal(r.status, 403, `${method} ${path} as ${user.username} (${user.scopes.join(' ')})`);
          assert.match(String(r.body.detail), /admin or admin\/store scope/);
        }
        if (method !== 'GET') continue;
        const status = (await call(lrs, OPERATOR, method, path)).status;
        // A path with a parameter is called with its template ({id}): a 400 or 404, never a refusal.
        if (path.includes('{')) assert.ok(status === 400 || status === 404, `${method} ${path} as the operator: ${status}`);
        else assert.equal(status, 200, `${method} ${path} as the operator`);
      }
    });

    test('stores: the operator sees every store with its figures; a store administrator only its own, and 404 for any other', async () => {
      await post(lrs, ADMIN, [statement({ actor: ANN }), statement({ actor: ANN })]);
      await post(lrs, TENANT_B, [statement({ actor: ANN })]);
      const doc = await lrs.fetch(`/xAPI/activities/state?activityId=${encodeURIComponent('http://example.com/a')}&agent=${encodeURIComponent(JSON.stringify(ANN))}&stateId=s`, {
        method: 'PUT',
        user: TENANT_B,
        headers: { 'content-type': 'application/json' },
        body: '{"page": 1}',
      });
      assert.equal(doc.status, 204);

      const all = await call(lrs, OPERATOR, 'GET', '/admin/api/stores');
      assert.equal(all.status, 200);
      const stores = all.body.stores as { target: string; statements: number; documents: number; lastStored: string | null }[];
      const byName = new Map(stores.map((s) => [s.target, s]));
      assert.ok(byName.get('')!.statements >= 2);
      assert.equal(byName.get('b')!.statements, 1);
      assert.equal(byName.get('b')!.documents, 1);
      assert.ok(!Number.isNaN(Date.parse(byName.get('b')!.lastStored!)));

      const own = await call(lrs, B_ADMIN, 'GET', '/admin/api/stores');
      assert.equal(own.status, 200);
      assert.deepEqual(own.body.stores, [byName.get('b')]);
      assert.equal((await call(lrs, B_ADMIN, 'GET', '/admin/api/stores?target=b')).status, 200);
      // Another store, an existing one or not: the same 404, so its existence is not told.
      const other = await call(lrs, B_ADMIN, 'GET', '/admin/api/stores?target=');
      const none = await call(lrs, B_ADMIN, 'GET', '/admin/api/stores?target=nowhere');
      assert.equal(other.status, 404);
      assert.equal(none.status, 404);
      assert.equal(String(other.body.detail).replace('""', '"nowhere"'), none.body.detail);

      // `admin` in store c: an administrator of c, not an operator.
      const c = await call(lrs, C_ADMIN, 'GET', '/admin/api/stores');
      assert.deepEqual(c.body.stores, [{ target: 'c', statements: 0, documents: 0, lastStored: null }]);
      for (const [user, path] of [
        [B_ADMIN, '/admin/api/status'],
        [B_ADMIN, '/admin/api/forwarding'],
        [C_ADMIN, '/admin/api/status'],
      ] as const) {
        assert.equal((await call(lrs, user, 'GET', path)).status, 403, `${user.username} ${path}`);
      }
      assert.equal((await call(lrs, B_ADMIN, 'POST', '/admin/api/forwarding/retry', {})).status, 403);
    });

    test('status: version, backend, xAPI versions, uptime, and the statements stored per minute', async () => {
      await post(lrs, ADMIN, [statement(), statement(), statement()]);
      const r = await call(lrs, OPERATOR, 'GET', '/admin/api/status');
      assert.equal(r.status, 200);
      assert.match(String(r.body.version), /^\d+\.\d+\.\d+/);
      assert.equal(r.body.backend, backend.name === 'postgres' ? 'postgres' : 'sqlite');
      assert.deepEqual(r.body.xapiVersions, lrs.config.xapiVersions);
      assert.equal(typeof r.body.uptimeSeconds, 'number');
      const ingest = r.body.ingest as { minute: string; statements: number }[];
      assert.ok(ingest.length > 1);
      assert.ok(ingest.reduce((n, m) => n + m.statements, 0) >= 3, 'the statements just stored are counted');
    });

    test('forwarding: status per target, its dead letters listed by page; retry re-queues them, audited; an unknown target is a 404', async () => {
      const [id] = await post(lrs, ADMIN, [statement({ actor: ANN })]);
      const [inB] = await post(lrs, TENANT_B, [statement({ actor: ANN })]);
      const dead = await eventually('the dead letters', async () => {
        const r = await call(lrs, OPERATOR, 'GET', '/admin/api/forwarding');
        const t = (r.body.targets as { target: string; dead: number; queued: number; active: boolean; lastError?: string }[]).find((x) => x.target === receiver.url);
        return t && t.dead > 1 && t.queued === 0 ? t : undefined;
      });
      assert.equal(dead.active, true);
      noSecret(JSON.stringify(dead));
      assert.ok(!JSON.stringify(dead).includes('fw-target-password'));

      type Letter = { id: string; target: string; store: string; statementId: string; attempts: number; lastError: string | null };
      const listed: Letter[] = [];
      let path = `/admin/api/forwarding/dead-letters?limit=2&url=${encodeURIComponent(receiver.url)}`;
      while (path) {
        const page = await call(lrs, OPERATOR, 'GET', path);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        assert.ok((page.body.deadLetters as Letter[]).length <= 2);
        listed.push(...(page.body.deadLetters as Letter[]));
        path = String(page.body.more);
      }
      assert.equal(listed.length, dead.dead, 'every dead letter, once, over the pages');
      const mine = listed.find((l) => l.statementId === id)!;
      assert.deepEqual({ ...mine, id: undefined, lastError: undefined }, { id: undefined, target: receiver.url, store: '', statementId: id, attempts: 1, lastError: undefined });
      assert.match(String(mine.lastError), /403/);
      assert.equal(listed.find((l) => l.statementId === inB)?.store, 'b');
      noSecret(JSON.stringify(listed));
      assert.ok(!JSON.stringify(listed).includes('fw-target-password'));
      assert.equal((await call(lrs, B_ADMIN, 'GET', '/admin/api/forwarding/dead-letters')).status, 403);

      const unknown = await call(lrs, OPERATOR, 'POST', '/admin/api/forwarding/retry', { url: 'http://127.0.0.1:9/nothing' });
      assert.equal(unknown.status, 404);
      const before = await call(lrs, OPERATOR, 'GET', '/admin/api/audit?action=forwarding.retry');
      assert.deepEqual(before.body.entries, [], 'a refused retry is not audited');

      receiver.respond = () => ({ status: 200 });
      const retry = await call(lrs, OPERATOR, 'POST', '/admin/api/forwarding/retry', { url: receiver.url });
      assert.equal(retry.status, 200);
      assert.ok((retry.body.requeued as number) >= 1);
      await eventually('the re-queued letters delivered', async () => {
        const r = await call(lrs, OPERATOR, 'GET', '/admin/api/forwarding');
        const t = (r.body.targets as { target: string; dead: number; queued: number }[]).find((x) => x.target === receiver.url);
        return t && t.dead === 0 && t.queued === 0;
      });
      assert.deepEqual((await call(lrs, OPERATOR, 'GET', '/admin/api/forwarding/dead-letters')).body.deadLetters, []);
      const audit = await call(lrs, OPERATOR, 'GET', '/admin/api/audit?action=forwarding.retry');
      const [entry] = audit.body.entries as Json[];
      assert.equal(entry.actor, 'operator');
      assert.equal(entry.actorKind, 'file-user');
      assert.equal(entry.role, 'operator');
      assert.equal(entry.via, 'http');
      assert.equal(entry.target, null);
      assert.deepEqual(entry.details, { url: receiver.url, requeued: retry.body.requeued });
      assert.match(String(entry.client), /127\.0\.0\.1/);
      // Server-wide entries are the operator's.
      assert.deepEqual((await call(lrs, B_ADMIN, 'GET', '/admin/api/audit?action=forwarding.retry')).body.entries, []);
    });

    test('erase: a dry run by default (counts, nothing changed, nothing audited); the run erases and is audited in the log and the audit file', async () => {
      await post(lrs, ADMIN, [statement({ actor: CAL }), statement({ actor: CAL }), statement({ actor: ANN })]);
      await post(lrs, TENANT_B, [statement({ actor: CAL })]);
      const count = async (user: TestUser) => {
        const res = await lrs.fetch(`/xAPI/statements?agent=${encodeURIComponent(JSON.stringify(CAL))}&limit=0`, { user });
        return ((await res.json()) as { statements: unknown[] }).statements.length;
      };
      assert.equal(await count(ADMIN), 2);

      const dry = await call(lrs, OPERATOR, 'POST', '/admin/api/erase', { agent: CAL });
      assert.equal(dry.status, 200, JSON.stringify(dry.body));
      assert.equal(dry.body.dryRun, true);
      assert.equal(dry.body.statements, 2);
      assert.equal(await count(ADMIN), 2, 'a dry run changes nothing');
      assert.deepEqual((await call(lrs, OPERATOR, 'GET', '/admin/api/audit?action=erase')).body.entries, []);

      // A store administrator cannot reach the default store: 404, as for a store that does not exist.
      assert.equal((await call(lrs, B_ADMIN, 'POST', '/admin/api/erase', { target: '', agent: CAL, dryRun: false })).status, 404);
      assert.equal(await count(ADMIN), 2);

      const run = await call(lrs, OPERATOR, 'POST', '/admin/api/erase', { agent: CAL, dryRun: false });
      assert.equal(run.status, 200);
      assert.equal(run.body.dryRun, false);
      assert.equal(run.body.statements, 2);
      assert.equal(run.body.complete, true);
      assert.equal(await count(ADMIN), 0);
      assert.equal(await count(TENANT_B), 1, 'another store keeps its statements');

      // The store administrator erases in its own store (its target by default).
      const own = await call(lrs, B_ADMIN, 'POST', '/admin/api/erase', { agent: CAL, dryRun: false });
      assert.equal(own.status, 200);
      assert.equal(own.body.target, 'b');
      assert.equal(await count(TENANT_B), 0);

      // The CLI's audit line, from the API's runs: counts, who, from where; never the person.
      // Each run twice: when it started (before anything changed), and when it ended.
      const lines = readFileSync(auditFile, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Json);
      const mine = lines.filter((l) => l.user === 'operator' || l.user === 'b-admin').slice(-4);
      assert.deepEqual(
        mine.map((l) => [l.phase, l.command, l.user, l.userKind, l.target, l.statements]),
        [
          ['start', 'erase', 'operator', 'file-user', '', undefined],
          ['end', 'erase', 'operator', 'file-user', '', 2],
          ['start', 'erase', 'b-admin', 'file-user', 'b', undefined],
          ['end', 'erase', 'b-admin', 'file-user', 'b', 1],
        ],
      );
      assert.ok(!JSON.stringify(mine).includes('cal@example.com'));

      const log = await call(lrs, OPERATOR, 'GET', '/admin/api/audit?action=erase');
      const entries = log.body.entries as Json[];
      assert.deepEqual(
        entries.map((e) => [e.actor, e.role, e.target, (e.details as Json).phase]),
        [
          ['b-admin', 'store', 'b', 'end'],
          ['b-admin', 'store', 'b', 'start'],
          ['operator', 'operator', '', 'end'],
          ['operator', 'operator', '', 'start'],
        ],
      );
      assert.equal((entries[0].details as Json).startId, entries[1].id);
      assert.ok(!JSON.stringify(entries).includes('cal@example.com'), 'the audit never names the person erased');
      // The store administrator sees its own store's entries only.
      const bLog = await call(lrs, B_ADMIN, 'GET', '/admin/api/audit');
      assert.deepEqual(
        (bLog.body.entries as Json[]).map((e) => e.target),
        ['b', 'b'],
      );
      assert.equal((await call(lrs, B_ADMIN, 'GET', '/admin/api/audit?target=')).status, 404);
    });

    test('the audit log: filters, pages with `more`, never a secret', async () => {
      const all = await call(lrs, OPERATOR, 'GET', '/admin/api/audit');
      assert.equal(all.status, 200);
      const entries = all.body.entries as Json[];
      assert.ok(entries.length >= 3);
      noSecret(JSON.stringify(entries));
      for (const e of entries) assert.deepEqual(Object.keys(e).sort(), ['action', 'actor', 'actorKind', 'client', 'details', 'id', 'role', 'target', 'time', 'via']);
      const times = entries.map((e) => Date.parse(String(e.time)));
      assert.deepEqual(
        [...times].sort((a, b) => b - a),
        times,
        'newest first',
      );

      const seen: string[] = [];
      let path = '/admin/api/audit?limit=1';
      for (let i = 0; i < 20 && path; i++) {
        const page = await call(lrs, OPERATOR, 'GET', path);
        assert.equal(page.status, 200);
        const list = page.body.entries as Json[];
        assert.ok(list.length <= 1);
        seen.push(...list.map((e) => String(e.id)));
        path = String(page.body.more);
      }
      assert.deepEqual(
        seen,
        entries.map((e) => e.id),
        'the pages follow one another',
      );
      assert.deepEqual(
        ((await call(lrs, OPERATOR, 'GET', '/admin/api/audit?actor=b-admin')).body.entries as Json[]).map((e) => e.actor),
        ['b-admin', 'b-admin'],
      );
      assert.deepEqual((await call(lrs, OPERATOR, 'GET', '/admin/api/audit?since=2999-01-01T00:00:00Z')).body.entries, []);
      assert.equal(((await call(lrs, OPERATOR, 'GET', '/admin/api/audit?target=b')).body.entries as Json[]).length, 2);
    });

    test('bad input: a 400 naming the field, and nothing done', async () => {
      const before = ((await call(lrs, OPERATOR, 'GET', '/admin/api/audit')).body.entries as Json[]).length;
      const field = async (method: string, path: string, body: unknown, loc: string[]) => {
        const r = await call(lrs, OPERATOR, method, path, body);
        assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
        assert.ok(Array.isArray(r.body.detail), JSON.stringify(r.body));
        assert.deepEqual((r.body.detail as { loc: string[] }[])[0].loc.slice(0, loc.length), loc, JSON.stringify(r.body));
      };
      await field('POST', '/admin/api/erase', {}, ['body', 'agent']);
      await field('POST', '/admin/api/erase', { agent: { name: 'no identifier' }, dryRun: false }, ['body', 'agent']);
      await field('POST', '/admin/api/erase', { agent: CAL, dryRun: 'no' }, ['body', 'dryRun']);
      await field('POST', '/admin/api/erase', { agent: CAL, dryrun: false }, ['body', 'dryrun']);
      await field('POST', '/admin/api/erase', { agent: CAL, target: 3 }, ['body', 'target']);
      await field('POST', '/admin/api/erase', { agent: CAL, dryRun: false, pseudonymize: true }, ['body', 'pseudonymize']);
      await field('POST', '/admin/api/forwarding/retry', { url: 42 }, ['body', 'url']);
      await field('GET', '/admin/api/audit?limit=0', undefined, ['query', 'limit']);
      await field('GET', '/admin/api/audit?since=yesterday', undefined, ['query', 'since']);
      await field('GET', '/admin/api/audit?user=x', undefined, ['query', 'user']);
      await field('GET', '/admin/api/stores?store=b', undefined, ['query', 'store']);
      await field('GET', '/admin/api/forwarding/dead-letters?after=-1', undefined, ['query', 'after']);
      for (const [body, type] of [
        ['{"agent":', 'application/json'],
        ['[1]', 'application/json'],
        ['agent=x', 'application/x-www-form-urlencoded'],
      ]) {
        const res = await lrs.fetch('/admin/api/erase', { method: 'POST', user: OPERATOR, version: null, headers: { 'content-type': type }, body });
        assert.equal(res.status, 400, body);
        assert.equal(typeof ((await res.json()) as Json).detail, 'string');
      }
      assert.equal(((await call(lrs, OPERATOR, 'GET', '/admin/api/audit')).body.entries as Json[]).length, before, 'nothing audited');
    });
  });
}

describe('failed admin sign-ins are rate-limited per client address and per user (LECTERN_ADMIN_MAX_FAILURES)', () => {
  let lrs: TestLrs;
  before(async () => {
    lrs = await startTestLrs(sqliteBackend, { users: USERS, env: { LECTERN_ADMIN_MAX_FAILURES: '3', LECTERN_RUNSERVER_TRUST_PROXY: 'true' } });
  });
  after(async () => lrs?.close());
  const from = (address: string) => ({ 'x-forwarded-for': address });
  const wrong = (u: TestUser): TestUser => ({ ...u, password: 'wrong-password' });

  test('per address: after N failures, 429 with Retry-After, even for good credentials, on admin routes only', async () => {
    for (let i = 0; i < 3; i++) {
      assert.equal((await call(lrs, wrong({ ...OPERATOR, username: `nobody-${i}` }), 'GET', '/admin/api/stores', undefined, from('10.0.0.1'))).status, 401);
    }
    const blocked = await call(lrs, OPERATOR, 'GET', '/admin/api/stores', undefined, from('10.0.0.1'));
    assert.equal(blocked.status, 429);
    assert.ok(Number(blocked.headers.get('retry-after')) >= 1);
    assert.equal(typeof blocked.body.detail, 'string');
    // Another address is not concerned, nor are the xAPI routes of this one.
    assert.equal((await call(lrs, OPERATOR, 'GET', '/admin/api/stores', undefined, from('10.0.0.2'))).status, 200);
    assert.equal((await lrs.fetch('/xAPI/statements?limit=1', { headers: from('10.0.0.1') })).status, 200);
  });

  test('per user: failures for one user from many addresses block that user at addresses that failed, not at clean ones, nor the others', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await call(lrs, wrong(B_ADMIN), 'GET', '/admin/api/stores', undefined, from(`10.0.1.${i}`))).status, 401);
    // An address that failed (once) gets no further try for that user, good credentials or not.
    const blocked = await call(lrs, B_ADMIN, 'GET', '/admin/api/stores', undefined, from('10.0.1.0'));
    assert.equal(blocked.status, 429);
    assert.ok(Number(blocked.headers.get('retry-after')) >= 1);
    assert.equal((await call(lrs, OPERATOR, 'GET', '/admin/api/stores', undefined, from('10.0.1.0'))).status, 200, 'other users are not concerned');
    // A clean address is still checked: the real user signs in; a guess from there is one try.
    assert.equal((await call(lrs, B_ADMIN, 'GET', '/admin/api/stores', undefined, from('10.0.1.99'))).status, 200);
    assert.equal((await call(lrs, wrong(B_ADMIN), 'GET', '/admin/api/stores', undefined, from('10.0.1.98'))).status, 401);
    assert.equal((await call(lrs, B_ADMIN, 'GET', '/admin/api/stores', undefined, from('10.0.1.98'))).status, 429);
  });

  test('requests without credentials and refused scopes are not failures', async () => {
    for (let i = 0; i < 5; i++) assert.equal((await call(lrs, null, 'GET', '/admin/api/stores', undefined, from('10.0.2.1'))).status, 401);
    for (let i = 0; i < 5; i++) assert.equal((await call(lrs, ADMIN, 'GET', '/admin/api/stores', undefined, from('10.0.2.1'))).status, 403);
    assert.equal((await call(lrs, OPERATOR, 'GET', '/admin/api/stores', undefined, from('10.0.2.1'))).status, 200);
  });
});

describe('OpenID Connect bearer tokens get their admin role from the same scopes and target claim', () => {
  let op: TestProvider;
  let lrs: TestLrs;
  before(async () => {
    op = await startProvider();
    lrs = await startTestLrs(sqliteBackend, {
      users: USERS,
      env: { LECTERN_RUNSERVER_AUTH_BACKENDS: 'basic,oidc', LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI: op.issuer, LECTERN_RUNSERVER_AUTH_OIDC_AUDIENCE: LRS_AUDIENCE },
    });
    await post(lrs, TENANT_B, [statement({ actor: ANN })]);
  });
  after(async () => {
    await lrs?.close();
    await op?.close();
  });
  const bearer = async (claims: Record<string, unknown>) => ({ authorization: `Bearer ${await op.sign(claims)}` });

  test('admin: operator; admin/store with a target: that store only; all: 403', async () => {
    const operator = await call(lrs, null, 'GET', '/admin/api/stores', undefined, await bearer({ sub: 'ops-service', scope: 'openid admin' }));
    assert.equal(operator.status, 200);
    assert.deepEqual(
      (operator.body.stores as Json[]).map((x) => x.target),
      ['', 'b'],
    );
    const store = await bearer({ sub: 'b-service', scope: 'admin/store', target: 'b' });
    assert.deepEqual(
      ((await call(lrs, null, 'GET', '/admin/api/stores', undefined, store)).body.stores as Json[]).map((x) => x.target),
      ['b'],
    );
    assert.equal((await call(lrs, null, 'GET', '/admin/api/stores?target=', undefined, store)).status, 404);
    assert.equal((await call(lrs, null, 'GET', '/admin/api/status', undefined, store)).status, 403);
    assert.equal((await call(lrs, null, 'GET', '/admin/api/stores', undefined, await bearer({ sub: 'xapi-client', scope: 'all' }))).status, 403);
    assert.equal((await call(lrs, null, 'GET', '/admin/api/stores', undefined, { authorization: 'Bearer not-a-token' })).status, 401);
  });
});
