/**
 * The PostgreSQL backend's maintenance writes and its dictionary's keys: erasure and retention
 * delete statements (deleteStatements), pseudonymisation rewrites them (rewriteStatements), each
 * in one transaction under its tenant's statement lock, with their link rows, reach rows, counts
 * and unused keys; and the key ids every write resolves (resolveKeys, cached per `keys_epoch`).
 * The statement writes build on it (./store.ts).
 */
import type pg from 'pg';
import { AGENT_ROLES, indexRows } from '../../xapi/statement.ts';
import type { Statement } from '../../xapi/types.ts';
import { OTHER_VERB } from '../overview.ts';
import { KeyCache } from '../pipeline.ts';
import { type ReachSeed, rebuildReach } from '../reach.ts';
import type { StatementRewrite } from '../types.ts';
import { LOCK_STATEMENTS, tenantLockKey } from './locks.ts';
import { KEY_CACHE_MAX, PostgresReaders } from './readers.ts';
import { resolveKeys, type ResolvedKeys } from './write.ts';

/**
 * The link rows of removed statements ($2/$3: agent keys and seqs; $4/$5: activity IRIs and
 * seqs), each probed by its whole primary key (key id, role, seq), every role tried (rows as
 * older versions wrote them go too). Given only the key id and seq, with the roles as a list, the
 * planner filtered on the role and walked every entry of the key — and the authority's key is in
 * every statement, so a prune batch walked most of the index (docs/decisions.md, "Operations and
 * the benchmark"). Key ids by one
 * probe each (LIMIT 1: a nested loop, not a hash of the whole dictionary); OFFSET 0 keeps the
 * (id, role, seq) rows whole for the join.
 */
const unlinkProbes = (keys: string, seqs: string, roles: readonly number[]): string =>
  `(SELECT k.id, t.seq, r.role FROM unnest(${keys}::text[], ${seqs}::bigint[]) AS t(key, seq) ` +
  'CROSS JOIN LATERAL (SELECT id FROM keys WHERE tenant = $1 AND key = t.key LIMIT 1) k ' +
  `CROSS JOIN unnest('{${roles.join(',')}}'::smallint[]) AS r(role) OFFSET 0) d`;
const UNLINK = `WITH
ag AS (DELETE FROM statement_agents x USING ${unlinkProbes('$2', '$3', AGENT_ROLES)} WHERE x.agent = d.id AND x.role = d.role AND x.seq = d.seq),
ac AS (DELETE FROM statement_activities x USING ${unlinkProbes('$4', '$5', [0, 1])} WHERE x.activity = d.id AND x.direct = d.role AND x.seq = d.seq)
SELECT 1`;

export abstract class PostgresMaintenance extends PostgresReaders {
  /** Per tenant id: dictionary ids known at `keys_epoch` = epoch (see resolveKeys). */
  protected readonly keyCache = new KeyCache<string>(KEY_CACHE_MAX);

  /**
   * The dictionary ids of `keys` (creating missing ones), on `c` or, committed at once, on the
   * pool. On the pool, ids already known at the cached `keys_epoch` cost no round trip: the write
   * checks that epoch under the tenant lock, so an erasure since (which bumps it) sends the group
   * back to resolve its keys again inside its transaction, as without the cache.
   */
  protected async resolveKeys(c: pg.PoolClient | undefined, tenantId: number, keys: Set<string>): Promise<ResolvedKeys> {
    if (c) return this.queryKeys(c, tenantId, keys);
    const cached = this.keyCache.lookup(tenantId, keys);
    if (cached) {
      const { ids, missing, epoch } = cached;
      if (!missing.size) return { ids, epoch };
      const found = await this.queryKeys(undefined, tenantId, missing);
      if (found.epoch === epoch) {
        for (const [k, id] of found.ids) ids.set(k, id);
        this.keyCache.add(tenantId, epoch, found.ids);
        return { ids, epoch };
      }
    }
    // Nothing cached, or an erasure since: every id again, at one epoch.
    const all = await this.queryKeys(undefined, tenantId, keys);
    this.keyCache.forget(tenantId);
    this.keyCache.add(tenantId, all.epoch, all.ids);
    return all;
  }

