/**
 * Scopes (xAPI-Communication §4.2) enforced on every route and method through HTTP: 403 naming the
 * scope, nothing stored; implications; `define`; `statements/read/mine` and `mine=true` hiding
 * other authorities' statements everywhere; LECTERN_LRS_RESTRICT_BY_SCOPES/_BY_AUTHORITY.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const user = (username: string, scopes: string[]): TestUser => ({ username, password: `${username}-pw`, scopes, agent: { mbox: `mailto:${username}@example.com` } });
const WRITER = user('writer', ['statements/write']);
const READER = user('reader', ['statements/read']);
const MINE = user('mine', ['statements/read/mine', 'statements/write']);
const STATE = user('state', ['state']);
const STATE_READ = user('state-read', ['state/read']);
const STATE_WRITE = user('state-write', ['state/write']);
const PROFILE = user('profile', ['profile']);
const PROFILE_READ = user('profile-read', ['profile/read']);
const ALL_READ = user('all-read', ['all/read']);
const DEFINER = user('definer', ['statements/write', 'define']);
const NOBODY = user('nobody', []);
const USERS = [ADMIN, WRITER, READER, MINE, STATE, STATE_READ, STATE_WRITE, PROFILE, PROFILE_READ, ALL_READ, DEFINER, NOBODY];

const enc = encodeURIComponent;
const ACTIVITY = 'http://example.com/activities/scoped';
const AGENT = JSON.stringify({ mbox: 'mailto:learner@example.com' });
const STATE_URL = `/xAPI/activities/state?activityId=${enc(ACTIVITY)}&agent=${enc(AGENT)}&stateId=s1`;
const ACT_PROFILE_URL = `/xAPI/activities/profile?activityId=${enc(ACTIVITY)}&profileId=p1`;
const AGENT_PROFILE_URL = `/xAPI/agents/profile?agent=${enc(AGENT)}&profileId=p1`;

interface Call {
  name: string;
  method: string;
  path: string;
  body?: () => unknown;
  headers?: Record<string, string>;
  scope: string;
}

/** Every route and method with the scope it needs. */
const CALLS: Call[] = [
  { name: 'GET statements', method: 'GET', path: '/xAPI/statements', scope: 'statements/read/mine' },
  { name: 'HEAD statements', method: 'HEAD', path: '/xAPI/statements', scope: 'statements/read/mine' },
  { name: 'POST statements', method: 'POST', path: '/xAPI/statements', body: () => statement(), scope: 'statements/write' },
  { name: 'PUT statements', method: 'PUT', path: `/xAPI/statements?statementId=${randomUUID()}`, body: () => statement(), scope: 'statements/write' },
  { name: 'GET state', method: 'GET', path: STATE_URL, scope: 'state/read' },
  { name: 'HEAD state', method: 'HEAD', path: STATE_URL, scope: 'state/read' },
  { name: 'PUT state', method: 'PUT', path: STATE_URL, body: () => ({ a: 1 }), scope: 'state/write' },
  { name: 'POST state', method: 'POST', path: STATE_URL, body: () => ({ b: 2 }), scope: 'state/write' },
  { name: 'DELETE state', method: 'DELETE', path: STATE_URL, scope: 'state/write' },
  { name: 'GET activity profile', method: 'GET', path: ACT_PROFILE_URL, scope: 'profile/read' },
  { name: 'PUT activity profile', method: 'PUT', path: ACT_PROFILE_URL, body: () => ({ a: 1 }), headers: { 'if-none-match': '*' }, scope: 'profile/write' },
  { name: 'POST activity profile', method: 'POST', path: ACT_PROFILE_URL, body: () => ({ b: 1 }), scope: 'profile/write' },
  { name: 'DELETE activity profile', method: 'DELETE', path: ACT_PROFILE_URL, scope: 'profile/write' },
  { name: 'GET agent profile', method: 'GET', path: AGENT_PROFILE_URL, scope: 'profile/read' },
  { name: 'PUT agent profile', method: 'PUT', path: AGENT_PROFILE_URL, body: () => ({ a: 1 }), headers: { 'if-none-match': '*' }, scope: 'profile/write' },
  { name: 'POST agent profile', method: 'POST', path: AGENT_PROFILE_URL, body: () => ({ b: 1 }), scope: 'profile/write' },
  { name: 'DELETE agent profile', method: 'DELETE', path: AGENT_PROFILE_URL, scope: 'profile/write' },
  { name: 'GET activities', method: 'GET', path: `/xAPI/activities?activityId=${enc(ACTIVITY)}`, scope: 'statements/read' },
  { name: 'GET agents', method: 'GET', path: `/xAPI/agents?agent=${enc(AGENT)}`, scope: 'statements/read' },
];

