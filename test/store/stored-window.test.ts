/**
 * since/until on every backend, found by bisecting seq (no index on stored): two tenants written
 * in turns, so a tenant's seqs have gaps, batches share one stored millisecond, and every bound
 * (at, just before and just after each stored time, before the first and after the last) gives
 * exactly the statements a scan of stored times gives — for queries, export scans and counts.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import type { Store } from '../../src/store/types.ts';
import type { StatementQuery } from '../../src/xapi/query.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';
import { nextStoredMs, storeBackends } from '../helpers/stores.ts';

const ADMIN: Actor = { objectType: 'Agent', mbox: 'mailto:admin@example.com' };
const made = (): Statement => ({ id: randomUUID(), actor: ADMIN, verb: { id: 'http://example.com/verbs/did' }, object: { id: 'http://example.com/o' } }) as Statement;

for (const backend of storeBackends) {
  describe(`since/until by seq [${backend.name}]`, () => {
    let store: Store;
    let dispose: () => Promise<void>;
    /** Per tenant: [id, stored ms] in stored order. */
    const written: Record<string, [string, number][]> = { t1: [], t2: [] };

    // Distinct stored times without sleeping where the store reads its clock (see nextStoredMs).
    const clock = new ManualClock(Date.now());

    before(async () => {
      ({ store, dispose } = await backend.open({ clock }));
      for (let round = 0; round < 12; round++) {
        for (const tenant of ['t1', 't2']) {
          const batch = Array.from({ length: 1 + ((round * 7 + tenant.length) % 3) }, made);
          if (tenant === 't1' || round % 3 === 0) await store.insertStatements(tenant, prepareBatch(batch, ADMIN, '1.0.3'), []);
          else continue;
          for (const s of batch) written[tenant].push([s.id!, (await store.getStatement(tenant, s.id!, false))!.storedMs]);
          await nextStoredMs(backend, clock, 2);
        }
      }
    });
    after(async () => {
      await store?.close();
      await dispose?.();
    });

    const query = async (tenant: string, q: Partial<StatementQuery>) =>
      (
        await store.queryStatements(tenant, {
          limit: 1000,
          maxBytes: 4 * 1024 * 1024,
          ascending: true,
          format: 'exact',
          attachments: false,
          ...q,
          filter: { relatedAgents: false, relatedActivities: false },
        })
      ).rows.map((r) => (JSON.parse(r.json) as Statement).id);

    test('every since and until bound selects exactly the statements stored in the window', async () => {
      for (const tenant of ['t1', 't2']) {
        const rows = written[tenant];
        const times = [...new Set(rows.map(([, ms]) => ms))];
        const bounds = [times[0] - 1, ...times.flatMap((t) => [t - 1, t, t + 1]), times[times.length - 1] + 1];
        for (const b of bounds) {
          const since = rows.filter(([, ms]) => ms > b).map(([id]) => id);
          const until = rows.filter(([, ms]) => ms <= b).map(([id]) => id);
          assert.deepEqual(await query(tenant, { since: b }), since, `${tenant} since ${b}`);
          assert.deepEqual(await query(tenant, { until: b }), until, `${tenant} until ${b}`);
          assert.equal(await store.countStatements(tenant, { sinceMs: b }), since.length);
          assert.equal(await store.countStatements(tenant, { untilMs: b }), until.length);
          const scanned = (await store.scanStatements(tenant, { limit: 1000, sinceMs: b })).rows.map((r) => (JSON.parse(r.json) as Statement).id);
          assert.deepEqual(scanned, since);
        }
        const [lo, hi] = [times[2], times[times.length - 3]];
        assert.deepEqual(
          await query(tenant, { since: lo, until: hi }),
          rows.filter(([, ms]) => ms > lo && ms <= hi).map(([id]) => id),
        );
      }
      assert.deepEqual(await query('t3', { since: 0 }), []); // a tenant without statements
      assert.deepEqual(await query('t3', { until: Date.now() }), []);
    });
  });
}