  private queryKeys(c: pg.PoolClient | undefined, tenantId: number, keys: Set<string>): Promise<ResolvedKeys> {
    return c ? this.runProgram(resolveKeys(tenantId, keys, false), c) : this.runProgram(resolveKeys(tenantId, keys, true));
  }

  /**
   * Writes the reach rows (src/store/reach.ts) of new StatementRefs (`seeds`), and rebuilds those
   * of the statements in `stored` and of every statement reaching one of them: a statement they
   * target has arrived, or a statement of their chains was erased or rewritten. `known`: key ids
   * at hand (the group's), so only the others are read.
   */
  protected updateReach(c: pg.PoolClient, tenantId: number, seeds: ReachSeed[], stored: number[], known?: ReadonlyMap<string, number>): Promise<void> {
    return this.runProgram(rebuildReach(this.dialect.reach, tenantId, seeds, stored, known), c);
  }

  /** Erasure and pseudonymisation take the tenant's statement lock: no insert decides on rows they change. */
  protected lockTenant(c: pg.PoolClient, tenant: string): Promise<unknown> {
    return c.query({ name: 'lock_statements', text: 'SELECT pg_advisory_xact_lock($1, $2)', values: [LOCK_STATEMENTS, tenantLockKey(tenant)] });
  }

  /**
   * Deletes the link rows (agents; activities too unless `agentsOnly`) of removed statement
   * versions by primary key (UNLINK), computed from their stored JSON (indexRows: as they were
   * written; the link tables have no index on seq). Returns the agent keys unlinked.
   */
  private async unlink(c: pg.PoolClient, tenantId: number, removed: { seq: string; statement: Statement }[], agentsOnly = false): Promise<string[]> {
    const agents: [string[], string[]] = [[], []];
    const activities: [string[], string[]] = [[], []];
    for (const { seq, statement } of removed) {
      const rows = indexRows(statement);
      for (const a of rows.agents) {
        agents[0].push(a.key);
        agents[1].push(seq);
      }
      if (agentsOnly) continue;
      for (const a of rows.activities) {
        activities[0].push(a.id);
        activities[1].push(seq);
      }
    }
    await c.query({ name: 'unlink_statements', text: UNLINK, values: [tenantId, ...agents, ...activities] });
    return [...new Set(agents[0])];
  }

  /**
   * Deletes the dictionary keys (of agents whose rows were unlinked) that nothing of the tenant
   * refers to any more: after an erasure no personal data stays in `keys`. Every use is checked
   * (an agent key could equal an IRI). A statement of its own, after the deletions (a CTE's
   * deletions are not visible to its own reads).
   *
   * Each key is found and checked by probes of its own: `key = ANY(…)` was planned as a walk of
   * the tenant's whole dictionary. `BETWEEN id AND id` is `= id` for the two statements
   * columns, but estimated as a narrow range: where one authority (or verb) wrote everything,
   * its statistics say any id matches every row, and the planner walked the tenant's whole
   * index for a key that is no authority.
   */
  protected async dropUnusedKeys(c: pg.PoolClient, tenantId: number, keys: string[]): Promise<void> {
    const dropped = await c.query({
      name: 'delete_orphan_keys',
      text:
        'DELETE FROM keys WHERE id = ANY(ARRAY(SELECT k.id FROM unnest($2::text[]) AS t(key) ' +
        'CROSS JOIN LATERAL (SELECT id FROM keys WHERE tenant = $1 AND key = t.key LIMIT 1) k ' +
        'WHERE NOT EXISTS (SELECT 1 FROM statement_agents x WHERE x.agent = k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statement_activities x WHERE x.activity = k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statements s WHERE s.tenant = $1 AND s.authority BETWEEN k.id AND k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statements s WHERE s.tenant = $1 AND s.verb BETWEEN k.id AND k.id)))',
      values: [tenantId, keys],
    });
    // Writers resolve ids before their transaction: this tells them to resolve again.
    if (dropped.rowCount) {
      await c.query({ name: 'bump_keys_epoch', text: 'UPDATE keys_epoch SET n = n + 1', values: [] });
      this.keyCache.forget(tenantId);
    }
  }

