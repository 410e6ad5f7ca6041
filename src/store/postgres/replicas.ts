/**
 * Read replicas (LECTERN_POSTGRES_READ_URLS): streaming hot standbys that answer the reads of
 * statement queries and the Activities and Agents resources (StatementStore.readView), checked
 * by each process twice a second. Writes, documents and the maintenance reads stay on the primary.
 *
 * Consistent-Through from a replica. Each check takes a "mark" on the primary: its own
 * consistent-through (readers.ts: every statement stored at or before it is committed), then its
 * WAL insert position, which is past the commit record of every such statement. A replica whose
 * replay position has reached a mark's WAL position shows every statement the mark covers, so its
 * consistent-through is that of the newest mark it has reached (the primary's latest when it is
 * caught up), and its lag is how much older that mark is than the latest one. A request takes the
 * mark its replica had reached before its first query, so the header is true of every answer it
 * gets; replay only moves forward, and a replica that replayed more meanwhile only shows more.
 *
 * A replica that fails a read (down, slow: statement timeout, a conflict with recovery), is
 * promoted, or lags more than LECTERN_POSTGRES_REPLICA_MAX_LAG is not read from; the request's
 * remaining reads go to the primary, never a 5xx of the replica's making; checks bring it back.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { LrsError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { ReplicaStatus, StatementReads, StoredRow } from '../types.ts';
import type { PostgresOptions } from './connection.ts';
import { tenantLockKey } from './locks.ts';
import { describe } from './errors.ts';
import { CONSISTENT_THROUGH, PostgresReaders } from './readers.ts';

/** Between two checks of every replica (ms). */
export const CHECK_INTERVAL_MS = 500;
/** Marks kept beyond the largest lag allowed (ms): a replica further behind is lagging, whatever its mark. */
const MARKS_KEPT_MS = 60_000;
const MARKS_MAX = 20_000;

/** The primary's consistent-through at one moment, and a WAL position past every statement it covers. */
export interface Mark {
  nowMs: number;
  /** Per tenant lock key: the start of its oldest insert in flight. */
  busy: Map<number, number>;
  lsn: bigint;
}

/** A mark's consistent-through for a tenant (as PostgresReaders.consistentThrough). */
export const markThrough = (m: Mark, tenant: string): Date => new Date(Math.min(m.nowMs, m.busy.get(tenantLockKey(tenant)) ?? m.nowMs) - 1);

/**
 * The primary's mark: consistent-through, then (a second statement, so after it) the WAL insert
 * position. An insert position at the start of an empty page (after its header: 24 bytes, 40 at
 * a segment's start) is the previous page's end, where a caught-up standby's replay stops.
 */
export const MARK_SQL = `${CONSISTENT_THROUGH}; SELECT (pg_current_wal_insert_lsn() - '0/0')::text AS lsn, current_setting('wal_block_size') AS block, pg_size_bytes(current_setting('wal_segment_size'))::text AS segment`;

/** The primary's mark (MARK_SQL: two statements in one round trip), `run` a simple query on its pool. */
export async function primaryMark(run: (sql: string) => Promise<unknown>): Promise<Mark> {
  type Through = { now_ms: string; objid: string | null; busy_ms: string | null };
  type Position = { lsn: string; block: string; segment: string };
  const [through, position] = (await run(MARK_SQL)) as [{ rows: Through[] }, { rows: Position[] }];
  const busy = new Map<number, number>();
  for (const row of through.rows) if (row.objid !== null && row.busy_ms !== null) busy.set(Number(row.objid), Number(row.busy_ms));
  const p = position.rows[0];
  return { nowMs: Number(through.rows[0].now_ms), busy, lsn: markLsn(BigInt(p.lsn.split('.')[0]), BigInt(p.block), BigInt(p.segment)) };
}

export function markLsn(lsn: bigint, block: bigint, segment: bigint): bigint {
  if (lsn % segment === 40n) return lsn - 40n;
  if (lsn % block === 24n) return lsn - 24n;
  return lsn;
}

/** A replica's reads: PostgresReaders on its own pool, with the consistent-through of the mark it has reached. */
export class ReplicaReader extends PostgresReaders {
  /** The newest mark it had replayed at its last check. */
  mark?: Mark;

  override consistentThrough(tenant: string): Promise<Date> {
    return Promise.resolve(this.mark ? markThrough(this.mark, tenant) : new Date(0));
  }

  /** Whether it is a standby, and where its replay stands. */
  async replayState(): Promise<{ recovery: boolean; lsn: bigint | null }> {
    const r = await this.query<{ recovery: boolean; lsn: string | null }>(
      "SELECT pg_is_in_recovery() AS recovery, (pg_last_wal_replay_lsn() - '0/0')::text AS lsn",
      [],
      'replica_state',
    );
    const row = r.rows[0];
    return { recovery: row.recovery, lsn: row.lsn === null ? null : BigInt(row.lsn.split('.')[0]) };
  }
}

