/**
 * The delivery workers: one loop per active target in each server process, reading the outbox the
 * store fills in its insert transactions. A loop claims a batch (leased, so no other process sends
 * it meanwhile), POSTs it, and settles each item: delivered, retried later with exponential backoff
 * and jitter, or dead-lettered. Loops share nothing but the database, so a dead or slow target
 * never delays another. Client requests never wait for any of this.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from '../log.ts';
import type { AttachmentBlob, ForwardingStats, OutboxItem, OutboxSettlement, Store } from '../store/types.ts';
import { attachmentHashes } from '../xapi/attachments.ts';
import type { Statement } from '../xapi/types.ts';
import { type Outcome, TargetClient } from './client.ts';
import type { ForwardingTarget } from './config.ts';

export interface ForwarderOptions {
  store: Store;
  /** Every configured entry; inactive ones are logged once and ignored. */
  targets: ForwardingTarget[];
  batchSize: number;
  /** First retry delay in ms; doubles per attempt up to MAX_BACKOFF_MS. */
  backoffMs: number;
  leaseMs: number;
  logger: Logger;
}

/**
 * The figures a metrics exporter reads (and /heartbeat, whether there are dead letters): one entry
 * per active target. `entry` is its position in LECTERN_XAPI_FORWARDINGS (as configuration errors
 * name it): the unauthenticated /heartbeat shows that instead of the url.
 */
export type TargetStats = Omit<ForwardingStats, 'lastError'> & { entry: number };

const MAX_BACKOFF_MS = 300_000;

/**
 * Exponential backoff with jitter: base·2^(n-1), capped, then 50–100% of it (`jitter` in [0, 1),
 * random; one value for a whole failed batch keeps its items due together).
 */
export function backoffDelay(baseMs: number, failures: number, jitter = Math.random()): number {
  const full = Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.min(failures - 1, 30));
  return Math.round(full / 2 + jitter * (full / 2));
}

export class Forwarder {
  private readonly opts: ForwarderOptions;
  private readonly workers: TargetWorker[];

  constructor(opts: ForwarderOptions) {
    this.opts = opts;
    const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.workers = opts.targets.filter((t) => t.isActive).map((t) => new TargetWorker(t, owner, opts));
  }

  /** True when at least one target is active. */
  get active(): boolean {
    return this.workers.length > 0;
  }

  start(): void {
    const { logger, store } = this.opts;
    for (const t of this.opts.targets) if (!t.isActive) logger.info({ target: t.url }, 'forwarding target inactive (is_active false): ignored');
    if (!this.workers.length) return;
    store.onOutboxWrite(() => {
      for (const w of this.workers) w.wake();
    });
    for (const w of this.workers) w.start();
    logger.info({ targets: this.workers.map((w) => w.url) }, `forwarding statements to ${this.workers.length} target${this.workers.length > 1 ? 's' : ''}`);
  }

  /** Stops the loops; items being sent are given back to the queue untried. */
  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
  }

  /** Per active target (in configuration order): queued, delivered, retried, dead. Url only, never credentials. */
  async stats(): Promise<TargetStats[]> {
    if (!this.active) return [];
    const rows = new Map((await this.opts.store.outbox.stats()).map((s) => [s.target, s]));
    return this.workers.map((w) => {
      const s = rows.get(w.url);
      return { target: w.url, entry: this.opts.targets.indexOf(w.target), queued: s?.queued ?? 0, delivered: s?.delivered ?? 0, retried: s?.retried ?? 0, dead: s?.dead ?? 0 };
    });
  }
}

class TargetWorker {
  readonly url: string;
  readonly target: ForwardingTarget;
  private readonly owner: string;
  private readonly opts: ForwarderOptions;
  private readonly client: TargetClient;
  private readonly abort = new AbortController();
  /** Idle poll (other processes' writes are not announced here). */
  private readonly pollMs: number;
  private stopped = false;
  private loop?: Promise<void>;
  private wakeUp?: () => void;
  private woken = false;
  /** Consecutive failed requests: the pause before the next claim. */
  private failures = 0;
  private outboxDown = false;

  constructor(target: ForwardingTarget, owner: string, opts: ForwarderOptions) {
    this.target = target;
    this.url = target.url;
    this.owner = owner;
    this.opts = opts;
    this.client = new TargetClient(target);
    this.pollMs = Math.min(1000, Math.max(20, opts.backoffMs));
  }

