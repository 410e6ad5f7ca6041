/**
 * Multitenancy through HTTP, resource by resource, on every backend: a user's `target` is an
 * isolated store. What one store holds is invisible to, and unaffected by, every other; users
 * without a target share the default store.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, mock, test } from 'node:test';
import pg from 'pg';
import { ADMIN, BACKENDS, jsonInit, sqliteThreadBackend, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const TENANT_C: TestUser = { username: 'tenant-c', password: 'c-pass', scopes: ['all'], agent: { mbox: 'mailto:c@example.com' }, target: 'c' };
/** A second user of tenant b: tenants are per target, not per user. */
const TENANT_B2: TestUser = { username: 'tenant-b2', password: 'b2-pass', scopes: ['all'], agent: { mbox: 'mailto:b2@example.com' }, target: 'b' };
const enc = encodeURIComponent;

for (const backend of BACKENDS) {
  describe(`multitenancy [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, TENANT_B, TENANT_B2, TENANT_C] });
    });
    after(async () => t?.close());

    const ids = async (u: TestUser, query = '') => {
      const out: string[] = [];
      let url = `/xAPI/statements?limit=1${query}`;
      for (;;) {
        const body = await (await t.fetch(url, { user: u })).json();
        out.push(...body.statements.map((s: { id: string }) => s.id));
        if (!body.more) return out;
        url = body.more;
      }
    };

    test('statements: the same id in two stores is two statements; no conflict, no leak', async () => {
      const id = randomUUID();
      const verb = `http://example.com/verbs/tenancy-${randomUUID()}`;
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ verb: { id: verb }, result: { score: { raw: 1 } } })))).status, 204);
      assert.equal(
        (await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ verb: { id: verb }, result: { score: { raw: 2 } } }), { user: TENANT_B }))).status,
        204,
      );
      const a = await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json();
      const b = await (await t.fetch(`/xAPI/statements?statementId=${id}`, { user: TENANT_B2 })).json();
      assert.equal(a.result.score.raw, 1);
      assert.equal(b.result.score.raw, 2);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, { user: TENANT_C })).status, 404);
      assert.deepEqual(await ids(ADMIN, `&verb=${enc(verb)}`), [id]);
      assert.deepEqual(await ids(TENANT_B, `&verb=${enc(verb)}`), [id]);
      assert.deepEqual(await ids(TENANT_C, `&verb=${enc(verb)}`), []);
      // A conflict is decided within the store: b's id again with other content is b's 409 only.
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ verb: { id: verb } }), { user: TENANT_B }))).status, 409);
      assert.equal(
        (await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ verb: { id: verb }, result: { score: { raw: 3 } } }), { user: TENANT_C }))).status,
        204,
      );
    });

    test('statements: voiding in one store leaves the same id in another alone; StatementRefs do not cross stores', async () => {
      const id = randomUUID();
      const agent = { mbox: `mailto:${randomUUID()}@example.com` };
      for (const u of [ADMIN, TENANT_B]) {
        assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ actor: agent }), { user: u }))).status, 204);
      }
      const voiding = statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id } });
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', voiding, { user: TENANT_B }))).status, 200);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, { user: TENANT_B })).status, 404);
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${id}`, { user: TENANT_B })).status, 200);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 200, 'not voided in the default store');
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${id}`)).status, 404);
      // A StatementRef in c to the id matches nothing in c's store (the target lives elsewhere).
      const [ref] = await (await t.fetch('/xAPI/statements', jsonInit('POST', statement({ object: { objectType: 'StatementRef', id } }), { user: TENANT_C }))).json();
      assert.deepEqual(await ids(TENANT_C, `&agent=${enc(JSON.stringify(agent))}`), []);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${ref}`)).status, 404);
    });

    test('attachments: the same data in two stores; each store serves only its own', async () => {
      const content = Buffer.from(`tenant attachment ${randomUUID()}`);
      const sha2 = createHash('sha256').update(content).digest('hex');
      const verb = `http://example.com/verbs/att-${randomUUID()}`;
      const s = statement({
        verb: { id: verb },
        attachments: [{ usageType: 'http://example.com/u', display: { en: 'a' }, contentType: 'text/plain', length: content.length, sha2 }],
      });
      const boundary = 'tenancyboundary';
      const body = Buffer.concat([
        Buffer.from(
          `--${boundary}\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(s)}\r\n--${boundary}\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: binary\r\nX-Experience-API-Hash: ${sha2}\r\n\r\n`,
        ),
        content,
        Buffer.from(`\r\n--${boundary}--\r\n`),
      ]);
      const res = await t.fetch('/xAPI/statements', { method: 'POST', user: TENANT_B, headers: { 'content-type': `multipart/mixed; boundary=${boundary}` }, body });
      assert.equal(res.status, 200);
      const fetched = Buffer.from(await (await t.fetch(`/xAPI/statements?verb=${enc(verb)}&attachments=true`, { user: TENANT_B2 })).arrayBuffer());
      assert.ok(fetched.includes(content));
      // The default store has the statement text (sent with a fileUrl-less attachment it cannot store): no data from b.
      const plain = statement({
        verb: { id: verb },
        attachments: [{ usageType: 'http://example.com/u', display: { en: 'a' }, contentType: 'text/plain', length: content.length, sha2, fileUrl: 'http://example.com/f' }],
      });
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', plain))).status, 200);
      const other = Buffer.from(await (await t.fetch(`/xAPI/statements?verb=${enc(verb)}&attachments=true`)).arrayBuffer());
      assert.ok(!other.includes(content), "the default store never serves tenant b's bytes");
    });

    for (const [name, base, scope] of [
      ['State', '/xAPI/activities/state', `activityId=${enc('http://example.com/act')}&agent=${enc(JSON.stringify({ mbox: 'mailto:l@example.com' }))}`],
      ['Activity Profile', '/xAPI/activities/profile', `activityId=${enc('http://example.com/act')}`],
      ['Agent Profile', '/xAPI/agents/profile', `agent=${enc(JSON.stringify({ mbox: 'mailto:l@example.com' }))}`],
    ] as const) {
      test(`${name}: documents, lists, merges and deletes stay within their store`, async () => {
        const idName = name === 'State' ? 'stateId' : 'profileId';
        const docId = `doc-${randomUUID()}`;
        const one = `${base}?${scope}&${idName}=${docId}`;
        const create = { 'if-none-match': '*' };
        assert.equal((await t.fetch(one, jsonInit('PUT', { owner: 'default' }, { headers: create }))).status, 204);
        assert.equal((await t.fetch(one, { user: TENANT_B })).status, 404);
        assert.ok(!(await (await t.fetch(`${base}?${scope}`, { user: TENANT_B })).json()).includes(docId));
        // Created anew in b (If-None-Match: * holds there), then merged within b only.
        assert.equal((await t.fetch(one, jsonInit('PUT', { owner: 'b' }, { user: TENANT_B, headers: create }))).status, 204);
        assert.equal((await t.fetch(one, jsonInit('POST', { extra: true }, { user: TENANT_B2 }))).status, 204);
        assert.deepEqual(await (await t.fetch(one, { user: TENANT_B })).json(), { owner: 'b', extra: true });
        assert.deepEqual(await (await t.fetch(one)).json(), { owner: 'default' });
        // Deleting in b (one document, or State's whole scope) leaves the default store's.
        if (name === 'State') assert.equal((await t.fetch(`${base}?${scope}`, { method: 'DELETE', user: TENANT_B })).status, 204);
        else assert.equal((await t.fetch(one, { method: 'DELETE', user: TENANT_B })).status, 204);
        assert.equal((await t.fetch(one, { user: TENANT_B })).status, 404);
        assert.deepEqual(await (await t.fetch(one)).json(), { owner: 'default' });
        assert.ok((await (await t.fetch(`${base}?${scope}`)).json()).includes(docId));
        assert.equal((await t.fetch(one, { user: TENANT_C })).status, 404);
      });
    }

    test('Activities: canonical definitions are per store; Agents hold nothing stored', async () => {
      const id = `http://example.com/activities/tenancy-${randomUUID()}`;
      await t.fetch('/xAPI/statements', jsonInit('POST', statement({ object: { id, definition: { name: { en: 'default' } } } })));
      await t.fetch('/xAPI/statements', jsonInit('POST', statement({ object: { id, definition: { name: { en: 'b' } } } }), { user: TENANT_B }));
      const activity = async (u: TestUser) => (await t.fetch(`/xAPI/activities?activityId=${enc(id)}`, { user: u })).json();
      assert.deepEqual((await activity(ADMIN)).definition, { name: { en: 'default' } });
      assert.deepEqual((await activity(TENANT_B2)).definition, { name: { en: 'b' } });
      assert.deepEqual(await activity(TENANT_C), { objectType: 'Activity', id });
      // format=canonical uses the reader's store's definitions.
      const canonical = await (await t.fetch(`/xAPI/statements?activity=${enc(id)}&format=canonical`, { user: TENANT_B })).json();
      assert.deepEqual(canonical.statements[0].object.definition, { name: { en: 'b' } });
      const agent = enc(JSON.stringify({ mbox: 'mailto:ben@example.com' }));
      assert.deepEqual(await (await t.fetch(`/xAPI/agents?agent=${agent}`, { user: TENANT_C })).json(), await (await t.fetch(`/xAPI/agents?agent=${agent}`)).json());
    });
  });
}

