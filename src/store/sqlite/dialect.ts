/**
 * SQLite's dialect (../dialect.ts), everything its SQL does differently: the statement queries'
 * fragments (./query.ts), and the steps of the documents, the forwarding outbox and the reach
 * rows on the store's one connection: times from the store's clock (one process owns a SQLite
 * file), one row at a time (a statement is a call, not a round trip), and no lock but the write
 * transaction's.
 */
import type { StoreDialect } from '../dialect.ts';
import { type DocumentDialect, DOCUMENT_SQL, documentValues, toDocument } from '../documents.ts';
import { OLDEST_QUEUED_SQL, type OutboxDialect, toDeadLetter } from '../outbox.ts';
import { row, rows, run } from '../program.ts';
import type { KeysDialect } from '../keys.ts';
import type { ReachDialect, ReachSeed, ReachStatement } from '../reach.ts';
import { bucketsIn, uuidBytes, uuidText } from '../sql.ts';
import { BY_ID } from './ids.ts';
import { SQLITE } from './query.ts';
import type { SqliteHandle } from './runner.ts';

type Row = Record<string, unknown>;

/** SQLite's dialect, on the store's connection `h`. */
export function sqliteDialect(h: SqliteHandle): StoreDialect {
  return { query: SQLITE, documents: documents(h), outbox: outbox(h), reach: reach(h), keys: SQLITE_KEYS };
}

/**
 * The keys' names: an agent's newest statement found bucket by bucket, newest first (the link
 * table's key is (tenant, bucket, agent, seq)); definitions are keyed by the activity's key id.
 */
const SQLITE_KEYS: KeysDialect = {
  fullBytes: SQLITE.fullBytes,
  // SQLite's LIKE ignores the case of ASCII letters (its default).
  likeIgnoringCase: (k, pattern) => `${k}.key LIKE ${pattern} ESCAPE '\\'`,
  newestWithAgent: (k, tenant) =>
    `(SELECT a.seq FROM statement_agents a WHERE a.tenant = ${tenant} AND a.bucket IN ${bucketsIn()} AND a.agent = ${k}.id AND a.role = 1 ORDER BY a.bucket DESC, a.seq DESC LIMIT 1)`,
  activityName: (k) => `(SELECT CAST(d.definition -> 'name' AS text) FROM definitions d WHERE d.key = ${k}.id)`,
};

/**
 * A document write runs inside one BEGIN IMMEDIATE transaction, which holds the database: no
 * other write can slip between the ETag check and the write, so no lock of its own.
 */
function documents(h: SqliteHandle): DocumentDialect {
  return {
    *lock() {},
    *current(tenant, key, etagOnly) {
      if (etagOnly) {
        const r = yield* row({
          text: 'SELECT etag FROM documents WHERE tenant = ? AND kind = ? AND activity_id = ? AND agent_key = ? AND registration = ? AND doc_id = ?',
          values: documentValues(tenant, key),
        });
        return { etag: r ? String(r.etag) : undefined, nowMs: h.now() };
      }
      const r = yield* row({ text: DOCUMENT_SQL, values: documentValues(tenant, key) });
      return { current: r && toDocument(r), nowMs: h.now() };
    },
    scanOrder: 'ORDER BY kind, activity_id, agent_key, registration, doc_id',
  };
}

const QUEUED = 0;
const DEAD = 1;
const UNLEASE = 'lease_owner = NULL, lease_until_ms = 0';

