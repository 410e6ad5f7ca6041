/**
 * Nothing one store reads tells it about another store's volume (issue 27, item 9): `more`
 * cursors are the store's own (the same for the same data whatever other stores wrote
 * meanwhile), and a cursor that is malformed, out of range, or names a statement the caller may
 * not continue after is a 400 (item 11). Through HTTP on every backend.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';

/** A default-store user restricted to its own statements. */
const MINE: TestUser = { username: 'mine', password: 'mine-pass', scopes: ['statements/read/mine', 'statements/write'], agent: { mbox: 'mailto:mine@example.com' } };
const USERS = [ADMIN, MINE, TENANT_B];
const VERB = 'http://example.com/verbs/even';

/** The default store's statements, ids fixed so that two servers hold the same ones. */
const ADMIN_IDS = Array.from({ length: 6 }, () => randomUUID());
const MINE_IDS = Array.from({ length: 4 }, () => randomUUID());
const own = (id: string, i: number) => statement({ id, ...(i % 2 === 0 && { verb: { id: VERB } }) });

async function post(t: TestLrs, user: TestUser, body: unknown[]): Promise<string[]> {
  const res = await t.fetch('/xAPI/statements', { ...jsonInit('POST', body), user });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as string[];
}

/** The default store's writes, with `between` (another store's) in the middle of them. */
async function fill(t: TestLrs, between: () => Promise<void>): Promise<void> {
  await post(t, ADMIN, ADMIN_IDS.slice(0, 3).map(own));
  await post(t, MINE, MINE_IDS.slice(0, 2).map(own));
  await between();
  await post(
    t,
    ADMIN,
    ADMIN_IDS.slice(3).map((id, i) => own(id, i + 3)),
  );
  await post(
    t,
    MINE,
    MINE_IDS.slice(2).map((id, i) => own(id, i + 2)),
  );
}

interface Page {
  ids: string[];
  /** The `more` link's cursor ('' on the last page). */
  cursor: string;
}

/** Follows `more` links from `query` to the end. */
async function walk(t: TestLrs, query: string, user: TestUser = ADMIN): Promise<Page[]> {
  const pages: Page[] = [];
  for (let next = `/xAPI/statements?${query}`; next; ) {
    const res = await t.fetch(next, { user });
    assert.equal(res.status, 200, await res.clone().text());
    const body = (await res.json()) as { statements: { id: string }[]; more: string };
    const cursor = body.more ? (new URL(body.more, 'http://x').searchParams.get('search_after') ?? '') : '';
    pages.push({ ids: body.statements.map((s) => s.id), cursor });
    next = body.more;
    assert.ok(pages.length < 50, 'the walk ends');
  }
  return pages;
}

/** The default store's statements in stored order. */
const STORED = [...ADMIN_IDS.slice(0, 3), ...MINE_IDS.slice(0, 2), ...ADMIN_IDS.slice(3), ...MINE_IDS.slice(2)];

const QUERIES: { name: string; query: string; user?: TestUser; expected: string[] }[] = [
  { name: 'descending', query: 'limit=2', expected: [...STORED].reverse() },
  { name: 'ascending', query: 'limit=3&ascending=true', expected: STORED },
  {
    name: 'a verb, ascending, within since/until',
    query: `limit=1&ascending=true&verb=${encodeURIComponent(VERB)}&since=2000-01-01T00:00:00Z&until=2100-01-01T00:00:00Z`,
    expected: [ADMIN_IDS[0], ADMIN_IDS[2], MINE_IDS[0], ADMIN_IDS[4], MINE_IDS[2]],
  },
  { name: 'mine (statements/read/mine)', query: 'limit=1', user: MINE, expected: [...MINE_IDS].reverse() },
  { name: 'mine=true, ascending', query: 'limit=1&ascending=true&mine=true', expected: ADMIN_IDS },
];