interface Replica extends ReplicaStatus {
  reader: ReplicaReader;
}

/** A promise that rejects after `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  const ac = new AbortController();
  try {
    return await Promise.race([p, sleep(ms, undefined, { signal: ac.signal, ref: false }).then(() => Promise.reject(new Error(`${what} did not answer within ${ms} ms`)))]);
  } finally {
    ac.abort();
  }
}

/** host:port/database of a URL: what /metrics and the logs name a replica by. */
export function serverOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return '?';
  }
}

export class Replicas {
  private readonly list: Replica[];
  private readonly marks: Mark[] = [];
  private next = 0;
  private readonly stop = new AbortController();
  private readonly checkTimeoutMs: number;
  private readonly logger?: Logger;
  private readonly maxLagMs: number;
  private readonly intervalMs: number;
  private loop?: Promise<void>;
  private readonly primaryMark: () => Promise<Mark>;

  constructor(opts: PostgresOptions & { readUrls: string[] }, primaryMark: () => Promise<Mark>) {
    this.primaryMark = primaryMark;
    this.logger = opts.logger;
    this.maxLagMs = opts.replicaMaxLagMs ?? 30_000;
    this.intervalMs = opts.replicaCheckMs ?? CHECK_INTERVAL_MS;
    // A check waits no longer than a request would for a connection, and at most 2 s.
    this.checkTimeoutMs = Math.min(opts.connectTimeoutMs, 2000);
    this.list = opts.readUrls.map((url, i) => {
      const server = serverOf(url);
      // Its pool's own log lines (an outage, a lost connection) name the replica.
      const logger = opts.logger?.child({ replica: i + 1, server });
      return { replica: i + 1, server, state: 'starting', lagMs: null, fallbacks: 0, reader: new ReplicaReader({ ...opts, url, logger, readUrls: [], forwardTargets: [] }) };
    });
  }

  /** Starts the checks (the first at once). */
  start(): void {
    this.loop ??= (async () => {
      while (!this.stop.signal.aborted) {
        await this.check();
        await sleep(this.intervalMs, undefined, { signal: this.stop.signal, ref: false }).catch(() => undefined);
      }
    })();
  }

  status(): ReplicaStatus[] {
    return this.list.map(({ replica, server, state, lagMs, fallbacks }) => ({ replica, server, state, lagMs, fallbacks }));
  }

  /** One check: a mark on the primary, then each replica's replay position against the marks. */
  async check(): Promise<void> {
    try {
      const mark = await within(this.primaryMark(), this.checkTimeoutMs, 'the primary');
      const last = this.marks.at(-1);
      if (!last || mark.lsn >= last.lsn) this.marks.push(mark);
      const oldest = mark.nowMs - this.maxLagMs - MARKS_KEPT_MS;
      let drop = 0;
      while (drop < this.marks.length - 1 && (this.marks[drop].nowMs < oldest || this.marks.length - drop > MARKS_MAX)) drop++;
      this.marks.splice(0, drop);
    } catch {
      // The primary does not answer (its outage is logged by its requests): the replicas are
      // judged against its last mark, and may go on serving reads meanwhile.
    }
    await Promise.all(this.list.map((r) => this.checkReplica(r)));
  }

  private async checkReplica(r: Replica): Promise<void> {
    let s: { recovery: boolean; lsn: bigint | null };
    try {
      s = await within(r.reader.replayState(), this.checkTimeoutMs, 'the replica');
    } catch (err) {
      return this.set(r, 'down', r.lagMs, describe(err));
    }
    if (!s.recovery || s.lsn === null) return this.set(r, 'promoted', null, 'it is no longer a standby (promoted, or not a replica at all)');
    const latest = this.marks.at(-1);
    if (!latest) return this.set(r, 'starting', null, 'the primary has not answered yet');
    let reached: Mark | undefined;
    for (let i = this.marks.length - 1; i >= 0 && !reached; i--) if (this.marks[i].lsn <= s.lsn) reached = this.marks[i];
    if (!reached) {
      const behind = latest.nowMs - this.marks[0].nowMs;
      // Just started: the process's first marks may still be ahead of a replica that keeps up.
      if (r.state === 'starting' && behind <= this.maxLagMs) return;
      return this.set(r, 'lagging', behind, 'it has not replayed the oldest moment this process remembers');
    }
    r.reader.mark = reached;
    const lag = latest.nowMs - reached.nowMs;
    if (lag > this.maxLagMs) return this.set(r, 'lagging', lag, `it is ${lag} ms behind (LECTERN_POSTGRES_REPLICA_MAX_LAG: ${this.maxLagMs})`);
    this.set(r, 'up', lag);
  }