/** Which of CALLS' scopes each user holds, implications applied (what the test expects, written out). */
const HOLDS: Record<string, string[]> = {
  admin: ['statements/read/mine', 'statements/read', 'statements/write', 'state/read', 'state/write', 'profile/read', 'profile/write'],
  writer: ['statements/write'],
  reader: ['statements/read', 'statements/read/mine'],
  mine: ['statements/read/mine', 'statements/write'],
  state: ['state/read', 'state/write'],
  'state-read': ['state/read'],
  'state-write': ['state/write'],
  profile: ['profile/read', 'profile/write'],
  'profile-read': ['profile/read'],
  'all-read': ['statements/read', 'statements/read/mine', 'state/read', 'profile/read'],
  definer: ['statements/write'],
  nobody: [],
};

const send = (t: TestLrs, c: Call, u: TestUser) =>
  c.body ? t.fetch(c.path, jsonInit(c.method, c.body(), { user: u, headers: c.headers })) : t.fetch(c.path, { method: c.method, user: u, headers: c.headers });

/** What a write call could have changed, as the admin sees it: the newest statement, or the document. */
async function probe(t: TestLrs, c: Call): Promise<string> {
  if (c.path.startsWith('/xAPI/statements')) return JSON.stringify((await (await t.fetch('/xAPI/statements?limit=1')).json()).statements[0]?.id ?? null);
  const res = await t.fetch(c.path);
  return `${res.status} ${res.headers.get('etag')}`;
}

/** Everything stored, as the admin sees it (the newest statement and the three documents). */
const snapshot = async (t: TestLrs): Promise<string> => (await Promise.all(CALLS.filter((c) => c.method === 'PUT').map((c) => probe(t, c)))).join('|');