  async deleteStatements(tenant: string, ids: string[]): Promise<{ statements: number; attachments: number }> {
    const tid = await this.tenantId(tenant);
    if (!ids.length || tid === undefined) return { statements: 0, attachments: 0 };
    return this.tx(async (c) => {
      // The tenant's statement lock, first and for the whole (short) transaction, though old
      // statements do not bear on the order of new ones (seq comes from a sequence, stored never
      // goes back): a writer resolved its key ids before its transaction and checks keys_epoch
      // under this lock, so keys dropped here without it could be written in new link rows;
      // a writer voiding or reaching a statement deleted here relies on its row, checked under
      // the lock, and its reach rows would outlive it. Taken after the deletions instead, a
      // writer holding the lock and waiting for a row deleted here would deadlock with it.
      await this.lockTenant(c, tenant);
      const r = await c.query<{ rows: string | null; hashes: string[]; none_days: number[]; none_verbs: number[] }>({
        name: 'delete_statements',
        text: `WITH
s AS (DELETE FROM statements WHERE tenant = $1 AND id = ANY($2::uuid[]) RETURNING seq, "full", stored_ms, verb),
-- Taken off the Overview's counts (src/store/overview.ts): off each verb's row as far as it holds
-- them (dc: what it held), the rest off the day's "other" row; a count at zero goes below.
d AS (SELECT (stored_ms / 86400000)::int AS day, verb, count(*) AS n FROM s GROUP BY 1, 2),
dc AS (SELECT d.day, d.verb, least(d.n, coalesce(c.n, 0)) AS off, d.n - least(d.n, coalesce(c.n, 0)) AS rest FROM d
  LEFT JOIN statement_counts c ON c.tenant = $1 AND c.day = d.day AND c.verb = d.verb),
cv AS (UPDATE statement_counts c SET n = c.n - dc.off FROM dc WHERE dc.off > 0 AND c.tenant = $1 AND c.day = dc.day AND c.verb = dc.verb RETURNING c.day, c.verb, c.n),
co AS (UPDATE statement_counts c SET n = c.n - o.n FROM (SELECT day, sum(rest) AS n FROM dc GROUP BY day HAVING sum(rest) > 0) o
  WHERE c.tenant = $1 AND c.day = o.day AND c.verb = ${OTHER_VERB} RETURNING c.day, c.verb, c.n),
cn AS (SELECT * FROM cv UNION ALL SELECT * FROM co),
ob AS (DELETE FROM forward_outbox WHERE seq IN (SELECT seq FROM s)),
vi AS (DELETE FROM statement_violations WHERE seq IN (SELECT seq FROM s)),
sa AS (DELETE FROM statement_attachments WHERE seq IN (SELECT seq FROM s) RETURNING sha2)
SELECT (SELECT json_agg(json_build_array(seq::text, "full")) FROM s) AS rows, ARRAY(SELECT DISTINCT sha2 FROM sa) AS hashes,
  ARRAY(SELECT day FROM cn WHERE n <= 0) AS none_days, ARRAY(SELECT verb FROM cn WHERE n <= 0) AS none_verbs`,
        values: [tid, ids],
      });
      const head = r.rows[0];
      if (head.none_days.length) {
        await c.query({
          name: 'delete_zero_counts',
          text: 'DELETE FROM statement_counts c USING unnest($2::int[], $3::int[]) AS z(day, verb) WHERE c.tenant = $1 AND c.day = z.day AND c.verb = z.verb AND c.n <= 0',
          values: [tid, head.none_days, head.none_verbs],
        });
      }
      const removed = (JSON.parse(head.rows ?? '[]') as [string, Statement][]).map(([seq, statement]) => ({ seq, statement }));
      const unlinked = await this.unlink(c, tid, removed);
      // Their own reach rows go, and the chains through them end there now.
      await this.updateReach(
        c,
        tid,
        [],
        removed.map((r) => Number(r.seq)),
      );
      await this.dropUnusedKeys(c, tid, unlinked);
      // The CTE's deletions are not visible to its own reads: the orphan check runs after it.
      const orphans = await c.query({
        name: 'delete_orphan_attachments',
        text:
          'DELETE FROM attachments a WHERE a.tenant = $1 AND a.sha2 = ANY($2::text[]) AND NOT EXISTS ' +
          '(SELECT 1 FROM statement_attachments sa JOIN statements s ON s.seq = sa.seq WHERE sa.sha2 = a.sha2 AND sa.carrier IS NOT NULL AND s.tenant = $3)',
        values: [tenant, head.hashes, tid],
      });
      return { statements: removed.length, attachments: orphans.rowCount ?? 0 };
    });
  }