for (const backend of BACKENDS) {
  describe(`more cursors are the store's own [${backend.name}]`, () => {
    let quiet: TestLrs;
    let busy: TestLrs;
    const otherIds: string[] = [];
    before(async () => {
      quiet = await startTestLrs(backend, { users: USERS });
      busy = await startTestLrs(backend, { users: USERS });
      await fill(quiet, async () => {});
      // Another store writes 40 statements between the default store's writes.
      await fill(busy, async () => {
        for (let i = 0; i < 2; i++)
          otherIds.push(
            ...(await post(
              busy,
              TENANT_B,
              Array.from({ length: 20 }, () => statement()),
            )),
          );
      });
    });
    after(async () => {
      await quiet?.close();
      await busy?.close();
    });

    for (const q of QUERIES) {
      test(`${q.name}: the same pages and cursors whatever another store wrote`, async () => {
        const alone = await walk(quiet, q.query, q.user);
        const beside = await walk(busy, q.query, q.user);
        assert.deepEqual(
          alone.flatMap((p) => p.ids),
          q.expected,
          'every statement once, in order',
        );
        assert.deepEqual(beside, alone, "another store's writes change neither the pages nor the more links");
      });
    }

    test("another store's writes between page 1 and page 2 change neither the more link nor page 2", async () => {
      const first = async () => (await (await busy.fetch('/xAPI/statements?limit=2')).json()) as { statements: { id: string }[]; more: string };
      const page1 = await first();
      const page2 = await (await busy.fetch(page1.more)).json();
      otherIds.push(
        ...(await post(
          busy,
          TENANT_B,
          Array.from({ length: 10 }, () => statement()),
        )),
      );
      const again = await first();
      assert.equal(again.more, page1.more);
      assert.deepEqual(await (await busy.fetch(page1.more)).json(), page2);
    });

    test('a cursor naming a statement voided since its page still continues; one erased since is a 400', async () => {
      const t = await startTestLrs(backend, { users: USERS });
      try {
        const ids = await post(t, ADMIN, [statement(), statement(), statement()]);
        const page1 = (await (await t.fetch('/xAPI/statements?limit=1')).json()) as { statements: { id: string }[]; more: string };
        assert.deepEqual(
          page1.statements.map((s) => s.id),
          [ids[2]],
        );
        const voiding = statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: ids[2] } });
        await post(t, ADMIN, [voiding]);
        const res = await t.fetch(page1.more);
        assert.equal(res.status, 200, await res.clone().text());
        assert.deepEqual(
          ((await res.json()) as { statements: { id: string }[] }).statements.map((s) => s.id),
          [ids[1]],
        );
        // Erased (lectern erase): the cursor names nothing any more; the client starts again.
        await t.lrs.store.deleteStatements('', [ids[2]]);
        const gone = await t.fetch(page1.more);
        assert.equal(gone.status, 400);
        assert.deepEqual(((await gone.json()) as { detail: { loc: string[] }[] }).detail[0].loc, ['query', 'search_after']);
      } finally {
        await t.close();
      }
    });

    test('a malformed, out-of-range or foreign cursor is a 400 naming search_after; nothing else tells them apart', async () => {
      const refused = async (cursor: string, user: TestUser = ADMIN, query = 'limit=1&') => {
        const res = await busy.fetch(`/xAPI/statements?${query}search_after=${encodeURIComponent(cursor)}`, { user });
        assert.equal(res.status, 400, `${cursor}: ${await res.clone().text()}`);
        const detail = (await res.json()).detail as { loc: string[]; msg: string }[];
        assert.deepEqual(
          detail.map((d) => d.loc),
          [['query', 'search_after']],
          cursor,
        );
        return detail[0].msg;
      };
      // Positions of the former numeric cursors, up to 2^63 … 10^19 - 1 (once a 500) and beyond.
      for (const cursor of ['1', '5', '9223372036854775807', '9223372036854775808', '9999999999999999999', '18446744073709551616', '-1', '1.5', 'abc', '']) {
        await refused(cursor);
      }
      // Well-formed but not a statement this caller may continue after: one answer for all.
      const unknown = await refused(randomUUID());
      assert.equal(await refused(otherIds[0]), unknown, "another store's statement is as unknown as none");
      assert.equal(await refused(ADMIN_IDS[3], MINE), unknown, "under mine, another user's statement is as unknown as none");
      assert.equal(await refused(otherIds[0], ADMIN, 'limit=1&ascending=true&since=2000-01-01T00:00:00Z&'), unknown, 'with since too');
      // The caller's own statements are cursors, in any case.
      for (const [cursor, user] of [
        [ADMIN_IDS[3].toUpperCase(), ADMIN],
        [MINE_IDS[1], MINE],
      ] as const) {
        const res = await busy.fetch(`/xAPI/statements?limit=1&search_after=${cursor}`, { user });
        assert.equal(res.status, 200, await res.text());
      }
    });
  });
}
