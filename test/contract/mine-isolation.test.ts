/**
 * What a user restricted to its own statements (`statements/read/mine`, or anyone under
 * LECTERN_LRS_RESTRICT_BY_AUTHORITY) can learn of another authority's statements through reads
 * and writes inside one store, through HTTP, on every backend: canonical definitions (issue 27
 * item 8), attachment data declared by hash (item 7), PUT/POST of another's id and voiding
 * (item 10).
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { parseMultipartMixed } from '../../src/xapi/multipart.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const user = (username: string, scopes: string[]): TestUser => ({ username, password: `${username}-pw`, scopes, agent: { mbox: `mailto:${username}@example.com` } });
/** Two users restricted to their own statements, a full reader, a writer that may define activities. */
const OWNER = user('owner', ['statements/read/mine', 'statements/write']);
const MINE = user('mine', ['statements/read/mine', 'statements/write']);
const READER = user('reader', ['statements/read']);
const DEFINER = user('definer', ['statements/write', 'define']);
const USERS = [ADMIN, OWNER, MINE, READER, DEFINER];

const VOIDED = 'http://adlnet.gov/expapi/verbs/voided';
const sha256 = (data: string): string => createHash('sha256').update(data).digest('hex');
const enc = encodeURIComponent;

/** An attachment object for `data`; with a fileUrl it needs no part. */
const attachment = (data: string, fileUrl?: string): Record<string, unknown> => ({
  usageType: 'http://example.com/usage/report',
  display: { 'en-US': 'report' },
  contentType: 'text/plain',
  length: Buffer.byteLength(data),
  sha2: sha256(data),
  ...(fileUrl !== undefined && { fileUrl }),
});

/** A multipart/mixed POST of statements with the data of `datas`. */
function multipartPost(statements: unknown, datas: string[], u: TestUser): RequestInit & { user: TestUser } {
  const b = `b-${randomUUID()}`;
  const chunks = [Buffer.from(`--${b}\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(statements)}\r\n`)];
  for (const d of datas) {
    chunks.push(Buffer.from(`--${b}\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: binary\r\nX-Experience-API-Hash: ${sha256(d)}\r\n\r\n${d}\r\n`));
  }
  chunks.push(Buffer.from(`--${b}--`));
  return { method: 'POST', headers: { 'content-type': `multipart/mixed; boundary=${b}` }, body: new Uint8Array(Buffer.concat(chunks)), user: u };
}

async function post(t: TestLrs, u: TestUser, body: unknown): Promise<string> {
  const res = await t.fetch('/xAPI/statements', jsonInit('POST', body, { user: u }));
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as string[])[0];
}

/** The parts of an attachments=true answer: the JSON first, then one per attachment's data. */
async function parts(res: Response): Promise<{ json: unknown; data: Map<string, string> }> {
  assert.equal(res.status, 200);
  const all = parseMultipartMixed(res.headers.get('content-type')!, Buffer.from(await res.arrayBuffer()));
  const data = new Map(all.slice(1).map((p) => [p.headers['x-experience-api-hash'], p.body.toString('utf8')]));
  return { json: JSON.parse(all[0].body.toString('utf8')), data };
}

