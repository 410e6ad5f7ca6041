/**
 * Rejected writes, kept (docs/rejections.md): every PUT/POST/DELETE of statements or documents
 * refused with 400, 409 or 413 is kept per store with its reasons and its body, so that an
 * operator can see what producers send wrong and replay it once the cause is fixed (the admin
 * actions over them, replay included, are ./admin/rejections.ts).
 *
 * Keeping never slows nor fails the answer: the server hands each rejection to a RejectionKeeper,
 * which cuts its body on the next turn of the event loop and writes it after the answer, in
 * batches, one write at a time. Its queues are one per (store, credential), served in turn: when
 * they are full, the longest one's oldest is dropped (and counted), so a flooder loses its own,
 * never a quiet writer's. Each write trims its stores to LECTERN_REJECTIONS_MAX, each credential
 * to its fair share, so a flood of bad requests costs at most that many rows per store and evicts
 * the flooder's own.
 */
import { createHash } from 'node:crypto';
import type { AuthUser } from '../auth/types.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { LrsError, ValidationIssue } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { ChangeAudit, DocumentKind, KeptRejection, NewRejection, RejectionReason, RejectionStore } from '../store/types.ts';
import { statementParts } from '../xapi/attachments.ts';
import { mediaTypeOf } from '../xapi/media.ts';
import { parseMultipartMixed } from '../xapi/multipart.ts';
import type { Agent } from '../xapi/types.ts';
import { OpsError } from './errors.ts';

/** The statuses whose writes are kept (401 and 403 only count in /metrics). */
export const KEPT_STATUSES: ReadonlySet<number> = new Set([400, 409, 413]);

/** The resources whose writes are kept, and the document kind of each document resource. */
export const KEPT_RESOURCES: ReadonlyMap<string, DocumentKind | 'statements'> = new Map([
  ['/xAPI/statements', 'statements'],
  ['/xAPI/activities/state', 'state'],
  ['/xAPI/activities/profile', 'activity_profile'],
  ['/xAPI/agents/profile', 'agent_profile'],
] as const);

const WRITE_METHODS = new Set(['PUT', 'POST', 'DELETE']);

/** Whether a refused request is one this module keeps. */
export const isKeptRejection = (path: string, method: string, status: number): boolean => KEPT_STATUSES.has(status) && WRITE_METHODS.has(method) && KEPT_RESOURCES.has(path);

// ----- reasons ---------------------------------------------------------------------------------

/** The section of xAPI-Data (1.0.3 numbering) of each statement property a problem may sit in. */
const DATA_SECTIONS: Record<string, string> = {
  id: '2.4.1',
  actor: '2.4.2',
  verb: '2.4.3',
  object: '2.4.4',
  result: '2.4.5',
  context: '2.4.6',
  timestamp: '2.4.7',
  stored: '2.4.8',
  authority: '2.4.9',
  version: '2.4.10',
  attachments: '2.4.11',
};
const DOCUMENT_SECTIONS: Record<string, string> = { state: '2.3', activity_profile: '2.7', agent_profile: '2.6' };

/** The xAPI requirement a reason points at, where the place or the status says it. */
function requirementOf(path: string, status: number, issue: ValidationIssue): string | undefined {
  const resource = KEPT_RESOURCES.get(path);
  if (status === 413) return 'xAPI-Communication §3.2';
  if (resource && resource !== 'statements') return `xAPI-Communication §${DOCUMENT_SECTIONS[resource]}`;
  if (status === 409) return 'xAPI-Communication §2.1.1';
  const field = issue.loc.find((l): l is string => typeof l === 'string');
  return field && DATA_SECTIONS[field] ? `xAPI-Data §${DATA_SECTIONS[field]}` : undefined;
}

const KIND_OF_STATUS: Record<number, string> = { 400: 'bad_request', 409: 'conflict', 413: 'too_large' };

function withRequirements(path: string, status: number, issues: ValidationIssue[]): RejectionReason[] {
  return issues.map((i) => {
    const requirement = requirementOf(path, status, i);
    return requirement ? { loc: i.loc, msg: i.msg, type: i.type, requirement } : { loc: i.loc, msg: i.msg, type: i.type };
  });
}

