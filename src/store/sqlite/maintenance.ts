/**
 * The SQLite backend's maintenance writes: erasure and retention delete statements
 * (deleteStatements), pseudonymisation rewrites them (rewriteStatements), each in one
 * transaction with their link rows, reach rows, counts and unused keys. The statement writes
 * build on it (./store.ts).
 */
import type { Statement } from '../../xapi/types.ts';
import { indexRows } from '../../xapi/statement.ts';
import { dayOf } from '../overview.ts';
import { type ReachSeed, rebuildReach } from '../reach.ts';
import { seqBucket, uuidBytes } from '../sql.ts';
import type { StatementRewrite } from '../types.ts';
import { SqliteCounts } from './counts.ts';
import { BY_ID, ID_LEVELS } from './ids.ts';
import { SqliteReaders } from './readers.ts';
import { runProgram } from './runner.ts';

type Row = Record<string, unknown>;

/** The rows keyed by a deleted statement's seq (each through an index on seq: test/store/sqlite-delete-plans.test.ts). */
export const FORGET_BY_SEQ_SQL = [
  'DELETE FROM forward_outbox WHERE seq = ?',
  'DELETE FROM statement_attachments WHERE seq = ?',
  'DELETE FROM statement_violations WHERE seq = ?',
  'DELETE FROM statements WHERE seq = ?',
] as const;

export abstract class SqliteMaintenance extends SqliteReaders {
  /** The Overview's counts, kept by every write and deletion of statements (../overview.ts). */
  protected readonly overviewCounts = new SqliteCounts((sql) => this.q(sql));

  /** The reach rows (src/store/reach.ts: rebuildReach) of new StatementRefs (`seeds`) and of the statements in `stored` and those reaching them. */
  protected updateReach(tenant: number, seeds: ReachSeed[], stored: number[]): void {
    if (seeds.length || stored.length) runProgram(this.handle, rebuildReach(this.dialect.reach, tenant, seeds, stored));
  }

  // ----- data lifecycle ----------------------------------------------------------------------

  async deleteStatements(tenant: string, ids: string[]): Promise<{ statements: number; attachments: number }> {
    const tid = this.tenantId(tenant);
    if (tid === undefined) return { statements: 0, attachments: 0 };
    return this.tx(() => {
      this.checkEpoch();
      const hashes = new Set<string>();
      const agents = new Set<number>();
      const erased: number[] = [];
      const deleted = new Map<string, number>();
      let statements = 0;
      for (const id of ids) {
        const idBytes = uuidBytes(id);
        const r = this.q(`SELECT seq, full, authority, stored_ms, verb FROM statements WHERE ${BY_ID}`).get(tid, idBytes) as Row | undefined;
        if (!r) continue;
        const seq = Number(r.seq);
        const counted = `${dayOf(Number(r.stored_ms))} ${Number(r.verb)}`;
        deleted.set(counted, (deleted.get(counted) ?? 0) + 1);
        for (const a of this.q('SELECT sha2 FROM statement_attachments WHERE seq = ?').all(seq) as Row[]) hashes.add(String(a.sha2));
        // Link rows by primary key: their keys are the statement's own, as prepareStatement made them.
        const statement = JSON.parse(String(r.full)) as Statement;
        for (const k of this.deleteAgentLinks(tid, seq, statement)) agents.add(k);
        if (r.authority !== null) agents.add(Number(r.authority));
        const activity = this.q('DELETE FROM statement_activities WHERE tenant = ? AND bucket = ? AND activity = (SELECT id FROM keys WHERE tenant = ? AND key = ?) AND seq = ?');
        for (const a of indexRows(statement).activities) activity.run(tid, seqBucket(seq), tid, a.id, seq);
        // Its forwarding if still queued, its attachment links, its violations, itself.
        for (const sql of FORGET_BY_SEQ_SQL) this.q(sql).run(seq);
        for (const level of ID_LEVELS) this.q(`DELETE FROM ${level} WHERE tenant = ? AND id = ?`).run(tid, idBytes);
        erased.push(seq);
        statements++;
      }
      this.overviewCounts.uncount(tid, deleted);
      // Its own reach rows go, and the chains through it end there now.
      this.updateReach(tid, [], erased);
      let attachments = 0;
      // The data goes once no remaining statement of the tenant carried it (a declaration by hash keeps nothing).
      for (const h of hashes) {
        const linked = this.q(
          'SELECT 1 FROM statement_attachments sa JOIN statements s ON s.seq = sa.seq WHERE sa.sha2 = ? AND sa.carrier IS NOT NULL AND s.tenant = ? LIMIT 1',
        ).get(h, tid);
        if (!linked) attachments += Number(this.q('DELETE FROM attachments WHERE tenant = ? AND sha2 = ?').run(tenant, h).changes);
      }
      this.dropUnusedKeys(tid, agents);
      return { statements, attachments };
    });
  }

  async rewriteStatements(tenant: string, rows: StatementRewrite[]): Promise<void> {
    const tid = this.tenantId(tenant);
    if (tid === undefined) return;
    this.tx(() => {
      this.checkEpoch();
      const agent = this.q('INSERT INTO statement_agents (tenant, bucket, agent, seq, role) VALUES (?, ?, ?, ?, ?)');
      const old = new Set<number>();
      const rewritten: number[] = [];
      for (const row of rows) {
        const r = this.q(`SELECT seq, full, authority FROM statements WHERE ${BY_ID}`).get(tid, uuidBytes(row.id)) as Row | undefined;
        if (!r) continue;
        const seq = Number(r.seq);
        for (const k of this.deleteAgentLinks(tid, seq, JSON.parse(String(r.full)) as Statement)) old.add(k);
        if (r.authority !== null) old.add(Number(r.authority));
        const ids = this.keyIdsOf(tid, [...row.agents.map((a) => a.key), ...(row.authorityKey === null ? [] : [row.authorityKey])]);
        const authority = row.authorityKey === null ? null : ids.get(row.authorityKey)!;
        this.q('UPDATE statements SET full = ?, authority = ? WHERE seq = ?').run(row.json, authority, seq);
        // The data its request carried stays its authority's (now the new one).
        this.q('UPDATE statement_attachments SET carrier = ? WHERE seq = ? AND carrier IS NOT NULL').run(authority ?? 0, seq);
        for (const a of row.agents) agent.run(tid, seqBucket(seq), ids.get(a.key)!, seq, a.role);
        rewritten.push(seq);
      }
      // What reaches a rewritten statement copied its agents and authority: rebuilt.
      this.updateReach(tid, [], rewritten);
      // The replaced keys (the person's) go once no statement names them.
      this.dropUnusedKeys(tid, old);
    });
  }

  /** Deletes a stored statement's agent link rows by primary key (keys from its JSON); returns their key ids. */
  private deleteAgentLinks(tenant: number, seq: number, statement: Statement): number[] {
    const del = this.q('DELETE FROM statement_agents WHERE tenant = ? AND bucket = ? AND agent = ? AND seq = ?');
    const ids = indexRows(statement).agents.flatMap((a) => this.keyId(tenant, a.key) ?? []);
    for (const id of ids) del.run(tenant, seqBucket(seq), id, seq);
    return ids;
  }
}
