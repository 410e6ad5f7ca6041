/**
 * Statement ids on SQLite (migrations 10, 18 and 19) in four levels: recent ids in
 * statement_ids_new, merged in key order into statement_ids_mid, that into statement_ids_upper,
 * and that into the large statement_ids, so that random UUIDs do not dirty a leaf of one large
 * index per statement. A lookup by id probes every level.
 *
 * The insert rules look up every new statement's id, and almost every one is new: its probe of
 * the two merged levels (upper and large) reads leaves of B-trees as large as the store (≈ 300 MB
 * at 10M statements) only to find nothing. A Bloom filter of those levels' ids, kept by the
 * writing connection, answers "not there" for all but ≈ 1 % of them, so their lookup reads the two
 * small levels only. The filter may hold ids the levels no longer have (erased, pruned): that only
 * costs a probe. It never misses one: it is built by reading the levels, takes the middle level's
 * ids at each of this connection's merges into the upper one, and starts again when another
 * connection merged.
 */
import type { StatementSync } from 'node:sqlite';

type Row = Record<string, unknown>;

/**
 * When statement ids move between their levels, for a store whose large level holds ids up to
 * seq `merged`: the recent ids (statement_ids_new) into the middle level once `recent` statements
 * have arrived, the middle level into the upper one once it holds `middle`, the upper level into
 * the large one once it holds `upper`. Per statement, a group commit dirties pages of the recent
 * level (more, the more it holds), and a merge rewrites the pages of the level it merges into
 * (on average half of them; all of the large one). These sizes keep the four costs about equal
 * (pages of ≈ 280 ids, groups of ≈ 200): recent = ∜(16,000,000 N), at least 4,096 (up to 17.6M
 * statements); middle = recent² / 200 (84,000); upper = recent × middle / 200 (1.7M). With three
 * levels the large one was rewritten every 430,000 statements at 10M: a load from empty to 10M
 * wrote 24 KiB per statement over its tenth million and kept 77–86 % of its first million's rate;
 * with four, 21 KiB and 82–96 % in three loads (docs/performance.md, "Ten million statements").
 */
export function idLevelsDue(merged: number): { recent: number; middle: number; upper: number } {
  const recent = Math.max(4096, Math.round(Math.sqrt(Math.sqrt(16e6 * merged))));
  const middle = Math.round((recent * recent) / 200);
  return { recent, middle, upper: Math.round((recent * middle) / 200) };
}

/** The levels, recent to large (where an erased id is deleted from). */
export const ID_LEVELS = ['statement_ids_new', 'statement_ids_mid', 'statement_ids_upper', 'statement_ids'] as const;

/** A statement's row by (tenant, id), through every level of the id index. */
export const BY_ID = 'seq = (SELECT seq FROM statement_seqs WHERE tenant = ? AND id = ?)';

/** BY_ID in the recent and middle levels only: for an id the filter says the merged levels do not have. */
export const BY_RECENT_ID =
  'seq = (SELECT seq FROM (SELECT tenant, id, seq FROM statement_ids_new UNION ALL SELECT tenant, id, seq FROM statement_ids_mid) WHERE tenant = ? AND id = ?)';

/** Where a build starts: tenant ids are positive. */
const START: { tenant: number; id: Uint8Array } = { tenant: 0, id: new Uint8Array(0) };

/** Ids read from the merged levels per step of a build (≈ 9 ms): the build, ≈ 0.9 s per million ids, goes on between group commits. */
const BUILD_STEP = 10_000;
/** Bits per id (7 probes): ≈ 0.8 % false positives once a part of the filter is full. */
const BITS_PER_ID = 10;
const PROBES = 7;
/** Ids the first part of a filter is made for, at least (1.25 MB). */
const MIN_CAPACITY = 1 << 20;

/** A Bloom filter of (tenant, 16-byte id) in parts: a full part is kept, the next one twice its size. */
export class IdFilter {
  private readonly parts: { bits: Uint32Array; size: number; capacity: number; count: number }[] = [];

  constructor(expected: number) {
    this.addPart(Math.max(MIN_CAPACITY, Math.ceil(expected * 1.25)));
  }

  private addPart(capacity: number): void {
    const words = Math.ceil((capacity * BITS_PER_ID) / 32);
    this.parts.push({ bits: new Uint32Array(words), size: words * 32, capacity, count: 0 });
  }

  /** Memory held, in bytes. */
  get bytes(): number {
    return this.parts.reduce((n, p) => n + p.bits.byteLength, 0);
  }

  add(tenant: number, id: Uint8Array): void {
    let part = this.parts[this.parts.length - 1];
    if (part.count >= part.capacity) {
      this.addPart(part.capacity * 2);
      part = this.parts[this.parts.length - 1];
    }
    part.count++;
    const [h1, h2] = hashes(tenant, id);
    for (let i = 0; i < PROBES; i++) {
      const bit = ((h1 + Math.imul(i, h2)) >>> 0) % part.size;
      part.bits[bit >>> 5] |= 1 << (bit & 31);
    }
  }

  /** False: the id was never added. True: it may have been. */
  mayHave(tenant: number, id: Uint8Array): boolean {
    const [h1, h2] = hashes(tenant, id);
    for (const part of this.parts) {
      let all = true;
      for (let i = 0; i < PROBES && all; i++) {
        const bit = ((h1 + Math.imul(i, h2)) >>> 0) % part.size;
        all = (part.bits[bit >>> 5] & (1 << (bit & 31))) !== 0;
      }
      if (all) return true;
    }
    return false;
  }
}

/**
 * Two 32-bit hashes of the id's 16 bytes and the tenant (MurmurHash3's mixing). Client ids need
 * not be random (time-based UUIDs share most bytes), so every byte is mixed; ids made to collide
 * only cost their probes.
 */