for (const backend of BACKENDS) {
  describe(`scopes [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: USERS });
    });
    after(async () => t?.close());

    test('every route and method needs its scope: 403 naming it and nothing stored, otherwise not 403', async () => {
      // DEFINER holds what WRITER does, STATE_WRITE the other half of STATE_READ: left out for time.
      for (const u of USERS.filter((x) => x !== DEFINER && x !== STATE_WRITE)) {
        for (const c of CALLS) {
          const allowed = HOLDS[u.username].includes(c.scope);
          const write = !['GET', 'HEAD'].includes(c.method);
          const before = !allowed && write ? await probe(t, c) : '';
          const res = await send(t, c, u);
          if (allowed) {
            assert.notEqual(res.status, 403, `${u.username}: ${c.name}`);
            assert.ok(res.status < 500, `${u.username}: ${c.name} → ${res.status}`);
            await res.arrayBuffer();
            continue;
          }
          assert.equal(res.status, 403, `${u.username}: ${c.name}`);
          if (c.method !== 'HEAD') {
            assert.match(res.headers.get('content-type') ?? '', /application\/json/);
            const body = await res.json();
            assert.equal(body.scope, c.scope, `${u.username}: ${c.name}`);
            assert.ok(body.detail.includes(c.scope), body.detail);
          }
          if (write) assert.equal(await probe(t, c), before, `${u.username}: ${c.name} stored nothing`);
        }
      }
    });

    test('the alternate request syntax is authorised by the method it carries', async () => {
      const before = await snapshot(t);
      const form = new URLSearchParams({ 'Content-Type': 'application/json', content: JSON.stringify(statement()) });
      const res = await t.fetch('/xAPI/statements?method=POST', {
        method: 'POST',
        user: READER,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      });
      assert.equal(res.status, 403);
      assert.equal((await res.json()).scope, 'statements/write');
      assert.equal(await snapshot(t), before);
    });

    test('whoami needs only authentication and shows the scopes as held', async () => {
      for (const u of [NOBODY, STATE, MINE]) {
        const res = await t.fetch('/whoami', { user: u, version: null });
        assert.equal(res.status, 200);
        assert.deepEqual((await res.json()).scopes, ['authenticated', ...u.scopes]);
      }
    });

    test('define: without it a statement is stored but leaves the canonical Activity definition alone', async () => {
      const id = `http://example.com/activities/defined-${randomUUID()}`;
      const withDefinition = (name: string) => statement({ object: { objectType: 'Activity', id, definition: { name: { 'en-US': name } } } });
      const [sid] = await (await t.fetch('/xAPI/statements', jsonInit('POST', withDefinition('by writer'), { user: WRITER }))).json();
      const stored = await (await t.fetch(`/xAPI/statements?statementId=${sid}`)).json();
      assert.deepEqual(stored.object.definition, { name: { 'en-US': 'by writer' } }, 'the statement itself is kept as sent');
      assert.deepEqual(await (await t.fetch(`/xAPI/activities?activityId=${enc(id)}`)).json(), { objectType: 'Activity', id });
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', withDefinition('by definer'), { user: DEFINER }))).status, 200);
      assert.deepEqual((await (await t.fetch(`/xAPI/activities?activityId=${enc(id)}`)).json()).definition, { name: { 'en-US': 'by definer' } });
      // A later statement without define cannot redefine it either.
      await t.fetch('/xAPI/statements', jsonInit('POST', withDefinition('redefined by writer'), { user: WRITER }));
      assert.deepEqual((await (await t.fetch(`/xAPI/activities?activityId=${enc(id)}`)).json()).definition, { name: { 'en-US': 'by definer' } });
    });
  });

  describe(`statements/read/mine and mine=true [${backend.name}]`, () => {
    let t: TestLrs;
    const verb = `http://example.com/verbs/mine-${randomUUID()}`;
    const learner = { mbox: `mailto:learner-${randomUUID()}@example.com` };
    const ids: Record<string, string> = {};
    const attachment = (text: string) => {
      const content = Buffer.from(text);
      const sha2 = createHashHex(content);
      return { sha2, content };
    };
    const postMultipart = async (u: TestUser, s: Record<string, unknown>, data: { sha2: string; content: Buffer }) => {
      const boundary = 'b0undary';
      const body = Buffer.concat([
        Buffer.from(
          `--${boundary}\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(s)}\r\n--${boundary}\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: binary\r\nX-Experience-API-Hash: ${data.sha2}\r\n\r\n`,
        ),
        data.content,
        Buffer.from(`\r\n--${boundary}--\r\n`),
      ]);
      const res = await t.fetch('/xAPI/statements', { method: 'POST', user: u, headers: { 'content-type': `multipart/mixed; boundary=${boundary}` }, body });
      assert.equal(res.status, 200, await res.clone().text());
      return ((await res.json()) as string[])[0];
    };
    const withAttachment = (sha2: string, length: number) =>
      statement({
        actor: learner,
        verb: { id: verb },
        attachments: [{ usageType: 'http://example.com/usage', display: { 'en-US': 'a' }, contentType: 'text/plain', length, sha2 }],
      });
    const post = async (u: TestUser, s: Record<string, unknown>) => {
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', s, { user: u }));
      assert.equal(res.status, 200);
      return ((await res.json()) as string[])[0];
    };
    const list = async (u: TestUser, query: string) => {
      const out: string[] = [];
      let url = `/xAPI/statements?${query}`;
      for (;;) {
        const res = await t.fetch(url, { user: u });
        assert.equal(res.status, 200);
        const body = await res.json();
        out.push(...body.statements.map((s: { id: string }) => s.id));
        if (!body.more) return out;
        url = body.more;
      }
    };

    before(async () => {
      t = await startTestLrs(backend, { users: USERS });
      const mineData = attachment('mine attachment');
      const adminData = attachment('admin attachment');
      ids.mine1 = await postMultipart(MINE, withAttachment(mineData.sha2, mineData.content.length), mineData);
      ids.admin1 = await postMultipart(ADMIN, withAttachment(adminData.sha2, adminData.content.length), adminData);
      ids.mine2 = await post(MINE, statement({ actor: learner, verb: { id: verb } }));
      ids.admin2 = await post(ADMIN, statement({ actor: learner, verb: { id: verb } }));
      // The admin voids one of its own statements; the mine user voids one of its own.
      // Voided statements carry another verb: the voiding statements would match `verb` through their StatementRef.
      ids.adminVoided = await post(ADMIN, statement({ verb: { id: `${verb}-voided` } }));
      await post(ADMIN, statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: ids.adminVoided } }));
      ids.mineVoided = await post(MINE, statement({ verb: { id: `${verb}-voided` } }));
      await post(MINE, statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: ids.mineVoided } }));
      // The mine user refers to the admin's statement (which has the learner as actor).
      ids.mineRef = await post(MINE, statement({ actor: { mbox: 'mailto:someone@example.com' }, verb: { id: verb }, object: { objectType: 'StatementRef', id: ids.admin2 } }));
    });
    after(async () => t?.close());

    test("by id: another authority's statement is 404, voided ones too; its own are found", async () => {
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${ids.admin1}`, { user: MINE })).status, 404);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${ids.mine1}`, { user: MINE })).status, 200);
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${ids.adminVoided}`, { user: MINE })).status, 404);
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${ids.mineVoided}`, { user: MINE })).status, 200);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${ids.admin1}&attachments=true`, { user: MINE })).status, 404);
      // A full reader sees both.
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${ids.mine1}`, { user: READER })).status, 200);
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${ids.adminVoided}`, { user: READER })).status, 200);
    });

    test('lists, every page reached through more, and mine=true for a full reader', async () => {
      const own = await list(MINE, `verb=${enc(verb)}&limit=1`);
      assert.deepEqual(own, [ids.mineRef, ids.mine2, ids.mine1]);
      assert.deepEqual(await list(MINE, `verb=${enc(verb)}&mine=false&limit=2`), own, 'mine=false does not lift the restriction');
      assert.deepEqual(await list(READER, `verb=${enc(verb)}&mine=true&limit=1`), [], 'the reader is the authority of none');
      assert.deepEqual(await list(ADMIN, `verb=${enc(verb)}&mine=true&limit=1`), [ids.admin2, ids.admin1]);
      const everything = await list(READER, `verb=${enc(verb)}&limit=2`);
      assert.deepEqual(everything, [ids.mineRef, ids.admin2, ids.mine2, ids.admin1, ids.mine1]);
    });

    test('a "more" link made for one user gives another restricted user nothing of the first', async () => {
      const first = await (await t.fetch(`/xAPI/statements?verb=${enc(verb)}&limit=1`, { user: READER })).json();
      assert.ok(first.more);
      const next = await (await t.fetch(first.more, { user: MINE })).json();
      for (const s of next.statements) assert.equal(s.authority.mbox, 'mailto:mine@example.com');
    });

    test("StatementRef targeting never reveals that another authority's statement matches", async () => {
      const byLearner = `agent=${enc(JSON.stringify(learner))}`;
      assert.deepEqual(await list(MINE, byLearner), [ids.mine2, ids.mine1], "mineRef targets the admin's statement: not a match");
      assert.deepEqual(await list(READER, byLearner), [ids.mineRef, ids.admin2, ids.mine2, ids.admin1, ids.mine1]);
    });

    test("attachments=true serves only the attachments of the caller's statements", async () => {
      const res = await t.fetch(`/xAPI/statements?verb=${enc(verb)}&attachments=true`, { user: MINE });
      assert.equal(res.status, 200);
      const text = Buffer.from(await res.arrayBuffer()).toString('utf8');
      assert.ok(text.includes('mine attachment'));
      assert.ok(!text.includes('admin attachment'));
      const all = Buffer.from(await (await t.fetch(`/xAPI/statements?verb=${enc(verb)}&attachments=true`, { user: READER })).arrayBuffer()).toString('utf8');
      assert.ok(all.includes('admin attachment'));
    });
  });

  describe(`LECTERN_LRS_RESTRICT_BY_SCOPES=false and LECTERN_LRS_RESTRICT_BY_AUTHORITY=true [${backend.name}]`, () => {
    test('without scope enforcement any authenticated user may do anything in its store, define included', async () => {
      const t = await startTestLrs(backend, { users: USERS, env: { LECTERN_LRS_RESTRICT_BY_SCOPES: 'false' } });
      try {
        for (const c of CALLS) {
          const res = await send(t, c, NOBODY);
          assert.notEqual(res.status, 403, c.name);
          assert.ok(res.status < 500, c.name);
        }
        const id = `http://example.com/activities/free-${randomUUID()}`;
        const s = statement({ object: { id, definition: { name: { 'en-US': 'free' } } } });
        assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', s, { user: NOBODY }))).status, 200);
        assert.deepEqual((await (await t.fetch(`/xAPI/activities?activityId=${enc(id)}`, { user: NOBODY })).json()).definition, { name: { 'en-US': 'free' } });
        const list = await (await t.fetch('/xAPI/statements', { user: WRITER })).json();
        assert.ok(list.statements.length >= 2, 'and read what others stored');
      } finally {
        await t.close();
      }
    });

    test("restriction by authority hides other authorities' statements even from `all` users", async () => {
      const t = await startTestLrs(backend, { users: USERS, env: { LECTERN_LRS_RESTRICT_BY_AUTHORITY: 'true' } });
      try {
        const [mine] = await (await t.fetch('/xAPI/statements', jsonInit('POST', statement(), { user: MINE }))).json();
        const [admin] = await (await t.fetch('/xAPI/statements', jsonInit('POST', statement(), { user: ADMIN }))).json();
        const ids = (u: TestUser) => t.fetch('/xAPI/statements', { user: u }).then(async (r) => (await r.json()).statements.map((s: { id: string }) => s.id));
        assert.deepEqual(await ids(ADMIN), [admin]);
        assert.deepEqual(await ids(MINE), [mine]);
        assert.equal((await t.fetch(`/xAPI/statements?statementId=${mine}`, { user: ADMIN })).status, 404);
        assert.equal((await t.fetch(`/xAPI/statements?statementId=${admin}`, { user: ADMIN })).status, 200);
      } finally {
        await t.close();
      }
    });
  });
}

const createHashHex = (content: Buffer): string => createHash('sha256').update(content).digest('hex');
