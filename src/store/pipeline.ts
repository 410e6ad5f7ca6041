/**
 * The statement write pipeline's stages both backends share:
 *
 * 1. GroupQueue: requests queued and taken as groups (one transaction per group, each request
 *    still all-or-nothing). SQLite keeps one queue for its connection and writes a group
 *    synchronously on the next turn of the event loop; PostgreSQL keeps one per tenant, capped,
 *    drained while the tenant's previous group holds its lock.
 * 2. statementKeys and KeyCache: the dictionary keys a group names and the ids this process knows
 *    (the SQL that finds or creates the others is each backend's).
 * 3. InsertBasis and GroupPlanner: what the insert rules need, read once for a group (a tenant's
 *    requests of it), and the rules applied to its requests in order.
 * 4. The reach rebuild (./reach.ts); the outbox rows are queued in the same transaction by each
 *    backend's outbox module.
 *
 * The write itself stays per backend, on purpose: SQLite writes each request row by row on its
 * connection's cached statements (≈ 60 µs of CPU per statement in all: a program step per row
 * would cost more than the difference it hides), one request at a time so that a SAVEPOINT can
 * isolate one that fails; PostgreSQL writes the whole group in one statement (./postgres/write.ts)
 * after its snapshot is checked under the tenant lock, as round trips are its cost.
 */
import { type EarlierVoiding, type InsertPlan, type KnownStatement, planInsert } from '../xapi/insert.ts';
import type { PreparedStatement } from '../xapi/statement.ts';
import type { AttachmentBlob, InsertOutcome } from './types.ts';

/** A request waiting for its group: its statements, and how it is answered. */
export interface GroupRequest {
  tenant: string;
  batch: PreparedStatement[];
  attachments: AttachmentBlob[];
  resolve(outcome: InsertOutcome): void;
  reject(err: unknown): void;
}

/**
 * Requests by queue key, taken in arrival order as groups of at most `maxStatements` statements
 * (a single larger request still goes, alone). `arrived` is the backend's scheduler: told of every
 * request, and whether its queue was empty before it.
 */
export class GroupQueue {
  private readonly queues = new Map<string, GroupRequest[]>();
  private readonly maxStatements: number;
  private readonly arrived: (key: string, first: boolean) => void;

  constructor(maxStatements: number, arrived: (key: string, first: boolean) => void) {
    this.maxStatements = maxStatements;
    this.arrived = arrived;
  }

  /** Queues a request under `key`; settles once its group is written. */
  add(key: string, tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[]): Promise<InsertOutcome> {
    return new Promise((resolve, reject) => {
      let q = this.queues.get(key);
      if (!q) this.queues.set(key, (q = []));
      q.push({ tenant, batch, attachments, resolve, reject });
      this.arrived(key, q.length === 1);
    });
  }

  has(key: string): boolean {
    return this.queues.has(key);
  }

  /** The next group of `key`'s queue (empty when none waits). */
  take(key: string): GroupRequest[] {
    const q = this.queues.get(key);
    if (!q) return [];
    let n = 0;
    let size = 0;
    while (n < q.length && (n === 0 || size + q[n].batch.length <= this.maxStatements)) size += q[n++].batch.length;
    if (n < q.length) return q.splice(0, n);
    this.queues.delete(key);
    return q;
  }
}

/** The dictionary keys statements refer to: verbs, authorities, agents, activities (first use first). */
export function statementKeys(statements: PreparedStatement[]): Set<string> {
  const keys = new Set<string>();
  for (const p of statements) {
    keys.add(p.verb);
    if (p.authorityKey !== null) keys.add(p.authorityKey);
    for (const a of p.agents) keys.add(a.key);
    for (const a of p.activities) keys.add(a.id);
  }
  return keys;
}

/** What the insert rules need of the store for one tenant's requests of a group, read before the first is decided. */
export interface InsertBasis {
  /** Stored statements by id: the requests' ids and their voiding statements' targets (rowsToRead). */
  known: Map<string, KnownStatement>;
  /** Stored voiding statements by the id (not stored) they target. */
  voidedEarlier: Map<string, EarlierVoiding[]>;
}