  async rewriteStatements(tenant: string, rows: StatementRewrite[]): Promise<void> {
    const tid = await this.tenantId(tenant);
    if (!rows.length || tid === undefined) return;
    await this.tx(async (c) => {
      await this.lockTenant(c, tenant);
      const old = await c.query<{ id: string; seq: string; full: string }>({
        name: 'rewrite_old',
        text: 'SELECT id::text AS id, seq, "full" FROM statements WHERE tenant = $1 AND id = ANY($2::uuid[])',
        values: [tid, rows.map((r) => r.id)],
      });
      const seqOf = new Map(old.rows.map((r) => [r.id, r.seq]));
      const found = rows.filter((r) => seqOf.has(r.id));
      // The new keys get their ids first (under the locks: no writer races for them).
      const { ids: keyIds } = await this.resolveKeys(c, tid, new Set(found.flatMap((r) => [...r.agents.map((a) => a.key), ...(r.authorityKey === null ? [] : [r.authorityKey])])));
      const agents = found.flatMap((r) => r.agents.map((a) => [keyIds.get(a.key)!, seqOf.get(r.id)!, a.role] as const));
      const unlinked = await this.unlink(
        c,
        tid,
        old.rows.map((r) => ({ seq: r.seq, statement: JSON.parse(r.full) as Statement })),
        true,
      );
      await c.query({
        name: 'rewrite_statements',
        // toast_pad = DEFAULT: the new row is compressed like an inserted one (migration 9).
        text:
          'UPDATE statements s SET "full" = t.f, full_bytes = octet_length(t.f::text), authority = t.a, toast_pad = DEFAULT ' +
          'FROM unnest($2::bigint[], $3::json[], $4::int[]) AS t(q, f, a) WHERE s.seq = t.q AND s.tenant = $1',
        values: [tid, found.map((r) => seqOf.get(r.id)), found.map((r) => r.json), found.map((r) => (r.authorityKey === null ? null : keyIds.get(r.authorityKey)))],
      });
      await c.query({
        name: 'rewrite_carriers',
        // The data a statement's request carried stays its authority's (now the new one).
        text: 'UPDATE statement_attachments l SET carrier = coalesce(s.authority, 0) FROM statements s WHERE s.seq = l.seq AND l.seq = ANY($1::bigint[]) AND l.carrier IS NOT NULL AND s.tenant = $2',
        values: [found.map((r) => seqOf.get(r.id)), tid],
      });
      await c.query({
        name: 'rewrite_agents',
        // The key ids are the tenant's own (src/store/postgres/dialect.ts, LINK_ROLES).
        text: 'INSERT INTO statement_agents (agent, role, seq) SELECT k, d, s FROM unnest($1::int[], $2::bigint[], $3::smallint[]) AS t(k, s, d)',
        values: [agents.map((a) => a[0]), agents.map((a) => a[1]), agents.map((a) => a[2])],
      });
      // What reaches a rewritten statement copied its agents and authority: rebuilt.
      await this.updateReach(
        c,
        tid,
        [],
        found.map((r) => Number(seqOf.get(r.id))),
        keyIds,
      );
      // The old agents' keys, once nothing uses them (the new rows are in place).
      await this.dropUnusedKeys(c, tid, unlinked);
    });
  }
}