/** The reasons of an error answer (`{"detail": [issues]}` or `{"detail": "message"}`), each with its requirement where known. */
export function reasonsOfAnswer(path: string, status: number, answer: string | Buffer | undefined): RejectionReason[] {
  let detail: unknown;
  try {
    detail = (JSON.parse(answer === undefined ? '{}' : answer.toString()) as { detail?: unknown }).detail;
  } catch {
    detail = undefined;
  }
  const issues = Array.isArray(detail)
    ? (detail as ValidationIssue[])
    : [{ loc: [], msg: typeof detail === 'string' ? detail : `refused with ${status}`, type: KIND_OF_STATUS[status] ?? String(status) }];
  return withRequirements(path, status, issues);
}

/** The reasons of a refusal thrown while a rejection was replayed. */
export function reasonsOfError(path: string, err: LrsError): RejectionReason[] {
  return withRequirements(path, err.status, err.issues ?? [{ loc: [], msg: err.message, type: err.kind }]);
}

// ----- replayed statements' ids ---------------------------------------------------------------

/** The namespace of the ids below (RFC 9562 name-based UUIDs): fixed, so that an id never changes. */
const REPLAY_NAMESPACE = Buffer.from('6f0c2a4e9b1d4c7a8e3f5a2b7c9d1e04', 'hex');

/**
 * The id a replayed statement sent without one gets: a name-based UUID (version 5) of its kept
 * rejection (the store, and the rejection's id, never given to another) and its place in the body.
 * Replaying the same rejection again sends the same statements, which the insert rules find
 * stored ("same statement, no change"): a replay cut mid-way, or run twice, stores each once.
 */
