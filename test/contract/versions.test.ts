/**
 * xAPI 2.0 beside 1.0.3 on one server and one store, through HTTP, on every backend: each rule
 * where the versions differ is sent under both (the same request, two answers).
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { BACKENDS, jsonInit, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';

const V1 = '1.0.3';
const V2 = '2.0.0';
const enc = encodeURIComponent;
const PLAYER = { objectType: 'Agent', mbox: 'mailto:player-1@example.com' };
const TEAM = { objectType: 'Group', mbox: 'mailto:team-1@example.com', member: [{ objectType: 'Agent', mbox: 'mailto:member-1@example.com' }] };
const contextAgents = [{ objectType: 'contextAgent', agent: PLAYER, relevantTypes: ['https://example.com/types/player'] }];
const contextGroups = [{ objectType: 'contextGroup', group: TEAM, relevantTypes: ['https://example.com/types/team'] }];
const VOIDED = 'http://adlnet.gov/expapi/verbs/voided';

for (const backend of BACKENDS) {
  describe(`xAPI 2.0 beside 1.0.3 [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const post = (body: unknown, version: string) => t.fetch('/xAPI/statements', jsonInit('POST', body, { version }));
    const put = (id: string, body: unknown, version: string) => t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', body, { version }));
    const postRaw = (text: string, version: string) => t.fetch('/xAPI/statements', { method: 'POST', version, headers: { 'content-type': 'application/json' }, body: text });
    const get = async (id: string, version: string, qs = '') => {
      const res = await t.fetch(`/xAPI/statements?statementId=${id}${qs}`, { version });
      assert.equal(res.status, 200);
      return res.json();
    };
    const ids = async (qs: string, version: string): Promise<string[]> => {
      const res = await t.fetch(`/xAPI/statements?${qs}`, { version });
      assert.equal(res.status, 200, qs);
      return (await res.json()).statements.map((s: { id: string }) => s.id);
    };

    test('the response says the version the request named', async () => {
      assert.equal((await t.fetch('/xAPI/statements?limit=1', { version: '2.0' })).headers.get('x-experience-api-version'), V2);
      assert.equal((await t.fetch('/xAPI/statements?limit=1', { version: '1.0.1' })).headers.get('x-experience-api-version'), V1);
      const about = await (await t.fetch('/xAPI/about', { user: null, version: null })).json();
      assert.deepEqual(about.version, ['2.0.0', '1.0.3', '1.0.2', '1.0.1', '1.0.0']);
    });

    test('contextAgents/contextGroups: stored under 2.0 (statement and SubStatement), 400 under 1.0.3', async () => {
      const s = statement({ context: { contextAgents, contextGroups } });
      const under1 = await post(s, V1);
      assert.equal(under1.status, 400);
      assert.match(JSON.stringify(await under1.json()), /contextAgents/);
      const [id] = await (await post(s, V2)).json();
      const got = await get(id, V2);
      assert.deepEqual(got.context.contextAgents, contextAgents);
      assert.deepEqual(got.context.contextGroups, contextGroups);
      const sub = statement({ object: { objectType: 'SubStatement', ...statement({ context: { contextAgents } }) } });
      assert.equal((await post(sub, V1)).status, 400);
      assert.equal((await post(sub, V2)).status, 200);
    });

    test('contextAgents/contextGroups are validated strictly under 2.0', async () => {
      const bad: unknown[] = [
        { contextAgents: [{ objectType: 'Agent', agent: PLAYER }] },
        { contextAgents: [{ agent: PLAYER }] },
        { contextAgents: [{ objectType: 'contextAgent', agent: { key: 'x' } }] },
        { contextAgents: [{ objectType: 'contextAgent', agent: PLAYER, relevantTypes: [] }] },
        { contextAgents: [{ objectType: 'contextAgent', agent: PLAYER, relevantTypes: ['abc'] }] },
        { contextAgents: [{ objectType: 'contextAgent', agent: PLAYER, extra: 1 }] },
        { contextAgents: { objectType: 'contextAgent', agent: PLAYER } },
        { contextGroups: [{ objectType: 'contextGroup', group: PLAYER }] },
        { contextGroups: [{ objectType: 'contextGroup', agent: TEAM }] },
      ];
      for (const context of bad) {
        const res = await post(statement({ context }), V2);
        assert.equal(res.status, 400, JSON.stringify(context));
        assert.equal((await res.json()).detail[0].loc[1], 'context');
      }
    });

    test('related_agents finds context agents and groups (and members); the plain agent filter does not', async () => {
      const act = `http://example.com/activities/${randomUUID()}`;
      const [id] = await (await post(statement({ object: { id: act }, context: { contextAgents, contextGroups } }), V2)).json();
      const [subId] = await (await post(statement({ object: { objectType: 'SubStatement', ...statement({ object: { id: act }, context: { contextAgents } }) } }), V2)).json();
      for (const who of [PLAYER, { mbox: TEAM.mbox, objectType: 'Group' }, TEAM.member[0]]) {
        const q = `agent=${enc(JSON.stringify(who))}`;
        assert.deepEqual(await ids(`${q}&activity=${enc(act)}&related_activities=true&related_agents=true`, V2), who === PLAYER ? [subId, id] : [id]);
        assert.deepEqual(await ids(`${q}&activity=${enc(act)}&related_activities=true`, V2), []);
        // A 1.0.3 client queries the same store.
        assert.ok((await ids(`${q}&related_agents=true`, V1)).includes(id));
      }
    });

    test('duplicate properties: 400 under 2.0 (anywhere), the last one kept under 1.0.3', async () => {
      const text = '{"actor":{"mbox":"mailto:a@example.com","mbox":"mailto:b@example.com"},"verb":{"id":"http://example.com/v"},"object":{"id":"http://example.com/o"}}';
      const res = await postRaw(text, V2);
      assert.equal(res.status, 400);
      const detail = (await res.json()).detail[0];
      assert.deepEqual(detail.loc, ['body', 'actor', 'mbox']);
      assert.equal(detail.type, 'value_error.duplicate_key');
      const nested =
        '[{"actor":{"mbox":"mailto:a@example.com"},"verb":{"id":"http://example.com/v"},"object":{"id":"http://example.com/o"},"result":{"extensions":{"http://example.com/x":{"k":1,"k":2}}}}]';
      assert.equal((await postRaw(nested, V2)).status, 400, 'inside extensions too');
      assert.equal((await postRaw('[{"a":1},{"a":1}]', V2)).status, 400, 'a repeated key in sibling objects is no duplicate: the 400 is for the statements');
      const ok = await postRaw(text, V1);
      assert.equal(ok.status, 200);
      const [id] = await ok.json();
      assert.equal((await get(id, V1)).actor.mbox, 'mailto:b@example.com');
    });

    test('properties outside extensions that the version does not define are a 400 under both', async () => {
      for (const v of [V1, V2]) {
        for (const extra of [
          { foo: 1 },
          { verb: { id: 'http://example.com/v', foo: 1 } },
          { context: { contextActivities: { foo: [] } } },
          { result: { score: { raw: 1, foo: 2 } } },
        ]) {
          const res = await post(statement(extra), v);
          assert.equal(res.status, 400, `${v} ${JSON.stringify(extra)}`);
          assert.equal((await res.json()).detail[0].type, 'value_error.extra');
        }
        assert.equal((await post(statement({ result: { extensions: { 'http://example.com/x': { anything: { goes: [null] } } } } }), v)).status, 200, v);
      }
    });

    test('a missing version becomes 2.0.0 under 2.0 and 1.0.0 under 1.0.3; version 2.0.x only under 2.0', async () => {
      const [a] = await (await post(statement(), V2)).json();
      const [b] = await (await post(statement(), V1)).json();
      assert.equal((await get(a, V2)).version, '2.0.0');
      assert.equal((await get(b, V2)).version, '1.0.0');
      assert.equal((await post(statement({ version: '2.0.0' }), V1)).status, 400);
      const [c] = await (await post(statement({ version: '2.0.0' }), V2)).json();
      assert.equal((await get(c, V2)).version, '2.0.0');
      assert.equal((await post(statement({ version: '1.0.3' }), V2)).status, 200);
      assert.equal((await post(statement({ version: '2.1.0' }), V2)).status, 400);
    });

    test('a 2.0 statement is served to 1.0.3 clients as stored by default', async () => {
      const [id] = await (await post(statement({ context: { contextAgents } }), V2)).json();
      const got = await get(id, V1);
      assert.equal(got.version, '2.0.0');
      assert.deepEqual(got.context.contextAgents, contextAgents);
    });

    test('timestamps with an offset are stored in UTC under 2.0, as sent under 1.0.3; both compare as instants', async () => {
      const ts = '2023-05-18T07:32:34.804123+02:00';
      const a = randomUUID();
      assert.equal((await put(a, statement({ timestamp: ts }), V2)).status, 204);
      assert.equal((await get(a, V2)).timestamp, '2023-05-18T05:32:34.804123Z');
      const sub = randomUUID();
      assert.equal((await put(sub, statement({ object: { objectType: 'SubStatement', ...statement({ timestamp: '2023-05-18T00:00:00-05:00' }) } }), V2)).status, 204);
      assert.equal((await get(sub, V2)).object.timestamp, '2023-05-18T05:00:00Z');
      const b = randomUUID();
      assert.equal((await put(b, statement({ timestamp: ts }), V1)).status, 204);
      assert.equal((await get(b, V1)).timestamp, ts);
      // Re-sending with the original offset is the same statement (no 409).
      assert.equal((await put(a, statement({ timestamp: ts }), V2)).status, 204);
      assert.equal((await put(b, statement({ timestamp: '2023-05-18T05:32:34.804123Z' }), V1)).status, 204);
    });

    test('durations finer than 0.01 s: compared at 0.01 s under 2.0, exactly under 1.0.3', async () => {
      const withDuration = (d: string) => statement({ result: { duration: d } });
      const a = randomUUID();
      assert.equal((await put(a, withDuration('PT1.2345S'), V2)).status, 204);
      assert.equal((await put(a, withDuration('PT1.23S'), V2)).status, 204, 'the same statement at 0.01 s');
      assert.equal((await put(a, withDuration('PT1.24S'), V2)).status, 409);
      const b = randomUUID();
      assert.equal((await put(b, withDuration('PT1.2345S'), V1)).status, 204);
      assert.equal((await put(b, withDuration('PT1.23S'), V1)).status, 409);
    });

    test('a future timestamp is accepted; voiding a statement the LRS does not have is accepted', async () => {
      for (const v of [V1, V2]) {
        const future = new Date(Date.now() + 365 * 86_400_000).toISOString();
        assert.equal((await post(statement({ timestamp: future }), v)).status, 200, v);
        const unknown = randomUUID();
        const res = await post(statement({ verb: { id: VOIDED }, object: { objectType: 'StatementRef', id: unknown } }), v);
        assert.equal(res.status, 200, v);
        // The target arriving later is voided on arrival.
        assert.equal((await put(unknown, statement(), v)).status, 204);
        assert.equal((await t.fetch(`/xAPI/statements?statementId=${unknown}`, { version: v })).status, 404);
      }
    });

    test('Last-Modified on statement GETs: the newest stored returned', async () => {
      const act = `http://example.com/activities/${randomUUID()}`;
      await post(statement({ object: { id: act } }), V2);
      const [last] = await (await post(statement({ object: { id: act } }), V2)).json();
      const second = (iso: string) => Math.floor(Date.parse(iso) / 1000) * 1000;
      for (const asc of ['false', 'true']) {
        const res = await t.fetch(`/xAPI/statements?activity=${enc(act)}&ascending=${asc}`, { version: V2 });
        const newest = Math.max(...(await res.json()).statements.map((s: { stored: string }) => second(s.stored)));
        assert.equal(Date.parse(res.headers.get('last-modified') ?? ''), newest, asc);
      }
      const single = await t.fetch(`/xAPI/statements?statementId=${last}`, { version: V1 });
      assert.equal(Date.parse(single.headers.get('last-modified') ?? ''), second((await single.json()).stored));
      const none = await t.fetch(`/xAPI/statements?activity=${enc(`${act}/none`)}`, { version: V2 });
      assert.equal(none.headers.get('last-modified'), null, 'no statement, no Last-Modified');
    });

    test('format=ids reduces every Activity to {id}, inside a SubStatement too', async () => {
      const sub = {
        objectType: 'SubStatement',
        actor: TEAM,
        verb: { id: 'http://example.com/v' },
        object: { objectType: 'Activity', id: 'http://example.com/in-sub', definition: { name: { en: 'x' } } },
      };
      const [id] = await (await post(statement({ object: sub }), V1)).json();
      for (const v of [V1, V2]) {
        const got = await get(id, v, '&format=ids');
        assert.deepEqual(got.object.object, { id: 'http://example.com/in-sub' });
        assert.deepEqual(got.object.actor, { objectType: 'Group', mbox: TEAM.mbox });
        assert.deepEqual(got.object.verb, { id: 'http://example.com/v' });
      }
    });

    test('pit_id (Ralph) is accepted on queries', async () => {
      for (const v of [V1, V2]) assert.equal((await t.fetch('/xAPI/statements?limit=1&pit_id=abc', { version: v })).status, 200);
    });

    test('the alternate request syntax is refused under 2.0 and still works under 1.0.3', async () => {
      const form = (version: string) =>
        t.fetch('/xAPI/statements?method=GET', {
          method: 'POST',
          version: null,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ 'X-Experience-API-Version': version, Authorization: `Basic ${Buffer.from('admin:admin-pass').toString('base64')}`, limit: '1' }).toString(),
        });
      const refused = await form(V2);
      assert.equal(refused.status, 400);
      assert.match((await refused.json()).detail, /alternate request syntax/);
      assert.equal((await form(V1)).status, 200);
    });

    test('multipart/mixed without attachment parts, and fileUrl-only attachments, are accepted', async () => {
      const boundary = 'xyzzy';
      for (const v of [V1, V2]) {
        const body = `--${boundary}\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(statement())}\r\n--${boundary}--\r\n`;
        const res = await t.fetch('/xAPI/statements', { method: 'POST', version: v, headers: { 'content-type': `multipart/mixed; boundary=${boundary}` }, body });
        assert.equal(res.status, 200, v);
        const att = {
          usageType: 'http://example.com/u',
          display: { en: 'x' },
          contentType: 'text/plain',
          length: 3,
          sha2: createHash('sha256').update('abc').digest('hex'),
          fileUrl: 'http://example.com/abc.txt',
        };
        assert.equal((await post(statement({ attachments: [att] }), v)).status, 200, v);
      }
    });
  });

  describe(`documents under 1.0.3 and 2.0 [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const ACT = 'http://example.com/activities/doc';
    const AGENT = JSON.stringify({ mbox: 'mailto:doc@example.com' });
    const stateUrl = (id: string) => `/xAPI/activities/state?activityId=${enc(ACT)}&agent=${enc(AGENT)}&stateId=${id}`;
    const profileUrl = (id: string) => `/xAPI/activities/profile?activityId=${enc(ACT)}&profileId=${id}`;
    const write = (url: string, method: string, body: unknown, version: string, headers: Record<string, string> = {}) => t.fetch(url, jsonInit(method, body, { version, headers }));
    const read = async (url: string, version: string) => t.fetch(url, { version });

    test('a PUT with neither If-Match nor If-None-Match on an existing State: 409 under 2.0, replaces under 1.0.3', async () => {
      const url = stateUrl(randomUUID());
      assert.equal((await write(url, 'PUT', { a: 1 }, V2)).status, 204, 'a new State needs no header');
      const conflict = await write(url, 'PUT', { a: 2 }, V2);
      assert.equal(conflict.status, 409);
      assert.match((await conflict.json()).detail, /If-Match/);
      assert.deepEqual(await (await read(url, V2)).json(), { a: 1 }, 'unchanged');
      assert.equal((await write(url, 'PUT', { a: 3 }, V1)).status, 204);
      assert.deepEqual(await (await read(url, V1)).json(), { a: 3 });
    });

    test('a header-less PUT of a new profile document: 400 under 1.0.3, stored under 2.0; 409 on an existing one under both', async () => {
      const url = profileUrl(randomUUID());
      assert.equal((await write(url, 'PUT', { a: 1 }, V1)).status, 400);
      assert.equal((await write(url, 'PUT', { a: 1 }, V2)).status, 204);
      for (const v of [V1, V2]) assert.equal((await write(url, 'PUT', { a: 2 }, v)).status, 409, v);
    });

    test('If-Match on PUT, POST and DELETE: 412 on a mismatch and nothing changed; the right ETag works', async () => {
      for (const v of [V1, V2]) {
        const url = stateUrl(randomUUID());
        assert.equal((await write(url, 'PUT', { a: 1 }, v)).status, 204);
        const got = await read(url, v);
        const etag = got.headers.get('etag')!;
        assert.ok(got.headers.get('last-modified'), 'Last-Modified on a document GET');
        const wrong = { 'if-match': '"0000000000000000000000000000000000000000"' };
        assert.equal((await write(url, 'PUT', { a: 2 }, v, wrong)).status, 412, v);
        assert.equal((await write(url, 'POST', { b: 2 }, v, wrong)).status, 412, v);
        assert.equal((await t.fetch(url, { method: 'DELETE', version: v, headers: wrong })).status, 412, v);
        assert.deepEqual(await (await read(url, v)).json(), { a: 1 }, v);
        assert.equal((await write(url, 'POST', { b: 2 }, v, { 'if-match': etag })).status, 204, v);
        const merged = await read(url, v);
        assert.deepEqual(await merged.json(), { a: 1, b: 2 }, v);
        assert.equal((await t.fetch(url, { method: 'DELETE', version: v, headers: { 'if-match': merged.headers.get('etag')! } })).status, 204, v);
        assert.equal((await read(url, v)).status, 404, v);
      }
    });
  });

  test(`an existing database is upgraded in place: statement_agents.direct becomes role [${backend.name}]`, async () => {
    const t = await startTestLrs(backend);
    try {
      const act = `http://example.com/activities/${randomUUID()}`;
      const instructor = { mbox: 'mailto:instructor@example.com' };
      const [id] = await (await t.fetch('/xAPI/statements', jsonInit('POST', statement({ object: { id: act }, context: { instructor } }), { version: V1 }))).json();
      await t.lrs.close();
      // Back to the schema before this migration, as a database of the previous release has it.
      const rewind = ['ALTER TABLE statement_agents RENAME COLUMN role TO direct', `DELETE FROM schema_migrations WHERE version = ${backend.name.startsWith('sqlite') ? 3 : 4}`];
      if (backend.name.startsWith('sqlite')) {
        const db = new DatabaseSync(t.env.LECTERN_SQLITE_PATH);
        for (const sql of rewind) db.exec(sql);
        db.close();
      } else {
        const c = new pg.Client({ connectionString: t.env.LECTERN_POSTGRES_URL });
        await c.connect();
        for (const sql of rewind) await c.query(sql);
        await c.end();
      }
      await t.restart();
      const q = (who: unknown, related: boolean) =>
        t.fetch(`/xAPI/statements?agent=${enc(JSON.stringify(who))}&activity=${enc(act)}${related ? '&related_agents=true' : ''}`, { version: V2 });
      assert.deepEqual(
        (await (await q(instructor, true)).json()).statements.map((s: { id: string }) => s.id),
        [id],
        'the old related row',
      );
      assert.deepEqual((await (await q(instructor, false)).json()).statements, []);
      assert.equal((await (await q({ mbox: 'mailto:ben@example.com' }, false)).json()).statements[0].id, id, 'the old direct row');
      // New 2.0 statements are linked by role next to the old rows.
      const [id2] = await (
        await t.fetch(
          '/xAPI/statements',
          jsonInit('POST', statement({ object: { id: act }, context: { contextAgents: [{ objectType: 'contextAgent', agent: instructor }] } }), { version: V2 }),
        )
      ).json();
      assert.deepEqual(
        (await (await q(instructor, true)).json()).statements.map((s: { id: string }) => s.id),
        [id2, id],
      );
    } finally {
      await t.close();
    }
  });

  describe(`version settings [${backend.name}]`, () => {
    test('LECTERN_XAPI_STRICT_VERSION=true serves 2.0 statements to 1.0.3 clients converted', async () => {
      const t = await startTestLrs(backend, { env: { LECTERN_XAPI_STRICT_VERSION: 'true' } });
      try {
        const sub = statement({ context: { contextGroups } });
        const [id] = await (
          await t.fetch(
            '/xAPI/statements',
            jsonInit('POST', statement({ context: { contextAgents, registration: randomUUID() }, object: { objectType: 'SubStatement', ...sub } }), { version: V2 }),
          )
        ).json();
        const [old] = await (await t.fetch('/xAPI/statements', jsonInit('POST', statement({ version: '1.0.3' }), { version: V1 }))).json();
        const as1 = await (await t.fetch(`/xAPI/statements?statementId=${id}`, { version: V1 })).json();
        assert.equal(as1.version, '1.0.0');
        assert.equal(as1.context.contextAgents, undefined);
        assert.ok(as1.context.registration, 'the rest of the context stays');
        assert.equal(as1.object.context.contextGroups, undefined);
        const as2 = await (await t.fetch(`/xAPI/statements?statementId=${id}`, { version: V2 })).json();
        assert.equal(as2.version, '2.0.0');
        assert.deepEqual(as2.context.contextAgents, contextAgents);
        const list = await (await t.fetch('/xAPI/statements', { version: V1 })).json();
        assert.equal(list.statements.find((s: { id: string }) => s.id === id).version, '1.0.0');
        assert.equal(list.statements.find((s: { id: string }) => s.id === old).version, '1.0.3', 'a 1.0.3 statement is never converted');
      } finally {
        await t.close();
      }
    });

    test('LECTERN_XAPI_VERSIONS=1.0.3 serves 1.0.3 only', async () => {
      const t = await startTestLrs(backend, { env: { LECTERN_XAPI_VERSIONS: '1.0.3' } });
      try {
        const about = await t.fetch('/xAPI/about', { user: null, version: null });
        assert.deepEqual((await about.json()).version, ['1.0.3', '1.0.2', '1.0.1', '1.0.0']);
        assert.equal(about.headers.get('x-experience-api-version'), '1.0.3');
        const refused = await t.fetch('/xAPI/statements', { version: V2 });
        assert.equal(refused.status, 400);
        assert.match((await refused.json()).detail, /1\.0\.3/);
        assert.equal((await t.fetch('/xAPI/statements', { version: V1 })).status, 200);
      } finally {
        await t.close();
      }
    });
  });
}