/** Claims, renewals and settlements are short transactions of their own (the rows are queued by the statement write: ./outbox.ts). */
function outbox(h: SqliteHandle): OutboxDialect {
  return {
    *claim(target, owner, limit, leaseMs) {
      const now = h.now();
      const ids = (yield* rows({
        text:
          'UPDATE forward_outbox SET lease_owner = ?, lease_until_ms = ? WHERE id IN (SELECT id FROM forward_outbox ' +
          'WHERE target = ? AND state = 0 AND due_ms <= ? AND lease_until_ms <= ? ORDER BY due_ms, id LIMIT ?) RETURNING id',
        values: [owner, now + leaseMs, target, now, now, limit],
      })).map((r) => Number(r.id));
      if (!ids.length) return [];
      const claimed = yield* rows({
        text:
          'SELECT o.id, o.attempts, t.name AS tenant, s.full FROM forward_outbox o JOIN statements s ON s.seq = o.seq JOIN tenants t ON t.id = s.tenant ' +
          'WHERE o.id IN (SELECT value FROM json_each(?)) ORDER BY o.due_ms, o.id',
        values: [JSON.stringify(ids)],
      });
      return claimed.map((r) => ({ id: String(r.id), attempts: Number(r.attempts), tenant: String(r.tenant), json: String(r.full) }));
    },
    claimBegin: 'BEGIN IMMEDIATE',
    *renew(owner, ids, leaseMs) {
      yield* run({
        text: 'UPDATE forward_outbox SET lease_until_ms = ? WHERE lease_owner = ? AND id IN (SELECT value FROM json_each(?))',
        values: [h.now() + leaseMs, owner, JSON.stringify(ids.map(Number))],
      });
    },
    *delivered(owner, ids) {
      return yield* run({ text: 'DELETE FROM forward_outbox WHERE lease_owner = ? AND id IN (SELECT value FROM json_each(?))', values: [owner, JSON.stringify(ids.map(Number))] });
    },
    *retry(owner, items) {
      const now = h.now();
      let n = 0;
      for (const r of items) {
        n += yield* run({
          text: `UPDATE forward_outbox SET attempts = attempts + 1, due_ms = ?, last_error = ?, ${UNLEASE} WHERE id = ? AND lease_owner = ?`,
          values: [now + r.delayMs, r.error, Number(r.id), owner],
        });
      }
      return n;
    },
    *dead(owner, items) {
      for (const d of items) {
        yield* run({
          text: `UPDATE forward_outbox SET state = ${DEAD}, attempts = attempts + 1, last_error = ?, ${UNLEASE} WHERE id = ? AND lease_owner = ?`,
          values: [d.error, Number(d.id), owner],
        });
      }
    },
    *release(owner, ids) {
      for (const id of ids) yield* run({ text: `UPDATE forward_outbox SET ${UNLEASE} WHERE id = ? AND lease_owner = ?`, values: [Number(id), owner] });
    },
    *count(target, delivered, retried) {
      yield* run({
        text:
          'INSERT INTO forward_counters (target, delivered, retried) VALUES (?, ?, ?) ' +
          'ON CONFLICT (target) DO UPDATE SET delivered = delivered + excluded.delivered, retried = retried + excluded.retried',
        values: [target, delivered, retried],
      });
    },
    *requeueDead(target) {
      const where = target === undefined ? '' : ' AND target = ?';
      return yield* run({
        text: `UPDATE forward_outbox SET state = ${QUEUED}, attempts = 0, due_ms = 0, last_error = NULL WHERE state = ${DEAD}${where}`,
        values: target === undefined ? [] : [target],
      });
    },
    *deadLetters({ target, after, limit }) {
      const found = yield* rows({
        text:
          'SELECT o.id, o.target, t.name AS tenant, s.id AS statement_id, o.attempts, o.last_error FROM forward_outbox o ' +
          'JOIN statements s ON s.seq = o.seq JOIN tenants t ON t.id = s.tenant ' +
          `WHERE o.state = ${DEAD} AND (? IS NULL OR o.target = ?) AND o.id > ? ORDER BY o.id LIMIT ?`,
        values: [target ?? null, target ?? null, after ?? 0, limit],
      });
      return found.map((r) => toDeadLetter(r, uuidText(r.statement_id as Uint8Array)));
    },
    *oldestQueued() {
      return yield* rows({ text: OLDEST_QUEUED_SQL, values: [] });
    },
    *stats() {
      // One connection, read synchronously: the three reads agree without a transaction.
      return [
        yield* rows({ text: 'SELECT target, sum(state = 0) AS queued, sum(state = 1) AS dead FROM forward_outbox GROUP BY target', values: [] }),
        yield* rows({ text: 'SELECT target, delivered, retried FROM forward_counters', values: [] }),
        yield* rows({ text: 'SELECT target, last_error FROM forward_outbox WHERE id IN (SELECT max(id) FROM forward_outbox WHERE state = 1 GROUP BY target)', values: [] }),
      ] as [Row[], Row[], Row[]];
    },
  };
}

