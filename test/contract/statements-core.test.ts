/** Statements resource basics (PUT/POST/GET, conflicts, paging), through HTTP, on every backend. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { REPLICA_BACKENDS, jsonInit, OTHER, startTestLrs, statement, TENANT_B, type TestLrs } from '../helpers/lrs.ts';

for (const backend of REPLICA_BACKENDS) {
  describe(`statements core [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const getOne = async (id: string) => t.fetch(`/xAPI/statements?statementId=${id}`);
    const post = (body: unknown, extra = {}) => t.fetch('/xAPI/statements', jsonInit('POST', body, extra));
    const put = (id: string, body: unknown) => t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', body));

    test('PUT stores a statement: 204, then GET returns it with the LRS-set properties', async () => {
      const id = randomUUID();
      const res = await put(id, statement());
      assert.equal(res.status, 204);
      assert.equal(res.headers.get('x-experience-api-version'), '1.0.3');
      assert.equal(await res.text(), '');
      const got = await getOne(id);
      assert.equal(got.status, 200);
      assert.ok(got.headers.get('x-experience-api-consistent-through'));
      assert.ok(got.headers.get('last-modified'));
      const s = await got.json();
      assert.equal(s.id, id);
      assert.match(s.stored, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.equal(s.timestamp, s.stored, 'timestamp defaults to stored');
      assert.equal(s.version, '1.0.0');
      assert.deepEqual(s.authority, { objectType: 'Agent', mbox: 'mailto:admin@example.com' });
      assert.deepEqual(s.actor, statement().actor, 'stored exactly as received');
      assert.equal(new Date(got.headers.get('last-modified')!).getTime(), Math.floor(Date.parse(s.stored) / 1000) * 1000);
    });

    test('the trailing-slash path behaves the same', async () => {
      const id = randomUUID();
      assert.equal((await t.fetch(`/xAPI/statements/?statementId=${id}`, jsonInit('PUT', statement()))).status, 204);
      assert.equal((await t.fetch(`/xAPI/statements/?statementId=${id}`)).status, 200);
    });

    test('a client timestamp and version are kept; a client authority is replaced', async () => {
      const id = randomUUID();
      const sent = statement({ timestamp: '2020-01-02T03:04:05.678Z', version: '1.0.3', authority: { mbox: 'mailto:liar@example.com' } });
      assert.equal((await put(id, sent)).status, 204);
      const s = await (await getOne(id)).json();
      assert.equal(s.timestamp, '2020-01-02T03:04:05.678Z');
      assert.equal(s.version, '1.0.3');
      assert.equal(s.authority.mbox, 'mailto:admin@example.com');
    });

    test('PUT of the same id and content is a no-op 204; different content is 409 and changes nothing', async () => {
      const id = randomUUID();
      assert.equal((await put(id, statement())).status, 204);
      const first = await (await getOne(id)).json();
      assert.equal((await put(id, statement())).status, 204);
      const res = await put(id, statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/failed' } }));
      assert.equal(res.status, 409);
      assert.match((await res.json()).detail, new RegExp(id));
      assert.deepEqual(await (await getOne(id)).json(), first);
    });

    test('PUT: id in the body must match statementId; statementId is required and a UUID', async () => {
      const res = await put(randomUUID(), statement({ id: randomUUID() }));
      assert.equal(res.status, 400);
      // One statement, not a batch: no batch index in `loc`.
      assert.deepEqual((await res.json()).detail[0].loc, ['id']);
      const { actor: _drop, ...noActor } = statement();
      const invalid = await put(randomUUID(), { ...noActor, verb: { id: 'not an IRI' } });
      assert.equal(invalid.status, 400);
      assert.deepEqual(((await invalid.json()).detail as { loc: string[] }[]).map((d) => d.loc.join('.')).sort(), ['actor', 'verb.id']);
      const missing = await t.fetch('/xAPI/statements', jsonInit('PUT', statement()));
      assert.equal(missing.status, 400);
      assert.deepEqual((await missing.json()).detail[0].loc, ['query', 'statementId']);
      assert.equal((await put('not-a-uuid', statement())).status, 400);
      const same = randomUUID();
      assert.equal((await put(same, statement({ id: same }))).status, 204);
    });

    test('POST one statement or an array: 200 with the ids in order, generated where absent', async () => {
      const given = randomUUID();
      const res = await post([statement(), statement({ id: given }), statement()]);
      assert.equal(res.status, 200);
      const ids = await res.json();
      assert.equal(ids.length, 3);
      assert.equal(ids[1], given);
      for (const id of ids) assert.equal((await getOne(id)).status, 200);
      const single = await post(statement());
      assert.equal(single.status, 200);
      assert.equal((await single.json()).length, 1);
    });

    test('POST repeating a stored id with the same content includes it; a conflict stores nothing of the batch', async () => {
      const id = randomUUID();
      assert.equal((await post([statement({ id })])).status, 200);
      const fresh = randomUUID();
      const again = await post([statement({ id: fresh }), statement({ id })]);
      assert.equal(again.status, 200);
      assert.deepEqual(await again.json(), [fresh, id]);
      const fresh2 = randomUUID();
      const conflict = await post([statement({ id: fresh2 }), statement({ id, result: { success: true } })]);
      assert.equal(conflict.status, 409);
      assert.ok((await conflict.json()).detail);
      assert.equal((await getOne(fresh2)).status, 404, 'nothing from a rejected batch is stored');
    });

    test('concurrent batches: a conflicting one fails alone, every other one is stored whole', async () => {
      const taken = randomUUID();
      assert.equal((await post([statement({ id: taken })])).status, 200);
      const batches = Array.from({ length: 12 }, (_, i) =>
        i === 5 ? [statement({ id: randomUUID() }), statement({ id: taken, result: { success: false } })] : [statement({ id: randomUUID() }), statement({ id: randomUUID() })],
      );
      const responses = await Promise.all(batches.map((b) => post(b)));
      assert.deepEqual(
        responses.map((r) => r.status),
        batches.map((_, i) => (i === 5 ? 409 : 200)),
      );
      for (const [i, b] of batches.entries()) {
        for (const s of b) {
          if (s.id === taken) continue;
          assert.equal((await getOne(String(s.id))).status, i === 5 ? 404 : 200, `batch ${i}`);
        }
      }
    });

    test('a batch that repeats an id is a 400 and stores nothing', async () => {
      const id = randomUUID();
      const res = await post([statement({ id }), statement({ id })]);
      assert.equal(res.status, 400);
      assert.equal((await getOne(id)).status, 404);
    });

    test('bad input gets 400 with a detail that points at the problem', async () => {
      const malformed = await t.fetch('/xAPI/statements', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"actor": ' });
      assert.equal(malformed.status, 400);
      const m = await malformed.json();
      assert.deepEqual(m.detail[0].loc, ['body']);
      assert.match(m.detail[0].msg, /JSON/);

      const { actor: _drop, ...noActor } = statement();
      const missing = await post(noActor);
      assert.equal(missing.status, 400);
      assert.ok((await missing.json()).detail.some((d: { loc: unknown[] }) => JSON.stringify(d.loc) === JSON.stringify([0, 'actor'])));

      const second = await post([statement(), { ...noActor }]);
      assert.ok(
        (await second.json()).detail.some((d: { loc: unknown[] }) => d.loc[0] === 1),
        'loc carries the index in the batch',
      );

      const badId = await post(statement({ id: 'nope' }));
      assert.equal(badId.status, 400);
      assert.deepEqual((await badId.json()).detail[0].loc, [0, 'id']);

      const text = await t.fetch('/xAPI/statements', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' });
      assert.equal(text.status, 400);
      assert.ok((await text.json()).detail);
      const empty = await t.fetch('/xAPI/statements', { method: 'POST', headers: { 'content-type': 'application/json' } });
      assert.equal(empty.status, 400);
    });

    test('the X-Experience-API-Version header is required on xAPI resources and must be 1.0.x or 2.0.x', async () => {
      const none = await t.fetch('/xAPI/statements', { version: null });
      assert.equal(none.status, 400);
      assert.match((await none.json()).detail, /X-Experience-API-Version/);
      assert.equal(none.headers.get('x-experience-api-version'), '2.0.0');
      assert.equal((await t.fetch('/xAPI/statements', { version: '1.1.0' })).status, 400);
      assert.equal((await t.fetch('/xAPI/statements', { version: '0.95' })).status, 400);
      assert.equal((await t.fetch('/xAPI/statements', { version: '1.0' })).status, 200);
      assert.equal((await t.fetch('/xAPI/statements', { version: '1.0.1' })).status, 200);
      assert.equal((await t.fetch('/whoami', { version: null })).status, 200);
      assert.equal((await t.fetch('/xAPI/about', { version: null, user: null })).status, 200);
    });

    test('GET: unknown id is 404; unknown, miscased or malformed parameters are 400', async () => {
      const nf = await getOne(randomUUID());
      assert.equal(nf.status, 404);
      assert.ok(nf.headers.get('x-experience-api-consistent-through'), 'errors carry consistent-through too');
      for (const qs of ['foo=bar', 'Limit=1', 'statementId=nope', 'since=yesterday', 'limit=-1', 'limit=ten', 'agent=notjson', 'verb=notaniri', 'ascending=yes']) {
        const res = await t.fetch(`/xAPI/statements?${qs}`);
        assert.equal(res.status, 400, qs);
        const body = await res.json();
        assert.ok(Array.isArray(body.detail) && body.detail[0].loc[0] === 'query', qs);
      }
    });

    test('filters: agent, verb, activity, since (exclusive) and until (inclusive)', async () => {
      const who = `mailto:${randomUUID()}@example.com`;
      const verb = `http://example.com/verbs/${randomUUID()}`;
      const act = `http://example.com/activities/${randomUUID()}`;
      const ids = await (
        await post([
          statement({ actor: { mbox: who } }),
          statement({ verb: { id: verb } }),
          statement({ object: { id: act } }),
          statement({ actor: { mbox: who }, verb: { id: verb }, object: { id: act } }),
        ])
      ).json();
      const q = async (qs: string) => (await (await t.fetch(`/xAPI/statements?${qs}`)).json()).statements.map((s: { id: string }) => s.id).sort();
      assert.deepEqual(await q(`agent=${encodeURIComponent(JSON.stringify({ mbox: who }))}`), [ids[0], ids[3]].sort());
      assert.deepEqual(await q(`verb=${encodeURIComponent(verb)}`), [ids[1], ids[3]].sort());
      assert.deepEqual(await q(`activity=${encodeURIComponent(act)}`), [ids[2], ids[3]].sort());
      assert.deepEqual(await q(`agent=${encodeURIComponent(JSON.stringify({ mbox: who }))}&verb=${encodeURIComponent(verb)}&activity=${encodeURIComponent(act)}`), [ids[3]]);

      const s0 = await (await getOne(ids[0])).json();
      assert.deepEqual(await q(`verb=${encodeURIComponent(verb)}&until=${encodeURIComponent(s0.stored)}`), [ids[1], ids[3]].sort());
      assert.deepEqual(await q(`verb=${encodeURIComponent(verb)}&since=${encodeURIComponent(s0.stored)}`), []);
      const before = new Date(Date.parse(s0.stored) - 1).toISOString();
      assert.deepEqual(await q(`verb=${encodeURIComponent(verb)}&since=${encodeURIComponent(before)}`), [ids[1], ids[3]].sort());
    });

    test('tenants are isolated: a user with a target sees only its own store', async () => {
      const id = randomUUID();
      assert.equal((await put(id, statement())).status, 204);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, { user: TENANT_B })).status, 404);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, { user: OTHER })).status, 200);
      const res = await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ result: { success: false } }), { user: TENANT_B }));
      assert.equal(res.status, 204, 'the same id in another store is not a conflict');
    });
  });

  describe(`statements paging [${backend.name}]`, () => {
    let t: TestLrs;
    const verb = `http://example.com/verbs/paging-${randomUUID()}`;
    let ids: string[] = [];
    before(async () => {
      t = await startTestLrs(backend);
      const batch = Array.from({ length: 250 }, (_, i) => statement({ verb: { id: verb }, result: { response: String(i) } }));
      // Several requests, so stored times differ as well as positions.
      ids = [];
      for (let i = 0; i < 250; i += 50) ids.push(...(await (await t.fetch('/xAPI/statements', jsonInit('POST', batch.slice(i, i + 50)))).json()));
    });
    after(async () => t?.close());

    const walk = async (qs: string) => {
      const pages: string[][] = [];
      let next = `/xAPI/statements?${qs}`;
      while (next) {
        const res = await t.fetch(next);
        assert.equal(res.status, 200);
        const body = await res.json();
        pages.push(body.statements.map((s: { id: string }) => s.id));
        if (body.more) {
          assert.match(body.more, /^\/xAPI\/statements\?/);
          // Ralph clients follow `more` by its query string alone.
          next = `/xAPI/statements?${body.more.split('?')[1]}`;
        } else next = '';
        assert.ok(pages.length < 10);
      }
      return pages;
    };

    test('250 statements, limit=100: 3 full-then-partial pages, newest first, nothing missing or repeated', async () => {
      const pages = await walk(`verb=${encodeURIComponent(verb)}&limit=100`);
      assert.deepEqual(
        pages.map((p) => p.length),
        [100, 100, 50],
      );
      assert.deepEqual(pages.flat(), [...ids].reverse());
    });

    test('ascending=true pages oldest first', async () => {
      const pages = await walk(`verb=${encodeURIComponent(verb)}&limit=100&ascending=true`);
      assert.deepEqual(
        pages.map((p) => p.length),
        [100, 100, 50],
      );
      assert.deepEqual(pages.flat(), ids);
    });

    test('an exact multiple of the page size ends without an empty extra page', async () => {
      const pages = await walk(`verb=${encodeURIComponent(verb)}&limit=50`);
      assert.deepEqual(
        pages.map((p) => p.length),
        [50, 50, 50, 50, 50],
      );
    });

    test('limit=0 and a limit above the maximum give the server maximum; no limit gives 100', async () => {
      const body = async (qs: string) => (await (await t.fetch(`/xAPI/statements?verb=${encodeURIComponent(verb)}${qs}`)).json()).statements.length;
      assert.equal(await body('&limit=0'), t.config.maxSearchHits);
      assert.equal(await body('&limit=100000'), t.config.maxSearchHits);
      assert.equal(await body(''), 100);
      assert.equal(await body('&limit=7'), 7);
    });

    test('data survives a restart', async () => {
      await t.restart();
      const pages = await walk(`verb=${encodeURIComponent(verb)}&limit=100`);
      assert.equal(pages.flat().length, 250);
    });
  });
}
