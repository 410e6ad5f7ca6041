/**
 * The rejections table's bounds on every backend: each keep trims every store it wrote to its
 * newest `max` rows (other stores untouched) and drops rows older than `keepSinceMs`; ids are
 * never given again; the reason filter matches a whole type or a prefix up to a dot, taking `%`
 * and `_` literally; a replay's claims (held, renewed, expired, released).
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { fairShares } from '../../src/store/rejections.ts';
import type { NewRejection } from '../../src/store/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const rejection = (tenant: string, atMs: number, type = 'value_error.iri', n = 0, username = 'u'): NewRejection => ({
  tenant,
  atMs,
  username,
  method: 'POST',
  path: '/xAPI/statements',
  query: {},
  status: 400,
  reasons: [{ loc: [n], msg: 'bad', type }],
  headers: { 'content-type': 'application/json' },
  version: '1.0.3',
  body: Buffer.from(`{"n":${n}}`),
  bodyBytes: 8,
  writer: '{}',
});

test('fair shares: the fewest held are kept whole, the rest split evenly, the remainder to those holding the most', () => {
  const shares = (held: Record<string, number>, max: number) => Object.fromEntries(fairShares(new Map(Object.entries(held)), max));
  assert.deepEqual(shares({ flood: 1000, quiet: 3, other: 2 }, 20), { flood: 15, quiet: 3, other: 2 });
  assert.deepEqual(shares({ a: 100, b: 100, c: 100 }, 10), { a: 3, b: 3, c: 4 });
  assert.deepEqual(shares({ a: 7, b: 100, c: 6 }, 20), { a: 7, b: 7, c: 6 });
  assert.deepEqual(shares({ a: 1, b: 1, c: 1 }, 2), { a: 0, b: 1, c: 1 });
});

for (const backend of storeBackends) {
  describe(`kept rejections' bounds [${backend.name}]`, async () => {
    const { store, dispose } = await backend.open();
    after(async () => {
      await store.close();
      await dispose();
    });

    test('trimmed to max per store, oldest first; older than keepSinceMs dropped; ids never reused', async () => {
      await store.keepRejections([rejection('b', 1_000, 'conflict')], { max: 5, keepSinceMs: 0 });
      for (let i = 0; i < 4; i++) {
        await store.keepRejections(
          Array.from({ length: 4 }, (_, j) => rejection('', 10_000 + i, 'value_error.iri', i * 4 + j)),
          { max: 5, keepSinceMs: 0 },
        );
      }
      const kept = await store.listRejections({ tenant: '', limit: 100 });
      assert.deepEqual(
        kept.map((r) => r.reasons[0].loc[0]),
        [11, 12, 13, 14, 15],
      );
      assert.equal((await store.listRejections({ tenant: 'b', limit: 100 })).length, 1, 'another store is not trimmed by this one');
      const lastId = Number(kept.at(-1)!.id);
      await store.clearRejections('');
      await store.keepRejections([rejection('', 20_000)], { max: 5, keepSinceMs: 5_000 });
      const now = await store.listRejections({ limit: 100 });
      assert.deepEqual(
        now.map((r) => r.tenant),
        [''],
        "b's old row is dropped by age",
      );
      assert.ok(Number(now[0].id) > lastId);
      assert.deepEqual(now[0].body, Buffer.from('{"n":0}'));
    });

    test('a store over max trims each credential to its fair share, its oldest first: a flood evicts its own rows', async () => {
      await store.clearRejections();
      const at = (username: string, n: number, tenant = '') => rejection(tenant, 1_000 + n, 'value_error.iri', n, username);
      await store.keepRejections([at('quiet', 0), at('quiet', 1), at('other', 2), at('flood', 0, 'b')], { max: 10, keepSinceMs: 0 });
      for (let wave = 0; wave < 5; wave++) {
        await store.keepRejections(
          Array.from({ length: 8 }, (_, i) => at('flood', 100 + wave * 8 + i)),
          { max: 10, keepSinceMs: 0 },
        );
      }
      await store.keepRejections([at('quiet', 200)], { max: 10, keepSinceMs: 0 });
      const kept = await store.listRejections({ tenant: '', limit: 100 });
      assert.equal(kept.length, 10);
      const of = (u: string) => kept.filter((r) => r.username === u).map((r) => r.reasons[0].loc[0]);
      assert.deepEqual(of('quiet'), [0, 1, 200], "the quiet producer's rows are all kept");
      assert.deepEqual(of('other'), [2]);
      assert.deepEqual(of('flood'), [134, 135, 136, 137, 138, 139], 'the flooder keeps its newest, within what is left');
      assert.equal((await store.listRejections({ tenant: 'b', limit: 100 })).length, 1, 'another store is not trimmed by this one');
    });

    test('the reason filter: a whole type or its prefix up to a dot, wildcards taken literally; since; paging', async () => {
      await store.clearRejections();
      await store.keepRejections([rejection('', 1, 'value_error.iri'), rejection('', 2, 'conflict'), rejection('', 3, 'value_error'), rejection('', 4, 'type_error.object')], {
        max: 10,
        keepSinceMs: 0,
      });
      const types = async (reason: string) => (await store.listRejections({ reason, limit: 10 })).map((r) => r.reasons[0].type);
      assert.deepEqual(await types('value_error'), ['value_error.iri', 'value_error']);
      assert.deepEqual(await types('value_error.iri'), ['value_error.iri']);
      assert.deepEqual(await types('value'), []);
      assert.deepEqual(await types('value_error%'), []);
      assert.deepEqual(await types('%'), []);
      assert.deepEqual(await types('_onflict'), []);
      assert.deepEqual(
        (await store.listRejections({ sinceMs: 3, limit: 10 })).map((r) => r.atMs),
        [3, 4],
      );
      const first = await store.listRejections({ limit: 2 });
      assert.deepEqual(
        (await store.listRejections({ afterId: first[1].id, limit: 10 })).map((r) => r.atMs),
        [3, 4],
      );
      assert.equal(await store.deleteRejections([first[0].id, first[0].id]), 1);
      await store.updateRejection(first[1].id, { status: 409, reasons: [{ loc: [], msg: 'x', type: 'conflict' }], atMs: 9 });
      assert.deepEqual(await store.getRejection(first[1].id).then((r) => [r?.status, r?.atMs]), [409, 9]);
      assert.equal(await store.getRejection('999999'), undefined);
      assert.equal(await store.clearRejections(), 3);
    });

    test('claims: a replay holds what it claimed until its claim ends or expires; renewed, released with its audit entry', async () => {
      await store.clearRejections();
      await store.keepRejections([rejection('', 1), rejection('', 2), rejection('', 3)], { max: 10, keepSinceMs: 0 });
      const ids = (await store.listRejections({ limit: 10 })).map((r) => r.id);
      assert.deepEqual(await store.claimRejections([ids[1], ids[0], ids[0]], { token: 'a', untilMs: 1_000, nowMs: 0 }), [ids[0], ids[1]], 'each once, in id order');
      assert.deepEqual(await store.claimRejections(ids, { token: 'b', untilMs: 1_000, nowMs: 0 }), [ids[2]], "a's are a's");
      assert.deepEqual(await store.claimRejections([ids[0]], { token: 'a', untilMs: 1_000, nowMs: 0 }), [ids[0]], 'a claim taken again by its holder');
      assert.equal(await store.renewRejectionClaim('a', 5_000), 2);
      assert.deepEqual(await store.claimRejections(ids, { token: 'c', untilMs: 9_000, nowMs: 999 }), [], "b's held until 1,000, a's renewed");
      assert.deepEqual(await store.claimRejections(ids, { token: 'c', untilMs: 9_000, nowMs: 1_001 }), [ids[2]], "b's expired");
      const audit = {
        timeMs: 7,
        actor: 'ops',
        actorKind: 'os-user',
        role: 'operator',
        via: 'cli',
        client: 'host',
        action: 'rejections.replay',
        target: null,
        details: { phase: 'end' },
      } as const;
      assert.equal(await store.releaseRejections('a', audit), 2);
      assert.deepEqual(
        (await store.listAudit({ action: 'rejections.replay', limit: 5 })).map((e) => e.details),
        [{ phase: 'end' }],
      );
      assert.deepEqual(await store.claimRejections(ids, { token: 'd', untilMs: 9_000, nowMs: 1_001 }), [ids[0], ids[1]], "a's released");
      assert.equal(await store.clearRejections(), 3);
    });
  });
}
