/** GET /metrics through a real server on every backend: access, and counters moving after real requests. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const READER: TestUser = { username: 'reader', password: 'reader-pass', scopes: ['statements/read'], agent: { mbox: 'mailto:reader@example.com' } };

/** The value of one sample (`name{labels}`), 0 when absent. Label order as prom-client writes them. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return 0;
}

for (const backend of BACKENDS) {
  describe(`GET /metrics (${backend.name})`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, READER, TENANT_B] });
    });
    after(() => t.close());

    const metrics = async () => {
      const res = await t.fetch('/metrics', { version: null });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
      return res.text();
    };

    test('needs credentials holding the all scope by default', async () => {
      const anonymous = await t.fetch('/metrics', { user: null, version: null });
      assert.equal(anonymous.status, 401);
      assert.match(anonymous.headers.get('www-authenticate') ?? '', /Basic/);
      const reader = await t.fetch('/metrics', { user: READER, version: null });
      assert.equal(reader.status, 403);
      assert.match((await reader.json()).detail, /all scope/);
      await metrics();
    });

    test("a store's own all user gets 403: the figures count every store's requests and statements", async () => {
      const tenant = await t.fetch('/metrics', { user: TENANT_B, version: null });
      assert.equal(tenant.status, 403);
      assert.match((await tenant.json()).detail, /default store/);
      await metrics(); // the default store's all user (ADMIN) reads them
    });

    test('counters move after real requests', async () => {
      const before = await metrics();
      const ok = await t.fetch('/xAPI/statements', jsonInit('POST', [statement(), statement({ verb: { id: 'http://example.com/v2' } })]));
      assert.equal(ok.status, 200);
      const [id] = (await ok.json()) as string[];
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', { actor: 'nobody' }))).status, 400);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ verb: { id: 'http://example.com/other' } })))).status, 409);
      assert.equal((await t.fetch('/xAPI/statements', { user: null })).status, 401);
      const doc = `/xAPI/activities/state?activityId=http://example.com/a&stateId=s&agent=${encodeURIComponent('{"mbox":"mailto:ben@example.com"}')}`;
      assert.equal((await t.fetch(doc, jsonInit('PUT', { page: 1 }))).status, 204);
      assert.equal((await t.fetch(doc)).status, 200);
      assert.equal((await t.fetch(doc, { method: 'DELETE' })).status, 204);
      const text = await metrics();
      const moved = (name: string, labels: Record<string, string> = {}) => sample(text, name, labels) - sample(before, name, labels);

      assert.equal(moved('lectern_statements_stored_total'), 2);
      assert.equal(moved('lectern_statements_rejected_total', { reason: 'invalid' }), 1);
      assert.equal(moved('lectern_statements_rejected_total', { reason: 'conflict' }), 1);
      assert.equal(moved('lectern_http_requests_total', { route: '/xAPI/statements', method: 'POST', status: '200' }), 1);
      assert.equal(moved('lectern_http_requests_total', { route: '/xAPI/statements', method: 'POST', status: '400' }), 1);
      assert.equal(moved('lectern_http_request_duration_seconds_count', { route: '/xAPI/statements', method: 'PUT', status: '409' }), 1);
      assert.ok(moved('lectern_http_request_duration_seconds_bucket', { route: '/xAPI/statements', method: 'POST', status: '200', le: '+Inf' }) === 1);
      assert.equal(moved('lectern_auth_failures_total', { status: '401' }), 1);
      for (const operation of ['write', 'read', 'delete']) assert.equal(moved('lectern_documents_total', { resource: 'state', operation }), 1, operation);
      assert.ok(
        moved('lectern_db_query_duration_seconds_count', { backend: backend.name.startsWith('sqlite') ? 'sqlite' : backend.name, operation: 'insertStatements', outcome: 'ok' }) >=
          1,
      );
      assert.ok(
        moved('lectern_db_query_duration_seconds_count', { backend: backend.name.startsWith('sqlite') ? 'sqlite' : backend.name, operation: 'getDocument', outcome: 'ok' }) === 1,
      );
      assert.ok(sample(text, 'process_resident_memory_bytes') > 0, 'process metrics');
      assert.ok(sample(text, 'nodejs_eventloop_lag_seconds') >= 0);
      if (backend.name === 'postgres') {
        assert.equal(sample(text, 'lectern_db_pool_max'), 4);
        assert.ok(sample(text, 'lectern_db_pool_connections') >= 1);
      } else {
        assert.doesNotMatch(text, /^lectern_db_pool_connections \d/m, 'SQLite has no pool');
      }
    });

    test('the forwarding module registers its per-target figures', async () => {
      let delivered = 10;
      const unregister = t.lrs.metrics.registerForwarding(async () => [
        { target: 'https://lrs-b.example.com/xAPI', queued: 3, delivered, retried: 2, dead: 1 },
        { target: 'https://lrs-c.example.com/xAPI', queued: 0, delivered: 5, retried: 0, dead: 0 },
      ]);
      let text = await metrics();
      const b = { target: 'https://lrs-b.example.com/xAPI' };
      assert.equal(sample(text, 'lectern_forwarding_queued', b), 3);
      assert.equal(sample(text, 'lectern_forwarding_delivered_total', b), 10);
      assert.equal(sample(text, 'lectern_forwarding_retried_total', b), 2);
      assert.equal(sample(text, 'lectern_forwarding_dead', b), 1);
      assert.equal(sample(text, 'lectern_forwarding_delivered_total', { target: 'https://lrs-c.example.com/xAPI' }), 5);
      delivered = 12;
      assert.equal(sample(await metrics(), 'lectern_forwarding_delivered_total', b), 12);
      unregister();
      text = await metrics();
      assert.doesNotMatch(text, /lrs-b\.example\.com/);
    });
  });
}

describe('LECTERN_METRICS_ACCESS', () => {
  test('open serves without credentials; off removes the route', async () => {
    const open = await startTestLrs(undefined, { env: { LECTERN_METRICS_ACCESS: 'open' } });
    try {
      const res = await open.fetch('/metrics', { user: null, version: null });
      assert.equal(res.status, 200);
      assert.match(await res.text(), /lectern_http_requests_total/);
    } finally {
      await open.close();
    }
    const off = await startTestLrs(undefined, { env: { LECTERN_METRICS_ACCESS: 'off' } });
    try {
      assert.equal((await off.fetch('/metrics', { version: null })).status, 404);
    } finally {
      await off.close();
    }
  });

  test('without LECTERN_MONITORING_DSN the Sentry SDK was never loaded', () => {
    // The SDK registers its global carrier on import.
    assert.equal('__SENTRY__' in globalThis, false);
  });
});