/**
 * A StatementRef's reach rows, by its seq. The two link tables are WITHOUT ROWID with the seq
 * second in their own index: for a DELETE SQLite picks the primary key's tenant prefix instead,
 * a walk of the whole store's rows per statement (9 ms each at 10M statements, the prune's and
 * erase's whole cost there), so the index is named.
 */
export const REACH_FORGET_SQL = [
  'DELETE FROM statement_reach WHERE tenant = ? AND seq = ?',
  'DELETE FROM reach_agents INDEXED BY reach_agents_seq WHERE tenant = ? AND seq = ?',
  'DELETE FROM reach_activities INDEXED BY reach_activities_seq WHERE tenant = ? AND seq = ?',
] as const;

/** The reach rows (../reach.ts): row by row, through every level of the id index; key ids from the writer's cache. */
function reach(h: SqliteHandle): ReachDialect {
  return {
    *forget(tenant, stored) {
      const seqs = new Set(stored);
      for (const via of stored)
        for (const r of yield* rows({ text: 'SELECT seq FROM statement_reach WHERE tenant = ? AND via = ?', values: [tenant, via] })) seqs.add(Number(r.seq));
      const seeds: ReachSeed[] = [];
      for (const seq of seqs) {
        for (const text of REACH_FORGET_SQL) yield* run({ text, values: [tenant, seq] });
        const r = yield* row({ text: 'SELECT ref_id, authority FROM statements WHERE tenant = ? AND seq = ?', values: [tenant, seq] });
        if (r && r.ref_id !== null) seeds.push({ seq, refId: uuidText(r.ref_id as Uint8Array), authority: r.authority === null ? null : Number(r.authority) });
      }
      return seeds;
    },
    *targets(tenant, ids) {
      const out: ReachStatement[] = [];
      for (const id of ids) {
        const r = yield* row({ text: `SELECT seq, id, ref_id, verb, registration, authority, full FROM statements WHERE ${BY_ID}`, values: [tenant, uuidBytes(id)] });
        if (!r) continue;
        const ref = r.ref_id === null ? null : uuidText(r.ref_id as Uint8Array);
        out.push({
          seq: Number(r.seq),
          id,
          refId: ref,
          verb: Number(r.verb),
          registration: r.registration,
          authority: r.authority === null ? null : Number(r.authority),
          full: String(r.full),
        });
      }
      return out;
    },
    // The writer's cache and its own inserts (in this transaction): no statement to yield.
    // biome-ignore lint/correctness/useYield: a program step of the dialect's interface that needs no SQL here
    *keyIds(tenant, keys) {
      return h.keyIds(tenant, keys);
    },
    *write(tenant, out) {
      for (const r of out.reach) {
        yield* run({
          text: 'INSERT INTO statement_reach (tenant, seq, via, verb, registration, authority) VALUES (?, ?, ?, ?, ?, ?)',
          values: [tenant, r.seq, r.via, r.verb, r.registration, r.authority],
        });
      }
      for (const a of out.agents)
        yield* run({ text: 'INSERT INTO reach_agents (tenant, agent, seq, via, role) VALUES (?, ?, ?, ?, ?)', values: [tenant, a.agent, a.seq, a.via, a.role] });
      for (const a of out.activities)
        yield* run({ text: 'INSERT INTO reach_activities (tenant, activity, seq, via, direct) VALUES (?, ?, ?, ?, ?)', values: [tenant, a.activity, a.seq, a.via, a.direct] });
    },
  };
}