function hashes(tenant: number, id: Uint8Array): [number, number] {
  let a = 0x9747b28c ^ tenant;
  let b = 0x5bd1e995 ^ Math.imul(tenant, 0x85ebca6b);
  for (let o = 0; o < 16; o += 4) {
    let k = id[o] | (id[o + 1] << 8) | (id[o + 2] << 16) | (id[o + 3] << 24);
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    a ^= k;
    a = (a << 13) | (a >>> 19);
    a = (Math.imul(a, 5) + 0xe6546b64) | 0;
    b ^= Math.imul(k, 0x27d4eb2f);
    b = (b << 17) | (b >>> 15);
    b = (Math.imul(b, 9) + 0x165667b1) | 0;
  }
  return [fmix(a), fmix(b) | 1];
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/**
 * The writing connection's view of the id levels: when to merge them (merge) and which levels a
 * lookup must read (mergedMayHave). Its filter of the merged levels (upper and large) is built a
 * step at a time (buildStep, between transactions); until it is complete every lookup reads every
 * level.
 */
export class StatementIds {
  private filter?: IdFilter;
  /** The build's position in the merged levels: the last id read (before the first: below every tenant's id). */
  private cursor = START;
  /** The filter holds every id of the merged levels: lookups may trust it. */
  private complete = false;
  /** id_merge.upper_through as this connection last saw it: another value means another connection merged. */
  private upperThrough = -1;

  private readonly q: (sql: string) => StatementSync;

  constructor(q: (sql: string) => StatementSync) {
    this.q = q;
  }

  /** Starts (or starts again) the filter's build. Reads nothing yet. */
  private restart(upperThrough: number): void {
    const seq = this.q("SELECT seq FROM sqlite_sequence WHERE name = 'statements'").get() as Row | undefined;
    this.filter = new IdFilter(Number(seq?.seq ?? 0));
    this.cursor = START;
    this.complete = false;
    this.upperThrough = upperThrough;
  }

  /** Whether the filter is being built (lookups read every level meanwhile). */
  get building(): boolean {
    return this.filter !== undefined && !this.complete;
  }

  /** Gives the filter up after a failed build step: lookups read every level until the next check starts again. */
  abandon(): void {
    this.filter = undefined;
    this.complete = false;
    this.upperThrough = -1;
  }

  /**
   * At the start of a write transaction: a merge into the merged levels by another connection
   * (another process on the file) makes the filter unsound, so it is built again. Every such
   * merge moves id_merge.upper_through (one into the large level comes with one into the upper).
   */
  check(): void {
    const upper = Number((this.q('SELECT upper_through FROM id_merge').get() as Row).upper_through);
    if (upper !== this.upperThrough) this.restart(upper);
  }

  /** Whether a lookup of this id must read the merged levels. */
  mergedMayHave(tenant: number, id: Uint8Array): boolean {
    return !this.complete || this.filter!.mayHave(tenant, id);
  }

  /**
   * Reads the next ids of the merged levels (in key order across both) into the filter; false
   * once the filter is complete (or there is none to build). Outside a transaction: each step is a
   * read of its own, and ids that reach those levels meanwhile come from this connection's merges
   * (taken there) or another's (check starts again).
   */
  buildStep(): boolean {
    if (!this.filter || this.complete) return false;
    const read = this.q(
      `SELECT tenant, id FROM statement_ids WHERE (tenant, id) > (?1, ?2) UNION ALL SELECT tenant, id FROM statement_ids_upper WHERE (tenant, id) > (?1, ?2) ORDER BY 1, 2 LIMIT ${BUILD_STEP}`,
    );
    read.setReturnArrays(true);
    const rows = read.all(this.cursor.tenant, this.cursor.id) as unknown as [number, Uint8Array][];
    for (const [tenant, id] of rows) this.filter.add(Number(tenant), id);
    if (rows.length < BUILD_STEP) {
      this.complete = true;
      return false;
    }
    const [tenant, id] = rows[rows.length - 1];
    this.cursor = { tenant: Number(tenant), id };
    return true;
  }

  /**
   * At the end of a write transaction: moves the recent ids into the middle level, that into the
   * upper one, and that into the large one, each when idLevelsDue says; the ids moved into the
   * upper level join the filter. True when the large level grew.
   */
  merge(): boolean {
    const r = this.q('SELECT through, upper_through, big_through, (SELECT max(seq) FROM statements) AS last FROM id_merge').get() as Row;
    const last = Number(r.last ?? 0);
    const due = idLevelsDue(Number(r.big_through));
    if (last - Number(r.through) < due.recent) return false;
    this.move('statement_ids_new', 'statement_ids_mid');
    this.q('UPDATE id_merge SET through = ?').run(last);
    if (last - Number(r.upper_through) < due.middle) return false;
    if (this.filter) {
      const moved = this.q('SELECT tenant, id FROM statement_ids_mid');
      moved.setReturnArrays(true);
      for (const [tenant, id] of moved.iterate() as Iterable<[number, Uint8Array]>) this.filter.add(Number(tenant), id);
    }
    this.move('statement_ids_mid', 'statement_ids_upper');
    this.q('UPDATE id_merge SET upper_through = ?').run(last);
    this.upperThrough = last;
    if (last - Number(r.big_through) < due.upper) return false;
    this.move('statement_ids_upper', 'statement_ids');
    this.q('UPDATE id_merge SET big_through = ?').run(last);
    return true;
  }

  /** A level's ids into the next one, in key order (each page of the next one written once). */
  private move(from: string, to: string): void {
    this.q(`INSERT INTO ${to} (tenant, id, seq) SELECT tenant, id, seq FROM ${from} ORDER BY tenant, id`).run();
    this.q(`DELETE FROM ${from}`).run();
  }
}
