/**
 * Lean storage keeps each agent key once, in `keys`: `lectern erase` must take the person's key
 * out of it (personal data), in their tenant only, and a running server, which caches key ids,
 * must store the same person again correctly afterwards. `--pseudonymize` replaces the key.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { ifiKey } from '../../src/xapi/agents.ts';
import { pseudonymFor } from '../../src/xapi/erasure.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { runCli } from '../lifecycle/helpers.ts';

const SECRET = 'a-secret-of-sixteen-chars-or-more';
const enc = (v: unknown) => encodeURIComponent(JSON.stringify(v));

/** Every (tenant name, key) of the dictionary, read straight from the database. */
async function keys(lrs: TestLrs): Promise<Set<string>> {
  const sql = 'SELECT t.name, k.key FROM keys k JOIN tenants t ON t.id = k.tenant';
  let rows: { name: string; key: string }[];
  if (lrs.config.backend === 'sqlite') {
    const db = new DatabaseSync(lrs.config.sqlitePath, { readOnly: true });
    rows = db.prepare(sql).all() as { name: string; key: string }[];
    db.close();
  } else {
    const c = new pg.Client({ connectionString: lrs.config.postgresUrl });
    await c.connect();
    rows = (await c.query<{ name: string; key: string }>(sql)).rows;
    await c.end();
  }
  return new Set(rows.map((r) => `${r.name}|${r.key}`));
}

async function countFor(lrs: TestLrs, agent: unknown, user: TestUser = ADMIN): Promise<number> {
  const res = await lrs.fetch(`/xAPI/statements?agent=${enc(agent)}&related_agents=true`, { user });
  assert.equal(res.status, 200);
  return ((await res.json()) as { statements: unknown[] }).statements.length;
}

async function post(lrs: TestLrs, body: unknown, user: TestUser = ADMIN): Promise<void> {
  const res = await lrs.fetch('/xAPI/statements', jsonInit('POST', body, { user }));
  assert.equal(res.status, 200, await res.text());
}

for (const backend of BACKENDS) {
  describe(`erasure removes the agent's key from the dictionary [${backend.name}]`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend, { users: [ADMIN, TENANT_B] });
    });
    after(async () => lrs?.close());

    test("after lectern erase the key is gone from keys; another tenant's identical key and other keys stay; the person can be stored again", async () => {
      const zoe = { mbox: `mailto:zoe-${randomUUID()}@example.com` };
      const zoeKey = ifiKey(zoe)!;
      const ann = { mbox: `mailto:ann-${randomUUID()}@example.com` };
      // Zoe as actor, as instructor, as a Group member; Ann alone; Zoe in tenant b too.
      await post(lrs, statement({ actor: zoe }));
      await post(lrs, statement({ actor: ann, context: { instructor: zoe } }));
      await post(lrs, statement({ actor: { objectType: 'Group', member: [{ objectType: 'Agent', ...zoe }] } }));
      await post(lrs, statement({ actor: ann }));
      await post(lrs, statement({ actor: zoe }), TENANT_B);
      const before = await keys(lrs);
      assert.ok(before.has(`|${zoeKey}`) && before.has(`b|${zoeKey}`), 'both tenants hold the key');

      const run = await runCli(lrs, ['erase', '--agent', JSON.stringify(zoe)]);
      assert.equal(run.code, 0, run.stderr);
      const now = await keys(lrs);
      assert.ok(!now.has(`|${zoeKey}`), "the erased person's key is gone");
      assert.ok(now.has(`b|${zoeKey}`), "the same key in another tenant stays (that tenant's data)");
      assert.ok(now.has(`|${ifiKey(ann)!}`), 'keys other statements use stay');
      assert.ok(now.has(`|${ifiKey(ADMIN.agent as { mbox: string })!}`), 'the authority stays');
      assert.equal(await countFor(lrs, zoe), 0);
      assert.equal(await countFor(lrs, ann), 1, "Ann's statement naming nobody else stays");
      assert.equal(await countFor(lrs, zoe, TENANT_B), 1);

      // The running server had Zoe's old key id cached: a new statement must still be found by her.
      await post(lrs, statement({ actor: zoe }));
      await post(lrs, statement({ actor: ann, context: { instructor: zoe } }));
      assert.equal(await countFor(lrs, zoe), 2);
      assert.ok((await keys(lrs)).has(`|${zoeKey}`));
    });

    test('a query by a person erased and stored again since the server last looked them up finds the new statements', async () => {
      const kim = { mbox: `mailto:kim-${randomUUID()}@example.com` };
      await post(lrs, statement({ actor: kim }));
      // The server now knows Kim's key id (PostgreSQL keeps filter values' ids between queries).
      assert.equal(await countFor(lrs, kim), 1);
      const run = await runCli(lrs, ['erase', '--agent', JSON.stringify(kim)]);
      assert.equal(run.code, 0, run.stderr);
      // Stored again: a new key id; the old one refers to nothing.
      await post(lrs, statement({ actor: kim }));
      await post(lrs, statement({ actor: kim }));
      assert.equal(await countFor(lrs, kim), 2);
    });

    test('a rejected request leaves no key of its own behind', async () => {
      const xan = { mbox: `mailto:xan-${randomUUID()}@example.com` };
      const shared = { mbox: `mailto:shared-${randomUUID()}@example.com` };
      const id = randomUUID();
      await post(lrs, statement({ id, actor: shared }));
      // Xan's statement, then one conflicting with a stored id: the whole request is rejected.
      const res = await lrs.fetch(
        '/xAPI/statements',
        jsonInit('POST', [statement({ actor: xan }), statement({ id, actor: shared, verb: { id: 'http://example.com/verbs/other' } })]),
      );
      assert.equal(res.status, 409);
      const now = await keys(lrs);
      assert.ok(!now.has(`|${ifiKey(xan)!}`), "the rejected request's agent is not kept");
      assert.ok(now.has(`|${ifiKey(shared)!}`), 'a key a stored statement uses stays');
      await post(lrs, statement({ actor: xan }));
      assert.equal(await countFor(lrs, xan), 1);
    });

    test("--pseudonymize replaces the person's key by the pseudonym's", async () => {
      const yan = { mbox: `mailto:yan-${randomUUID()}@example.com` };
      await post(lrs, statement({ actor: yan }));
      await post(lrs, statement({ actor: { mbox: 'mailto:someone@example.com' }, context: { instructor: yan } }));
      const run = await runCli(lrs, ['erase', '--pseudonymize', '--agent', JSON.stringify(yan)], { env: { LECTERN_PSEUDONYMIZE_KEY: SECRET } });
      assert.equal(run.code, 0, run.stderr);
      const pseudonym = pseudonymFor(ifiKey(yan)!, SECRET);
      const now = await keys(lrs);
      assert.ok(!now.has(`|${ifiKey(yan)!}`));
      assert.ok(now.has(`|${ifiKey(pseudonym)!}`));
      assert.equal(await countFor(lrs, yan), 0);
      assert.equal(await countFor(lrs, pseudonym), 2);
    });
  });
}