export function replayedStatementId(r: Pick<KeptRejection, 'tenant' | 'id'>, index: number): string {
  const h = createHash('sha1')
    .update(REPLAY_NAMESPACE)
    .update(JSON.stringify([r.tenant, r.id, index]))
    .digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

// ----- keeping ---------------------------------------------------------------------------------

/** A refused write as the HTTP layer hands it over (before its body is cut). */
export interface RefusedWrite {
  user: AuthUser;
  /** What the user's access let it do (statements: define, mineOnly). */
  access?: { define: boolean; mineOnly: boolean };
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string | undefined>;
  status: number;
  reasons: RejectionReason[];
  /** The body as received (undefined: not read, e.g. refused for its size). */
  body: Buffer | undefined;
  /** The request's Content-Length, for a body not read. */
  declaredBytes?: number;
}

/**
 * What replay needs of the credential, kept with its rejection (NewRejection.writer, as JSON):
 * what it stores under, and the grant it wrote with, which a replay checks still holds.
 */
export interface KeptWriter {
  agent: Agent;
  define: boolean;
  mineOnly: boolean;
  validation?: 'strict' | 'lax';
  /** Its scopes as given; absent from rejections kept before replays checked the writer. */
  scopes?: string[];
  /** How it authenticated: HTTP Basic (a credentials-file user or a database credential) or a bearer token. */
  signIn?: 'basic' | 'token';
}

export interface KeeperOptions {
  store: RejectionStore;
  /** LECTERN_REJECTIONS_MAX: 0 keeps none. */
  max: number;
  /** LECTERN_REJECTIONS_MAX_BODY. */
  maxBody: number;
  /** LECTERN_REJECTIONS_KEEP_DAYS. */
  keepDays: number;
  clock?: Clock;
  logger?: Pick<Logger, 'warn'>;
  /** Counts what became of each rejection (for /metrics). */
  onCount?: (outcome: 'kept' | 'dropped' | 'failed', n: number) => void;
}

/** Rejections waiting for their body to be cut, in all: each holds a request body for one turn of the event loop. */
export const RAW_MAX = 64;
/** Rejections waiting to be written, in all. */
export const QUEUE_MAX = 1000;
/** Rejections per write. */
const BATCH = 200;
export const DAY_MS = 86_400_000;

const HEADERS_KEPT = ['content-type', 'if-match', 'if-none-match'] as const;

/**
 * Items queued per key, at most `cap` in all, taken round-robin (one of each key in turn), so
 * that a quiet key's wait does not grow with a busy one's. When full, the oldest item of the
 * longest queue makes room: a flood drops its own, never an item of a shorter queue. Finding the
 * longest walks the queues, at most `cap` of them.
 */
export class FairQueue<T> {
  private readonly cap: number;
  /** In serving order: a key served goes to the back. */
  private readonly queues = new Map<string, T[]>();
  private count = 0;

  constructor(cap: number) {
    this.cap = cap;
  }

  get size(): number {
    return this.count;
  }

  /** Queues `item` under `key`; answers whether an older item was dropped to make room. */
  push(key: string, item: T): boolean {
    let dropped = false;
    if (this.count >= this.cap) {
      let longest: [string, T[]] | undefined;
      for (const entry of this.queues) {
        const n = entry[1].length;
        if (!longest || n > longest[1].length || (n === longest[1].length && entry[0] === key)) longest = entry;
      }
      const [k, q] = longest!;
      q.shift();
      if (!q.length) this.queues.delete(k);
      this.count--;
      dropped = true;
    }
    const q = this.queues.get(key);
    if (q) q.push(item);
    else this.queues.set(key, [item]);
    this.count++;
    return dropped;
  }

  /** At most `n` items, one of each key in turn. */
  take(n: number): T[] {
    const out: T[] = [];
    // A key put back is visited again by this same loop: it ends when `n` are taken or none is left.
    for (const [key, q] of this.queues) {
      if (out.length >= n) break;
      out.push(q.shift()!);
      this.count--;
      this.queues.delete(key);
      if (q.length) this.queues.set(key, q);
    }
    return out;
  }
}

/** A refused write's queue: its store and credential. */
const writerKey = (tenant: string, username: string): string => JSON.stringify([tenant, username]);

/**
 * Keeps rejections off the answer's path: `keep` only queues (bounded, fair between stores and
 * credentials: a flooder's oldest are dropped and counted); the bodies are cut on the next turn
 * of the event loop and written in batches, one write at a time. A failed write is logged and
 * counted, never thrown.
 */
export class RejectionKeeper {
  private readonly o: KeeperOptions;
  private readonly clock: Clock;
  private readonly raw = new FairQueue<RefusedWrite>(RAW_MAX);
  private readonly ready = new FairQueue<NewRejection>(QUEUE_MAX);
  private scheduled = false;
  private writing: Promise<void> | undefined;

  constructor(options: KeeperOptions) {
    this.o = options;
    this.clock = options.clock ?? systemClock;
  }

  keep(w: RefusedWrite): void {
    if (this.o.max === 0) return;
    if (this.raw.push(writerKey(w.user.target, w.user.username), w)) this.o.onCount?.('dropped', 1);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.cut());
    }
  }

  /** Resolves once every rejection handed over so far is written (or dropped). */
  async flush(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    while (this.writing) await this.writing;
  }

  private cut(): void {
    this.scheduled = false;
    const atMs = this.clock.now();
    for (const w of this.raw.take(RAW_MAX)) {
      const r = toNewRejection(w, atMs, this.o.maxBody);
      if (this.ready.push(writerKey(r.tenant, r.username), r)) this.o.onCount?.('dropped', 1);
    }
    this.writing ??= this.writeAll().finally(() => (this.writing = undefined));
  }

  private async writeAll(): Promise<void> {
    while (this.ready.size) {
      const batch = this.ready.take(BATCH);
      try {
        await this.o.store.keepRejections(batch, { max: this.o.max, keepSinceMs: this.clock.now() - this.o.keepDays * DAY_MS });
        this.o.onCount?.('kept', batch.length);
      } catch (err) {
        this.o.onCount?.('failed', batch.length);
        this.o.logger?.warn({ err: (err as Error).message, rejections: batch.length }, 'refused writes could not be kept');
      }
    }
  }
}

