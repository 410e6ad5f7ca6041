/**
 * StatementRef targeting in the shared query (src/store/sql.ts) and the reach rows written at
 * insert (src/store/reach.ts), on every backend, at the store level: filters matching few and
 * many statements, chains, time windows and `mine` (SQLite binds parameters by position: a
 * misplaced one would silently match nothing); targets stored after their StatementRefs, cycles,
 * erasure.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import type { Store } from '../../src/store/types.ts';
import { actorKeys } from '../../src/xapi/agents.ts';
import type { StatementQuery } from '../../src/xapi/query.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';
import { nextStoredMs, storeBackends } from '../helpers/stores.ts';

const ADMIN: Actor = { objectType: 'Agent', mbox: 'mailto:admin@example.com' };
const MINE: Actor = { objectType: 'Agent', mbox: 'mailto:mine@example.com' };
const A: Actor = { objectType: 'Agent', mbox: 'mailto:a@example.com' };
const B: Actor = { objectType: 'Agent', mbox: 'mailto:b@example.com' };
const C: Actor = { objectType: 'Agent', mbox: 'mailto:c@example.com' };
const D: Actor = { objectType: 'Agent', mbox: 'mailto:d@example.com' };
const key = (a: Actor) => actorKeys(a)[0];
const VERB = { id: 'http://example.com/verbs/did' };
const VOIDED = { id: 'http://adlnet.gov/expapi/verbs/voided' };
const RARE = { id: 'http://example.com/verbs/rare' };
const E: Actor = { objectType: 'Agent', mbox: 'mailto:e@example.com' };
const RARE_ACTIVITY = 'http://example.com/rare-activity';

const made = (actor: Actor, object: Record<string, unknown> = { id: 'http://example.com/o' }, verb = VERB): Statement => ({ id: randomUUID(), actor, verb, object }) as Statement;
const ref = (id: string) => ({ objectType: 'StatementRef', id });

for (const backend of storeBackends) {
  describe(`StatementRef targeting [${backend.name}]`, () => {
    let store: Store;
    let dispose: () => Promise<void>;
    const clock = new ManualClock(Date.now()); // distinct stored milliseconds (see nextStoredMs)
    const s: Record<string, Statement> = {};
    const as: Statement[] = [];
    const es: Statement[] = [];
    const put = async (authority: Actor, ...statements: Statement[]) => {
      await store.insertStatements('', prepareBatch(statements, authority, '1.0.3'), []);
      await nextStoredMs(backend, clock);
    };
    const stored = async (st: Statement) => (await store.getStatement('', st.id!, false))!.storedMs;

    before(async () => {
      ({ store, dispose } = await backend.open({ clock }));
      for (let i = 0; i < 600; i++) as.push(made(A));
      await put(ADMIN, ...as); // more than 500 matches: the forward walk
      s.b1 = made(B);
      s.b2 = made(B);
      await put(ADMIN, s.b1, s.b2);
      s.r1 = made(C, ref(s.b1.id!));
      await put(ADMIN, s.r1);
      s.r2 = made(C, ref(s.r1.id!)); // through r1
      await put(ADMIN, s.r2);
      s.v1 = made(ADMIN, ref(s.b2.id!), VOIDED); // voids b2, which still matches as a target
      await put(ADMIN, s.v1);
      s.m1 = made(C, ref(s.b1.id!));
      await put(MINE, s.m1);
      s.r3 = made(C, ref(as[0].id!)); // targets the oldest of A's statements
      await put(ADMIN, s.r3);
      s.d1 = made(D);
      await put(MINE, s.d1);
      s.m2 = made(C, ref(s.d1.id!));
      await put(MINE, s.m2);
      s.a2 = made(C, ref(s.d1.id!));
      await put(ADMIN, s.a2);
      s.m3 = made(C, ref(s.a2.id!)); // mine, but through another authority's StatementRef
      await put(MINE, s.m3);
      s.m4 = made(C, ref(as[1].id!)); // mine, targeting another authority's statement: the forward walk
      await put(MINE, s.m4);
      for (let i = 0; i < 40; i++) es.push(made(E, undefined, RARE));
      await put(ADMIN, ...es); // 40 matches and 2 StatementRefs: walking forward costs less than back
      s.e1 = made(C, ref(es[3].id!));
      await put(ADMIN, s.e1);
      s.e2 = made(C, ref(s.e1.id!));
      await put(ADMIN, s.e2);
      s.x1 = made(E, { id: RARE_ACTIVITY });
      s.x2 = made(E, { id: RARE_ACTIVITY });
      await put(ADMIN, s.x1, s.x2);
    });
    after(async () => {
      await store?.close();
      await dispose?.();
    });

    const page = async (q: Partial<Omit<StatementQuery, 'filter'>> & { filter: Partial<StatementQuery['filter']> }) => {
      const query: StatementQuery = {
        limit: 100,
        maxBytes: 4 * 1024 * 1024,
        ascending: false,
        format: 'exact',
        attachments: false,
        ...q,
        filter: { relatedAgents: false, relatedActivities: false, ...q.filter },
      };
      const r = await store.queryStatements('', query);
      return { ids: r.rows.map((row) => (JSON.parse(row.json) as Statement).id), next: r.next };
    };
    const all = async (q: Parameters<typeof page>[0]) => {
      const ids: string[] = [];
      let after: string | undefined;
      for (;;) {
        const r = await page({ ...q, after });
        ids.push(...(r.ids as string[]));
        if (!r.next) return ids;
        after = r.next;
      }
    };

    test('a rarely matched agent (backward walk): targeting statements, recursively, voided targets too', async () => {
      assert.deepEqual(
        (await page({ filter: { agent: key(B) } })).ids,
        [s.m1, s.v1, s.r2, s.r1, s.b1].map((x) => x.id),
      );
    });

    test('mine applies to every statement of a chain; since to the targeting statement', async () => {
      // m1 is mine but targets b1, another authority's statement: invisible, so no reason to match.
      assert.deepEqual((await page({ filter: { agent: key(B), authority: key(MINE) } })).ids, []);
      assert.deepEqual(
        (await page({ filter: { agent: key(D), authority: key(MINE) } })).ids,
        [s.m2, s.d1].map((x) => x.id),
      );
      assert.deepEqual(
        (await page({ filter: { agent: key(D) } })).ids,
        [s.m3, s.a2, s.m2, s.d1].map((x) => x.id),
      );
      assert.deepEqual(
        (await page({ filter: { agent: key(B) }, since: await stored(s.r1) })).ids,
        [s.m1, s.v1, s.r2].map((x) => x.id),
      );
      assert.deepEqual(
        (await page({ filter: { agent: key(B) }, since: await stored(s.b1), until: await stored(s.r2), ascending: true })).ids,
        [s.r1, s.r2].map((x) => x.id),
      );
    });

    test('a broadly matched agent (forward walk): a new StatementRef to an old match leads the first page', async () => {
      const first = await page({ filter: { agent: key(A) }, limit: 10 });
      assert.deepEqual(first.ids, [
        s.m4.id,
        s.r3.id,
        ...as
          .slice(-8)
          .reverse()
          .map((x) => x.id),
      ]);
      const everything = await all({ filter: { agent: key(A) }, limit: 70 });
      assert.equal(everything.length, 602);
      assert.equal(new Set(everything).size, 602);
      const ascending = await all({ filter: { agent: key(A) }, limit: 70, ascending: true });
      assert.deepEqual(ascending, [...everything].reverse());
    });

    test('a verb with few StatementRefs among its matches (forward walk, chosen by cost): chains, pages, since', async () => {
      const first = await page({ filter: { verb: RARE.id }, limit: 10 });
      assert.deepEqual(first.ids, [
        s.e2.id,
        s.e1.id,
        ...es
          .slice(-8)
          .reverse()
          .map((x) => x.id),
      ]);
      assert.deepEqual(
        await all({ filter: { verb: RARE.id }, limit: 7 }),
        [s.e2, s.e1, ...[...es].reverse()].map((x) => x.id),
      );
      assert.deepEqual((await page({ filter: { verb: RARE.id }, since: await stored(es[39]) })).ids, [s.e2.id, s.e1.id]);
      assert.deepEqual((await page({ filter: { verb: RARE.id }, until: await stored(s.e1), limit: 3 })).ids, [s.e1.id, es[39].id, es[38].id]);
    });

    test('agent + verb + activity: driven from whichever value is rarest, the same statements', async () => {
      const o = 'http://example.com/o';
      // The agent is rarest (B: 2 statements; the verb and the activity: hundreds).
      assert.deepEqual(
        (await page({ filter: { agent: key(B), verb: VERB.id, activity: o } })).ids,
        [s.m1, s.v1, s.r2, s.r1, s.b1].map((x) => x.id),
      );
      // The activity is rarest (2), then the agent (42), then the verb (hundreds).
      assert.deepEqual(
        (await page({ filter: { agent: key(E), verb: VERB.id, activity: RARE_ACTIVITY } })).ids,
        [s.x2, s.x1].map((x) => x.id),
      );
      // The verb is rarest (40), with chains of StatementRefs to its matches.
      assert.deepEqual(
        (await page({ filter: { agent: key(E), verb: RARE.id, activity: o }, limit: 7 })).ids,
        [s.e2, s.e1, ...es.slice(-5).reverse()].map((x) => x.id),
      );
      assert.deepEqual(
        await all({ filter: { agent: key(E), verb: RARE.id, activity: o }, limit: 7 }),
        [s.e2, s.e1, ...[...es].reverse()].map((x) => x.id),
      );
      // Nothing matches all three.
      assert.deepEqual((await page({ filter: { agent: key(A), verb: RARE.id, activity: o } })).ids, []);
    });

    test('a broadly matched agent with until before the StatementRef, or mine: no targeting statement', async () => {
      const until = await page({ filter: { agent: key(A) }, limit: 5, until: await stored(as[599]) });
      assert.deepEqual(
        until.ids,
        as
          .slice(-5)
          .reverse()
          .map((x) => x.id),
      );
      assert.deepEqual((await page({ filter: { agent: key(A), authority: key(MINE) } })).ids, []);
      const since = await page({ filter: { agent: key(A) }, since: await stored(s.m1) });
      assert.deepEqual(since.ids, [s.m4.id, s.r3.id]);
    });
  });
}

const F: Actor = { objectType: 'Agent', mbox: 'mailto:f@example.com' };
const LATE = { id: 'http://example.com/verbs/late' };
const LATE_ACTIVITY = 'http://example.com/late-activity';

for (const backend of storeBackends) {
  describe(`StatementRef targeting kept up at insert and erasure [${backend.name}]`, () => {
    let store: Store;
    let dispose: () => Promise<void>;
    before(async () => {
      ({ store, dispose } = await backend.open());
    });
    after(async () => {
      await store?.close();
      await dispose?.();
    });
    const put = async (authority: Actor, ...statements: Statement[]) => {
      await store.insertStatements('', prepareBatch(statements, authority, '1.0.3'), []);
    };
    const ids = async (filter: Partial<StatementQuery['filter']>) => {
      const query: StatementQuery = {
        limit: 100,
        maxBytes: 4 * 1024 * 1024,
        ascending: false,
        format: 'exact',
        attachments: false,
        filter: { relatedAgents: false, relatedActivities: false, ...filter },
      };
      return (await store.queryStatements('', query)).rows.map((row) => (JSON.parse(row.json) as Statement).id);
    };
    const target = (): Statement => ({ ...made(F, { id: LATE_ACTIVITY }, LATE), context: { registration: randomUUID() } }) as Statement;

    test('a target stored after the StatementRefs that reach it, in other requests or the same one; erased, and stored again', async () => {
      const t = target();
      const r = made(C, ref(t.id!));
      const q = made(C, ref(r.id!)); // reaches t through r
      await put(ADMIN, q);
      await put(MINE, r); // another authority on the chain: not `mine` for ADMIN
      await put(ADMIN, t);
      const chain = [t, r, q].map((x) => x.id);
      const registration = (t.context as { registration: string }).registration;
      for (const filter of [{ agent: key(F) }, { verb: LATE.id }, { activity: LATE_ACTIVITY }, { registration }, { agent: key(F), verb: LATE.id, activity: LATE_ACTIVITY }]) {
        assert.deepEqual(await ids(filter), chain, JSON.stringify(filter));
      }
      assert.deepEqual(await ids({ verb: LATE.id, authority: key(ADMIN) }), [t.id], 'mine: the chain passes through another authority');
      assert.deepEqual(await ids({ agent: key(C), verb: LATE.id }), [], "the filter applies to one statement as a whole (C's are StatementRefs)");

      // In one request, the StatementRef before or after its target.
      const t2 = target();
      const q2 = made(C, ref(t2.id!));
      const t3 = target();
      const q3 = made(C, ref(t3.id!));
      await put(ADMIN, q2, t2, t3, q3);
      assert.deepEqual(
        await ids({ verb: LATE.id }),
        [q3, t3, t2, q2, t, r, q].map((x) => x.id),
      );

      // Erasing the target ends the chains through it; stored again, they reach it again.
      await store.deleteStatements('', [t.id!]);
      assert.deepEqual(
        await ids({ verb: LATE.id }),
        [q3, t3, t2, q2].map((x) => x.id),
      );
      assert.deepEqual(
        await ids({ agent: key(F) }),
        [q3, t3, t2, q2].map((x) => x.id),
      );
      await put(ADMIN, t);
      assert.deepEqual(
        await ids({ verb: LATE.id }),
        [t, q3, t3, t2, q2, r, q].map((x) => x.id),
      );
      // Erasing a link of the chain: what reached through it no longer does.
      await store.deleteStatements('', [r.id!]);
      assert.deepEqual(
        await ids({ verb: LATE.id }),
        [t, q3, t3, t2, q2].map((x) => x.id),
      );
    });

    test('a cycle of ids ends the walk', async () => {
      const a = made(C, ref(randomUUID()));
      const b = made(F, ref(a.id!), LATE);
      const c = made(C, ref(b.id!));
      (a.object as { id: string }).id = c.id!; // a → c → b → a
      await put(ADMIN, a, b, c);
      const late = await ids({ verb: LATE.id });
      for (const x of [a, b, c]) assert.ok(late.includes(x.id), 'each statement of the cycle reaches b');
    });
  });
}