  /** A replica's new state, logged when it changes. */
  private set(r: Replica, state: Replica['state'], lagMs: number | null, reason?: string): void {
    const was = r.state;
    r.state = state;
    r.lagMs = lagMs;
    if (state === was) return;
    const fields = { replica: r.replica, server: r.server, state, lagMs };
    if (state === 'up') this.logger?.info(fields, `read replica ${r.replica} (${r.server}) is read from${was === 'starting' ? '' : ' again'}`);
    else if (state !== 'starting')
      this.logger?.warn({ ...fields, reason }, `read replica ${r.replica} (${r.server}) is not read from: ${reason}; its reads go to another replica or the primary`);
  }

  /** A read it failed: a connection failure or timeout takes it out until a check finds it healthy. */
  failed(r: Replica, err: unknown): void {
    r.fallbacks++;
    if (err instanceof LrsError && err.kind === 'unavailable') this.set(r, 'down', r.lagMs, err.message);
    else this.logger?.debug({ replica: r.replica, err: describe(err) }, 'a read replica failed a read; the primary answered it');
  }

  /** The reads of one request: on the next healthy replica (in turn), else on the primary. */
  view(primary: StatementReads): StatementReads {
    for (let n = 0; n < this.list.length; n++) {
      const r = this.list[(this.next + n) % this.list.length];
      if (r.state !== 'up' || !r.reader.mark) continue;
      this.next = (this.next + n + 1) % this.list.length;
      return new ReplicaView(primary, r, r.reader.mark, this);
    }
    return primary;
  }

  async close(): Promise<void> {
    this.stop.abort();
    await this.loop;
    await Promise.all(this.list.map((r) => r.reader.close()));
  }
}

/** The reads a replica answers as the primary would (ReplicaView makes them from this list). */
const REPLICA_READS = [
  'queryStatements',
  'getAttachments',
  'attachmentSizes',
  'statementsWithAgent',
  'getActivityDefinitions',
] as const satisfies readonly (keyof StatementReads)[];

type Member = (...args: unknown[]) => Promise<unknown>;

// biome-ignore lint/correctness/noUnusedVariables: merged into the class ReplicaView below (its members come from REPLICA_READS)
interface ReplicaView extends Pick<StatementReads, (typeof REPLICA_READS)[number]> {}

/**
 * One request's reads on one replica, with the mark it had reached when the request began. The
 * first failure sends the rest to the primary, and so does a statement it does not have (GET by
 * id after a POST; its attachments are then the primary's too). A `more` cursor it does not know
 * (a page another server gave) is a 400 from it: the primary is asked.
 */
class ReplicaView implements StatementReads {
  private on?: Replica;
  private readonly primary: StatementReads;
  private readonly mark: Mark;
  private readonly replicas: Replicas;

  constructor(primary: StatementReads, replica: Replica, mark: Mark, replicas: Replicas) {
    this.primary = primary;
    this.on = replica;
    this.mark = mark;
    this.replicas = replicas;
  }

  static {
    for (const op of REPLICA_READS) {
      const member: Member = function (this: ReplicaView, ...args) {
        return this.read(
          (r) => (r[op] as Member).apply(r, args),
          () => (this.primary[op] as Member).apply(this.primary, args),
        );
      };
      Object.defineProperty(ReplicaView.prototype, op, { value: member, writable: true, configurable: true });
    }
  }

  private async read<T>(onReplica: (r: ReplicaReader) => Promise<T>, onPrimary: () => Promise<T>): Promise<T> {
    const r = this.on;
    if (r) {
      try {
        return await onReplica(r.reader);
      } catch (err) {
        this.replicas.failed(r, err);
        this.on = undefined;
      }
    }
    return onPrimary();
  }

  getStatement(tenant: string, id: string, voided: boolean, authority?: string): Promise<StoredRow | undefined> {
    return this.read(
      async (r) => {
        const row = await r.getStatement(tenant, id, voided, authority);
        if (row) return row;
        this.on = undefined;
        return this.primary.getStatement(tenant, id, voided, authority);
      },
      () => this.primary.getStatement(tenant, id, voided, authority),
    );
  }

  /**
   * The mark the replica had reached when the request began: never later than what it showed,
   * nor than what the primary shows (the mark is an earlier consistent-through of the primary's).
   */
  consistentThrough(tenant: string): Promise<Date> {
    return Promise.resolve(markThrough(this.mark, tenant));
  }
}