/** Data tables: every query touching one must name the tenant. */
const DATA_TABLE = /\b(?:FROM|JOIN|INTO|UPDATE)\s+(?:statements|statement_agents|statement_activities|activities|attachments|documents)\b/i;
/** The only exceptions, and why they are safe. */
const TENANTLESS = [
  // SQLite's clock guard: `stored` never goes backwards across the whole file; returns no row to a client.
  /^SELECT stored_ms FROM statements ORDER BY seq DESC LIMIT 1$/,
  // SQLite's id merge: whether one is due counts seqs across the whole file (storage mechanics); returns no row to a client.
  /^SELECT through, upper_through, big_through, \(SELECT max\(seq\) FROM statements\) AS last FROM id_merge$/,
  // Attachment links are keyed by the seq of a statement inserted in the same transaction, in the tenant's store.
  /^INSERT OR IGNORE INTO statement_attachments \(seq, sha2, carrier\)/,
  // SQLite migration start-up: how many statements a rebuilding migration rewrites (logged, not served).
  /^SELECT count\(\*\) AS n FROM statements( WHERE ref_id IS NOT NULL)?$/,
  // PostgreSQL's counterpart (migration 8 announces how many StatementRefs it indexes).
  /^SELECT 'indexing what StatementRefs target: '/,
  // PostgreSQL migration 11 at start-up: every attachment link gets its statement's authority as carrier (serves nothing).
  /^ALTER TABLE statement_attachments ADD COLUMN carrier integer; UPDATE statement_attachments l SET carrier = coalesce\(s\.authority, 0\) FROM statements s WHERE s\.seq = l\.seq;/,
];