  start(): void {
    this.loop = this.run();
  }

  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.wake();
    await this.loop;
    await this.client.close();
  }

  /** Waits `ms`; a wakeable wait ends early when new items are announced; any wait ends on stop. */
  private sleep(ms: number, wakeable: boolean): Promise<void> {
    return new Promise((resolve) => {
      if (this.stopped || (wakeable && this.woken)) return resolve();
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = () => {
        if (wakeable || this.stopped) done();
      };
    });
  }

  private async run(): Promise<void> {
    const { store, batchSize, leaseMs, logger } = this.opts;
    while (!this.stopped) {
      let items: OutboxItem[];
      try {
        this.woken = false;
        items = await store.outbox.claim(this.url, this.owner, batchSize, leaseMs);
      } catch (err) {
        // Once per outage, not once per poll.
        if (!this.outboxDown) logger.warn({ target: this.url, err: (err as Error).message }, 'forwarding: cannot read the outbox; retrying every second');
        this.outboxDown = true;
        await this.sleep(Math.max(this.pollMs, 1000), false);
        continue;
      }
      if (this.outboxDown) logger.info({ target: this.url }, 'forwarding: the outbox can be read again');
      this.outboxDown = false;
      if (!items.length) {
        await this.sleep(this.pollMs, true);
        continue;
      }
      let failed: boolean;
      try {
        failed = await this.deliver(items);
      } catch (err) {
        // Not expected (deliver settles every outcome); the leases run out and the items go again.
        logger.error({ target: this.url, err }, 'forwarding: delivery failed');
        failed = true;
      }
      this.failures = failed ? this.failures + 1 : 0;
      // A failing target is not hammered by each new item: the loop itself backs off.
      if (failed) await this.sleep(backoffDelay(this.opts.backoffMs, this.failures), false);
    }
  }

  /** Sends a claimed batch and settles every item; true when the target failed (retryable). */
  private async deliver(items: OutboxItem[]): Promise<boolean> {
    const { store, leaseMs, logger } = this.opts;
    const ids = items.map((i) => i.id);
    const renew = setInterval(() => {
      store.outbox.renew(this.owner, ids, leaseMs).catch((err: Error) => logger.warn({ target: this.url, err: err.message }, 'forwarding: cannot renew a lease'));
    }, leaseMs / 3);
    const settlement: Required<OutboxSettlement> = { delivered: [], retry: [], dead: [], release: [] };
    let failed = false;
    try {
      const blobs = await this.attachmentsOf(items);
      const send = (batch: OutboxItem[]) =>
        this.client.post(
          batch.map((i) => i.json),
          [...new Map(batch.flatMap((i) => blobs.get(i.id) ?? []).map((b) => [b.sha2, b])).values()],
          this.abort.signal,
        );
      const outcome = await send(items);
      if (outcome.kind === 'split') {
        // One by one: the statements the target takes arrive; the offending ones become dead letters.
        for (const [n, item] of items.entries()) {
          if (this.stopped || failed) {
            settlement.release.push(...items.slice(n).map((i) => i.id));
            break;
          }
          failed = this.apply(await send([item]), [item], settlement);
        }
      } else {
        failed = this.apply(outcome, items, settlement);
      }
    } catch (err) {
      // Attachment data could not be read (before anything was sent): try again later, nothing counted.
      logger.warn({ target: this.url, err: (err as Error).message }, 'forwarding: cannot read attachments');
      settlement.release.push(...ids);
      failed = true;
    } finally {
      clearInterval(renew);
    }
    try {
      await store.outbox.settle(this.url, this.owner, settlement);
    } catch (err) {
      // The leases run out and the items are sent again: at least once.
      logger.warn({ target: this.url, err: (err as Error).message }, 'forwarding: cannot record delivery results');
    }
    if (settlement.dead.length) {
      logger.error({ target: this.url, count: settlement.dead.length, error: settlement.dead[0].error }, 'forwarding: statements moved to dead letters');
    }
    return failed;
  }

  /** The attachment data the LRS holds for each item's statement (most statements have none). */
  private async attachmentsOf(items: OutboxItem[]): Promise<Map<string, AttachmentBlob[]>> {
    const out = new Map<string, AttachmentBlob[]>();
    for (const item of items) {
      if (!item.json.includes('"attachments"')) continue;
      const hashes = attachmentHashes(JSON.parse(item.json) as Statement);
      if (hashes.length) out.set(item.id, await this.opts.store.getAttachments(item.tenant, hashes));
    }
    return out;
  }

  /** Records one request's outcome for its items; true when it was a retryable failure. */
  private apply(outcome: Outcome, items: OutboxItem[], s: Required<OutboxSettlement>): boolean {
    switch (outcome.kind) {
      case 'delivered':
        s.delivered.push(...items.map((i) => i.id));
        return false;
      case 'retry': {
        if (this.stopped) {
          // Aborted by shutdown: not the target's fault; nothing is counted.
          s.release.push(...items.map((i) => i.id));
          return true;
        }
        const jitter = Math.random();
        for (const i of items) {
          if (i.attempts + 1 > this.target.maxRetries) s.dead.push({ id: i.id, error: `${outcome.error} (gave up after ${i.attempts + 1} attempts)` });
          else s.retry.push({ id: i.id, delayMs: backoffDelay(this.opts.backoffMs, i.attempts + 1, jitter), error: outcome.error });
        }
        this.opts.logger.warn({ target: this.url, count: items.length, error: outcome.error }, 'forwarding failed; will retry');
        return true;
      }
      case 'split':
      case 'reject':
        for (const i of items) s.dead.push({ id: i.id, error: outcome.error });
        return false;
    }
  }
}