/** A statements request's JSON part: the only part kept of a multipart body (attachment data never). */
function keptBody(w: RefusedWrite): { body: Buffer | undefined; contentType: string | undefined } {
  const contentType = w.headers['content-type'];
  if (!w.body || KEPT_RESOURCES.get(w.path) !== 'statements' || !mediaTypeOf(contentType).startsWith('multipart/')) return { body: w.body, contentType };
  try {
    const { json } = statementParts(parseMultipartMixed(contentType!, w.body, { maxParts: 2_000_001 }));
    return { body: json, contentType: 'application/json' };
  } catch {
    // Not a multipart body this LRS can read: none of it is kept (it may be attachment data).
    return { body: undefined, contentType };
  }
}

/** The first `max` bytes in memory of their own (never a pooled slab's): the request's buffer is not held. */
function ownCopy(body: Buffer, max: number): Buffer {
  const copy = Buffer.allocUnsafeSlow(Math.min(max, body.length));
  body.copy(copy, 0, 0, copy.length);
  return copy;
}

function toNewRejection(w: RefusedWrite, atMs: number, maxBody: number): NewRejection {
  const { body, contentType } = keptBody(w);
  const headers: Record<string, string> = {};
  for (const name of HEADERS_KEPT) {
    const v = name === 'content-type' ? contentType : w.headers[name];
    if (v !== undefined) headers[name] = v;
  }
  // The scheme only, never the credentials: a bearer token's subject cannot be checked again at replay.
  const signIn = /^\s*bearer\s/i.test(w.headers.authorization ?? '') ? 'token' : 'basic';
  const writer: KeptWriter = { agent: w.user.agent, define: w.access?.define ?? false, mineOnly: w.access?.mineOnly ?? true, scopes: w.user.scopes, signIn };
  if (w.user.validation) writer.validation = w.user.validation;
  return {
    tenant: w.user.target,
    atMs,
    username: w.user.username,
    method: w.method,
    path: w.path,
    query: w.query,
    status: w.status,
    reasons: w.reasons,
    headers,
    version: w.headers['x-experience-api-version'] ?? '',
    body: body && maxBody > 0 ? ownCopy(body, maxBody) : undefined,
    bodyBytes: body?.length ?? w.declaredBytes ?? 0,
    writer: JSON.stringify(writer),
  };
}

// ----- list, show, clear -----------------------------------------------------------------------

export interface RejectionQuery {
  /** One store (-t); every store when undefined. */
  tenant?: string;
  since?: Date;
  /** A reason type or its prefix up to a dot. */
  reason?: string;
  /** At most this many (oldest first); default 1,000. */
  limit?: number;
  /** LECTERN_REJECTIONS_KEEP_DAYS: older ones are not listed (they are dropped at the next keep). */
  keepDays: number;
  clock?: Clock;
}

/** Kept rejections, oldest first. */
export function listRejections(store: RejectionStore, q: RejectionQuery): Promise<KeptRejection[]> {
  const cutoff = (q.clock ?? systemClock).now() - q.keepDays * DAY_MS;
  const sinceMs = Math.max(cutoff, q.since?.getTime() ?? -Infinity);
  return store.listRejections({ tenant: q.tenant, sinceMs, reason: q.reason, limit: q.limit ?? 1000 });
}

const checkId = (id: string): string => {
  if (!/^[1-9]\d{0,15}$/.test(id)) throw new OpsError(`${JSON.stringify(id)} is not a rejection id (the numbers \`lectern rejections list\` shows)`);
  return id;
};

export async function showRejection(store: RejectionStore, id: string): Promise<KeptRejection> {
  const r = await store.getRejection(checkId(id));
  if (!r) throw new OpsError(`no kept rejection with id ${id}`, 'not_found');
  return r;
}

/** Removes the kept rejections of one store, or of all; returns how many. With `audit`, its entry in the same transaction. */
export const clearRejections = (store: RejectionStore, tenant?: string, audit?: ChangeAudit): Promise<number> => store.clearRejections(tenant, audit);