for (const backend of BACKENDS) {
  describe(`a mine user learns nothing of other authorities' statements [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: USERS });
    });
    after(async () => t?.close());

    test('format=canonical: its own statements with their own definitions, never ones other authorities gave (item 8)', async () => {
      const activity = `http://example.com/activities/canonical-${randomUUID()}`;
      const theirs = { name: { 'en-US': 'their name', de: 'ihr Name' }, extensions: { 'http://example.com/ext/secret': 'theirs' } };
      await post(t, DEFINER, statement({ object: { id: activity, definition: theirs } }));
      const own = await post(t, MINE, statement({ object: { id: activity, definition: { name: { 'en-US': 'my name', de: 'mein Name' } } } }));
      const german = { headers: { 'accept-language': 'de' } };
      const single = await (await t.fetch(`/xAPI/statements?statementId=${own}&format=canonical`, { user: MINE, ...german })).json();
      assert.deepEqual(single.object.definition, { name: { de: 'mein Name' } }, 'its own definition, one language');
      const list = await (await t.fetch(`/xAPI/statements?activity=${enc(activity)}&format=canonical`, { user: MINE, ...german })).json();
      assert.deepEqual(
        list.statements.map((s: { object: { definition: unknown } }) => s.object.definition),
        [{ name: { de: 'mein Name' } }],
      );
      // A full reader gets the canonical definition (the MINE user may not define one).
      const full = await (await t.fetch(`/xAPI/statements?statementId=${own}&format=canonical`, { user: READER, ...german })).json();
      assert.deepEqual(full.object.definition, { name: { de: 'ihr Name' }, extensions: theirs.extensions });
    });

    test("attachments by hash: declaring another authority's sha2 with a fileUrl gives no data (item 7)", async () => {
      const secret = `the owner's report ${randomUUID()}`;
      const hash = sha256(secret);
      const res = await t.fetch('/xAPI/statements', multipartPost([statement({ attachments: [attachment(secret)] })], [secret], OWNER));
      assert.equal(res.status, 200);
      const [carrier] = (await res.json()) as string[];
      const verb = `http://example.com/verbs/declared-${randomUUID()}`;
      const declared = await post(t, MINE, statement({ verb: { id: verb }, attachments: [attachment(secret, 'http://example.com/somewhere')] }));

      // Single and list reads: the statement as stored (the attachment object with its fileUrl), no part with the data.
      const single = await parts(await t.fetch(`/xAPI/statements?statementId=${declared}&attachments=true`, { user: MINE }));
      assert.equal((single.json as { attachments: { sha2: string }[] }).attachments[0].sha2, hash);
      assert.equal(single.data.size, 0);
      const list = await parts(await t.fetch(`/xAPI/statements?verb=${enc(verb)}&attachments=true`, { user: MINE }));
      assert.equal((list.json as { statements: unknown[] }).statements.length, 1);
      assert.equal(list.data.size, 0);
      const everything = Buffer.from(await (await t.fetch('/xAPI/statements?attachments=true&limit=0', { user: MINE })).arrayBuffer()).toString('utf8');
      assert.ok(!everything.includes(secret));

      // The owner still gets its data; a full reader gets it with either statement (it may read the carrier).
      assert.equal((await parts(await t.fetch(`/xAPI/statements?statementId=${carrier}&attachments=true`, { user: OWNER }))).data.get(hash), secret);
      assert.equal((await parts(await t.fetch(`/xAPI/statements?statementId=${declared}&attachments=true`, { user: READER }))).data.get(hash), secret);

      // Once the mine user has sent the data itself, it is its own to read, with either of its statements.
      const sent = await t.fetch('/xAPI/statements', multipartPost([statement({ attachments: [attachment(secret)] })], [secret], MINE));
      assert.equal(sent.status, 200);
      assert.equal((await parts(await t.fetch(`/xAPI/statements?statementId=${declared}&attachments=true`, { user: MINE }))).data.get(hash), secret);
    });

    test("PUT or POST of another authority's id: 409 whatever the content (item 10)", async () => {
      const id = randomUUID();
      const s = statement({ id, verb: { id: `http://example.com/verbs/${randomUUID()}` } });
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', s, { user: OWNER }))).status, 204);
      for (const body of [s, { ...s, result: { success: false } }]) {
        assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', body, { user: MINE }))).status, 409);
        assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', [body], { user: MINE }))).status, 409);
      }
      // Its own statement again: a no-op, as for anyone; the owner's is untouched.
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', s, { user: OWNER }))).status, 204);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, { user: OWNER })).status, 200);
    });

    test("voiding another authority's statement: 403 and nothing stored; its own, or by a full writer: voided (item 10)", async () => {
      const theirs = await post(t, OWNER, statement());
      const voiding = (target: string) => statement({ verb: { id: VOIDED }, object: { objectType: 'StatementRef', id: target } });
      const refused = await t.fetch('/xAPI/statements', jsonInit('POST', voiding(theirs), { user: MINE }));
      assert.equal(refused.status, 403);
      assert.match((await refused.json()).detail, /another authority/);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${theirs}`, { user: OWNER })).status, 200, 'not voided');
      const ownVoiding = randomUUID();
      const refusedPut = await t.fetch(`/xAPI/statements?statementId=${ownVoiding}`, jsonInit('PUT', voiding(theirs), { user: MINE }));
      assert.equal(refusedPut.status, 403);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${ownVoiding}`, { user: MINE })).status, 404, 'the voiding statement was not stored');

      const mine = await post(t, MINE, statement());
      await post(t, MINE, voiding(mine));
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${mine}`, { user: MINE })).status, 200);
      // The specification lets any writer void: one that may read every statement still does.
      await post(t, ADMIN, voiding(theirs));
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${theirs}`, { user: OWNER })).status, 200);
    });

    test("a mine user's voiding statement sent before its target voids only a statement of its own authority (item 10)", async () => {
      const voiding = (target: string) => statement({ verb: { id: VOIDED }, object: { objectType: 'StatementRef', id: target } });
      const [theirs, own, byAdmin] = [randomUUID(), randomUUID(), randomUUID()];
      // Voiding an id nobody has stored yet is accepted (the specification asks not to refuse it).
      await post(t, MINE, voiding(theirs));
      await post(t, MINE, voiding(own));
      await post(t, ADMIN, voiding(byAdmin));
      for (const [id, u] of [
        [theirs, OWNER],
        [own, MINE],
        [byAdmin, OWNER],
      ] as const) {
        assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ id }), { user: u }))).status, 204);
      }
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${theirs}`, { user: OWNER })).status, 200, "another authority's statement arrives unvoided");
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${own}`, { user: MINE })).status, 200, 'its own arrives voided');
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${byAdmin}`, { user: OWNER })).status, 200, "a full writer's voiding applies to anyone's");
    });
  });

  describe(`LECTERN_LRS_RESTRICT_BY_AUTHORITY=true: format=canonical and voiding [${backend.name}]`, () => {
    test("even an `all` user gets its own definitions, may not void another authority's statement, nor read the Activities and Agents views", async () => {
      const t = await startTestLrs(backend, { users: USERS, env: { LECTERN_LRS_RESTRICT_BY_AUTHORITY: 'true' } });
      try {
        const activity = `http://example.com/activities/restricted-${randomUUID()}`;
        const theirs = await post(t, DEFINER, statement({ object: { id: activity, definition: { name: { en: 'theirs' }, description: { en: 'theirs' } } } }));
        const own = await post(t, ADMIN, statement({ object: { id: activity } }));
        const read = await (await t.fetch(`/xAPI/statements?statementId=${own}&format=canonical`)).json();
        assert.deepEqual(read.object, { id: activity }, 'no definition: its statement has none');
        const refused = await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: VOIDED }, object: { objectType: 'StatementRef', id: theirs } })));
        assert.equal(refused.status, 403);
        // The two views assembled from every statement of the store are closed to it.
        for (const path of [`/xAPI/activities?activityId=${enc(activity)}`, `/xAPI/agents?agent=${enc(JSON.stringify({ mbox: 'mailto:definer@example.com' }))}`]) {
          const res = await t.fetch(path);
          assert.equal(res.status, 403, path);
          assert.match((await res.json()).detail, /LECTERN_LRS_RESTRICT_BY_AUTHORITY/);
        }
      } finally {
        await t.close();
      }
    });
  });
}