/**
 * The insert rules (src/xapi/insert.ts) over a group's requests, in order, on one basis read for
 * all of them: a request is decided seeing what the earlier ones of its group stored (`stored`,
 * once its write succeeded), as if each had been read after the one before.
 */
export class GroupPlanner {
  private readonly basis: InsertBasis;
  private readonly storedIso: string;

  constructor(basis: InsertBasis, storedIso: string) {
    this.basis = basis;
    this.storedIso = storedIso;
  }

  /** A request's plan; throws the LrsError of a rule it breaks. */
  plan(request: Pick<GroupRequest, 'batch' | 'attachments'>): InsertPlan {
    return planInsert(request.batch, request.attachments, this.basis.known, this.basis.voidedEarlier, this.storedIso);
  }

  /** The plan is written: later requests see its statements as stored, and its voiding statements as stored earlier. */
  stored(plan: InsertPlan): void {
    const { known, voidedEarlier } = this.basis;
    for (const f of plan.fresh) {
      known.set(f.p.id, { isVoiding: f.p.voids !== null, statement: f.full });
      if (f.p.voids) voidedBy(voidedEarlier, f.p.voids, { authorityKey: f.p.authorityKey, mineOnly: f.p.mineOnly });
    }
  }
}

/** Adds a voiding statement stored earlier to its target's list (InsertBasis.voidedEarlier). */
export function voidedBy(voidedEarlier: Map<string, EarlierVoiding[]>, target: string, v: EarlierVoiding): void {
  const earlier = voidedEarlier.get(target);
  if (earlier) earlier.push(v);
  else voidedEarlier.set(target, [v]);
}

/**
 * Dictionary ids (the `keys` table) by tenant, as this process learned them, each tenant's at the
 * `keys_epoch` it read (an erasure deletes keys and moves the epoch). SQLite reads the epoch once
 * per write transaction and forgets everything when it moved; PostgreSQL resolves a group's keys
 * before its transaction and its write checks the tenant's epoch under the tenant lock. At most
 * `max` ids in all (then it starts again).
 */
export class KeyCache<E> {
  private readonly tenants = new Map<number, { epoch: E; ids: Map<string, number> }>();
  private size = 0;
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  get(tenant: number, key: string): number | undefined {
    return this.tenants.get(tenant)?.ids.get(key);
  }

  /** The cached ids among `keys` and the keys missing, at the tenant's epoch; undefined when nothing of the tenant is cached. */
  lookup(tenant: number, keys: Iterable<string>): { ids: Map<string, number>; missing: Set<string>; epoch: E } | undefined {
    const cached = this.tenants.get(tenant);
    if (!cached) return undefined;
    const ids = new Map<string, number>();
    const missing = new Set<string>();
    for (const k of keys) {
      const id = cached.ids.get(k);
      if (id === undefined) missing.add(k);
      else ids.set(k, id);
    }
    return { ids, missing, epoch: cached.epoch };
  }

  /** An id learned at `epoch` (a tenant cached at another epoch starts again). */
  set(tenant: number, epoch: E, key: string, id: number): void {
    if (this.size >= this.max) this.forget();
    let cached = this.tenants.get(tenant);
    if (cached && cached.epoch !== epoch) {
      this.forget(tenant);
      cached = undefined;
    }
    if (!cached) this.tenants.set(tenant, (cached = { epoch, ids: new Map() }));
    const before = cached.ids.size;
    cached.ids.set(key, id);
    this.size += cached.ids.size - before;
  }

  add(tenant: number, epoch: E, ids: ReadonlyMap<string, number>): void {
    for (const [key, id] of ids) this.set(tenant, epoch, key, id);
  }

  /** Forgets a tenant's ids, or every tenant's. */
  forget(tenant?: number): void {
    if (tenant === undefined) {
      this.tenants.clear();
      this.size = 0;
      return;
    }
    const cached = this.tenants.get(tenant);
    if (!cached) return;
    this.size -= cached.ids.size;
    this.tenants.delete(tenant);
  }
}
