/**
 * The forwarding outbox (see Outbox in ./types.ts) once for every backend: what a claim,
 * renewal, settlement, re-queue and the figures do, as programs (./program.ts) of the
 * backend's OutboxDialect (the `outbox` part of its dialect), run by its store. Rows are queued by
 * the statement write, inside its transaction (each backend's own outbox module).
 */
import { audited } from './admin.ts';
import type { Program, ProgramRunner } from './program.ts';
import type { ChangeAudit, DeadLetter, ForwardingStats, Outbox, OutboxItem, OutboxSettlement } from './types.ts';

type Row = Record<string, unknown>;

/** What differs in the backends' outbox SQL (SQLite: this process's clock, one row per statement; PostgreSQL: the database clock, arrays). */
export interface OutboxDialect {
  /** Claims up to `limit` due, unleased items of `target` for `leaseMs`, oldest due first. */
  claim(target: string, owner: string, limit: number, leaseMs: number): Program<OutboxItem[]>;
  /** The BEGIN of the claim's transaction; none when the claim is one statement. */
  claimBegin?: string;
  renew(owner: string, ids: string[], leaseMs: number): Program<void>;
  /** Deletes delivered items `owner` holds; returns how many. */
  delivered(owner: string, ids: string[]): Program<number>;
  /** Back in the queue after their delay, one attempt more; returns how many. */
  retry(owner: string, items: NonNullable<OutboxSettlement['retry']>): Program<number>;
  dead(owner: string, items: NonNullable<OutboxSettlement['dead']>): Program<void>;
  release(owner: string, ids: string[]): Program<void>;
  /** Adds to a target's delivered and retried counters. */
  count(target: string, delivered: number, retried: number): Program<void>;
  requeueDead(target?: string): Program<number>;
  /** Per target: queued and dead counts, the counters, the newest dead letter's error (for mergeStats). */
  stats(): Program<[Row[], Row[], Row[]]>;
  /** Dead letters in id order (for the admin API's list). */
  deadLetters(opts: { target?: string; after?: number; limit: number }): Program<DeadLetter[]>;
  /** Per target: the stored_ms of the statement of its oldest (lowest seq) queued item. */
  oldestQueued(): Program<Row[]>;
  /** The BEGIN of the figures' snapshot; none when the reads already agree (one synchronous connection). */
  statsBegin?: string;
}

export class StoreOutbox implements Outbox {
  protected readonly port: ProgramRunner;
  protected readonly d: OutboxDialect;

  constructor(port: ProgramRunner, dialect: OutboxDialect) {
    this.port = port;
    this.d = dialect;
  }

  claim(target: string, owner: string, limit: number, leaseMs: number): Promise<OutboxItem[]> {
    const program = this.d.claim(target, owner, limit, leaseMs);
    return this.d.claimBegin === undefined ? this.port.run(program) : this.port.transaction(program, this.d.claimBegin);
  }

  async renew(owner: string, ids: string[], leaseMs: number): Promise<void> {
    if (!ids.length) return;
    await this.port.run(this.d.renew(owner, ids, leaseMs));
  }

  async settle(target: string, owner: string, s: OutboxSettlement): Promise<void> {
    const d = this.d;
    await this.port.transaction(
      (function* () {
        const delivered = s.delivered?.length ? yield* d.delivered(owner, s.delivered) : 0;
        const retried = s.retry?.length ? yield* d.retry(owner, s.retry) : 0;
        if (s.dead?.length) yield* d.dead(owner, s.dead);
        if (s.release?.length) yield* d.release(owner, s.release);
        if (delivered || retried) yield* d.count(target, delivered, retried);
      })(),
    );
  }

  requeueDead(target?: string, audit?: ChangeAudit): Promise<number> {
    const program = this.d.requeueDead(target);
    return audit ? this.port.transaction(audited(program, audit)) : this.port.run(program);
  }

  deadLetters(opts: { target?: string; after?: number; limit: number }): Promise<DeadLetter[]> {
    return this.port.run(this.d.deadLetters(opts));
  }

  async oldestQueued(): Promise<{ target: string; storedMs: number }[]> {
    return (await this.port.run(this.d.oldestQueued())).map((r) => ({ target: String(r.target), storedMs: Number(r.stored_ms) }));
  }

  async stats(): Promise<ForwardingStats[]> {
    const program = this.d.stats();
    const [counts, counters, errors] = await (this.d.statsBegin === undefined ? this.port.run(program) : this.port.transaction(program, this.d.statsBegin));
    return mergeStats(counts, counters, errors);
  }
}

/** The oldest queued item's statement per target: the same SQL on both backends (min(seq) from the outbox index, then one statement each). */
export const OLDEST_QUEUED_SQL =
  'SELECT q.target, s.stored_ms FROM (SELECT target, min(seq) AS seq FROM forward_outbox WHERE state = 0 GROUP BY target) q JOIN statements s ON s.seq = q.seq';

/** A dead letter from its row (`statement_id` as the backend's dialect spells it). */
export const toDeadLetter = (r: Row, statementId: string): DeadLetter => ({
  id: String(r.id),
  target: String(r.target),
  store: String(r.tenant),
  statementId,
  attempts: Number(r.attempts),
  lastError: r.last_error == null ? null : String(r.last_error),
});

/**
 * Per-target forwarding figures (both backends) from the outbox counts by target (`queued`,
 * `dead`), the counters table (`delivered`, `retried`) and one dead letter's `last_error` per target.
 */
function mergeStats(counts: Row[], counters: Row[], lastErrors: Row[]): ForwardingStats[] {
  const out = new Map<string, ForwardingStats>();
  const of = (target: unknown) => {
    const key = String(target);
    let s = out.get(key);
    if (!s) out.set(key, (s = { target: key, queued: 0, delivered: 0, retried: 0, dead: 0 }));
    return s;
  };
  for (const r of counts) Object.assign(of(r.target), { queued: Number(r.queued), dead: Number(r.dead) });
  for (const r of counters) Object.assign(of(r.target), { delivered: Number(r.delivered), retried: Number(r.retried) });
  for (const r of lastErrors) if (r.last_error != null) of(r.target).lastError = String(r.last_error);
  return [...out.values()].sort((a, b) => a.target.localeCompare(b.target));
}