for (const backend of BACKENDS) {
  describe(`every store query carries the tenant key [${backend.name}]`, () => {
    test('all SQL run while every resource is used names the tenant', async () => {
      const seen = new Set<string>();
      const record = (sql: unknown) => {
        const text = typeof sql === 'string' ? sql : (sql as { text?: string } | undefined)?.text;
        if (text) seen.add(text.replace(/\s+/g, ' ').trim());
      };
      const originalPrepare = DatabaseSync.prototype.prepare;
      const originalQuery = pg.Client.prototype.query as (...a: unknown[]) => unknown;
      const prepare = mock.method(DatabaseSync.prototype, 'prepare', function (this: DatabaseSync, sql: string) {
        record(sql);
        return originalPrepare.call(this, sql);
      });
      const query = mock.method(pg.Client.prototype, 'query', function (this: pg.Client, ...args: unknown[]) {
        record(args[0]);
        return originalQuery.apply(this, args);
      });
      // A page bound so small that every page's statements are read one by one after the page
      // query (src/store/sql.ts, inlineBytes), and an attachment whose size a page counts.
      const t = await startTestLrs(backend, { users: [ADMIN, TENANT_B], env: { LECTERN_MAX_PAGE_BYTES: '1024' } });
      try {
        const agent = enc(JSON.stringify({ mbox: 'mailto:l@example.com' }));
        const activity = enc('http://example.com/act');
        const attachment = { usageType: 'http://example.com/u', display: { en: 'a' }, contentType: 'text/plain', length: 1, sha2: 'a'.repeat(64), fileUrl: 'http://example.com/f' };
        const [id] = await (
          await t.fetch('/xAPI/statements', jsonInit('POST', statement({ object: { id: 'http://example.com/act', definition: { name: { en: 'x' } } } }), { user: TENANT_B }))
        ).json();
        await t.fetch(
          '/xAPI/statements',
          jsonInit('POST', statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id } }), { user: TENANT_B }),
        );
        // The newest: first on the `mine` page below (its attachment's size is read).
        assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ attachments: [attachment] }), { user: TENANT_B }))).status, 200);
        for (const q of [
          `statementId=${id}`,
          `voidedStatementId=${id}`,
          `agent=${agent}`,
          `activity=${activity}&related_activities=true`,
          'verb=http%3A%2F%2Fexample.com%2Fv&since=2020-01-01T00:00:00Z&until=2100-01-01T00:00:00Z',
          'mine=true&format=canonical&attachments=true',
          'limit=1',
        ]) {
          await t.fetch(`/xAPI/statements?${q}`, { user: TENANT_B });
        }
        for (const base of [
          `/xAPI/activities/state?activityId=${activity}&agent=${agent}`,
          `/xAPI/activities/profile?activityId=${activity}`,
          `/xAPI/agents/profile?agent=${agent}`,
        ]) {
          const one = `${base}&${base.includes('state') ? 'stateId' : 'profileId'}=d`;
          await t.fetch(one, jsonInit('PUT', { a: 1 }, { user: TENANT_B, headers: { 'if-none-match': '*' } }));
          await t.fetch(one, jsonInit('POST', { b: 1 }, { user: TENANT_B }));
          await t.fetch(one, { user: TENANT_B });
          await t.fetch(`${base}&since=2020-01-01T00:00:00Z`, { user: TENANT_B });
          await t.fetch(base, { user: TENANT_B });
          await t.fetch(one, { method: 'DELETE', user: TENANT_B });
          if (base.includes('state')) await t.fetch(base, { method: 'DELETE', user: TENANT_B });
        }
        await t.fetch(`/xAPI/activities?activityId=${activity}`, { user: TENANT_B });
      } finally {
        prepare.mock.restore();
        query.mock.restore();
        await t.close();
      }
      const data = [...seen].filter((sql) => DATA_TABLE.test(sql) && !/^CREATE |schema_migrations/i.test(sql));
      // sqlite-threads prepares its writes and statement pages on its threads (unseen here): the
      // same SqliteStore and readPage code whose SQL the `sqlite` run checks in full.
      const least = backend === sqliteThreadBackend ? 5 : 10;
      assert.ok(data.length >= least, `the store ran its queries (${data.length} seen)`);
      const missing = data.filter((sql) => !/\btenant\b/.test(sql) && !TENANTLESS.some((re) => re.test(sql)));
      assert.deepEqual(missing, [], 'queries without the tenant key');
    });
  });
}
