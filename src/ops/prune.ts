/**
 * Retention: removing a store's statements stored before a time, as erasure removes statements
 * (MaintenanceStore.deleteStatements: link rows, outbox items, lax violations, the attachments no
 * remaining statement carried), and its kept rejections older than that time. Statements that
 * refer to pruned ones stay (their targets are simply gone); documents are not touched.
 *
 * The walk is by seq: scanStatements with `untilMs` turns the time into the seq range the store
 * already keeps for `since`/`until`, and each batch is deleted in its own short transaction, so
 * ingest waits at most one batch. Interruptible between batches; a re-run finishes the rest.
 */
import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { Statement } from '../xapi/types.ts';
import type { Store } from '../store/types.ts';
import { OpsError } from './errors.ts';
import type { OnProgress } from './progress.ts';

/** Statements per delete transaction: small enough that a waiting write is not held up for long. */
export const PRUNE_BATCH = 200;
const REJECTION_PAGE = 1000;
const DAY_MS = 86_400_000;

export interface PruneRequest {
  tenant: string;
  /** Epoch ms: statements stored strictly before it go. */
  beforeMs: number;
  /** Count; change nothing. */
  dryRun?: boolean;
  batchSize?: number;
  signal?: AbortSignal;
  onProgress?: OnProgress<'prune'>;
}

export interface PruneReport {
  dryRun: boolean;
  target: string;
  before: string;
  /** Statements removed (dry: that would be). */
  statements: number;
  /** Attachment data removed; not counted by a dry run (undefined). */
  attachments?: number;
  /** Kept rejections older than `before` removed (dry: that would be). */
  rejections: number;
  complete: boolean;
}

/** The cut-off of a retention of `days` at `nowMs`. */
export function retentionCutoff(nowMs: number, days: number): number {
  return nowMs - days * DAY_MS;
}

export async function prune(store: Store, req: PruneRequest): Promise<PruneReport> {
  if (!Number.isFinite(req.beforeMs)) throw new OpsError('the time to prune before is not a valid time');
  const { tenant, signal, onProgress } = req;
  const dryRun = req.dryRun === true;
  const limit = req.batchSize ?? PRUNE_BATCH;
  // `untilMs` is inclusive; stored times are whole milliseconds.
  const window = { untilMs: req.beforeMs - 1 };
  const report: PruneReport = { dryRun, target: tenant, before: new Date(req.beforeMs).toISOString(), statements: 0, rejections: 0, complete: false };
  const total = await store.countStatements(tenant, window);
  if (dryRun) {
    report.statements = total;
    report.rejections = (await oldRejections(store, tenant, req.beforeMs)).length;
    report.complete = true;
    return report;
  }
  report.attachments = 0;
  onProgress?.({ type: 'start', phase: 'prune', total });
  let after: string | undefined;
  for (;;) {
    if (signal?.aborted) break;
    // Only ids are needed; the page reads the rows of one batch's seq range.
    const started = performance.now();
    const page = await store.scanStatements(tenant, { ...window, after, limit });
    if (!page.rows.length) break;
    const ids = page.rows.map((r) => (JSON.parse(r.json) as Statement & { id: string }).id);
    const r = await store.deleteStatements(tenant, ids);
    report.statements += r.statements;
    report.attachments += r.attachments;
    onProgress?.({ type: 'advance', phase: 'prune', done: report.statements });
    if (!page.next) break;
    after = page.next;
    // A pause as long as the batch took: writers get at least half the time. SQLite's other
    // processes wait for its lock by polling (up to every 100 ms) and starved behind back-to-back
    // batches (a writer waited for the whole prune); on this thread its promises resolve at once,
    // so without a turn of the event loop neither a request nor a signal would get in.
    await new Promise<void>((resolve) => setTimeout(resolve, performance.now() - started));
  }
  onProgress?.({ type: 'end', phase: 'prune' });
  if (!signal?.aborted) {
    const ids = await oldRejections(store, tenant, req.beforeMs);
    for (let i = 0; i < ids.length; i += REJECTION_PAGE) report.rejections += await store.deleteRejections(ids.slice(i, i + REJECTION_PAGE));
    report.complete = true;
  }
  return report;
}

/** Ids of the store's kept rejections older than `beforeMs` (bounded per store by LECTERN_REJECTIONS_MAX). */
async function oldRejections(store: Store, tenant: string, beforeMs: number): Promise<string[]> {
  const out: string[] = [];
  let afterId: string | undefined;
  for (;;) {
    const page = await store.listRejections({ tenant, afterId, limit: REJECTION_PAGE });
    for (const r of page) if (r.atMs < beforeMs) out.push(r.id);
    if (page.length < REJECTION_PAGE) return out;
    afterId = page[page.length - 1].id;
  }
}

/** Every store's key (the default store '' included), for a prune of all of them. */
export async function allStores(store: Store): Promise<string[]> {
  return store.storeNames();
}

/** The background retention of LECTERN_RETENTION_DAYS: `run` prunes every store once (if no other process is). */
export interface Retention {
  /** One pass over every store; undefined when another process (PostgreSQL) or pass was running. */
  run(): Promise<PruneReport[] | undefined>;
  /** Stops the timer and the pass in hand (after its batch); resolves once it has stopped. */
  stop(): Promise<void>;
}

/**
 * Prunes every store to `days` now and then every `intervalMs` (an hour), measured by `clock`.
 * One process at a time: Store.exclusively (a PostgreSQL advisory lock).
 */
export function startRetention(opts: { store: Store; days: number; clock: Clock; logger: Logger; intervalMs?: number }): Retention {
  const { store, days, clock, logger } = opts;
  const abort = new AbortController();
  let current: Promise<unknown> = Promise.resolve();
  // This process's passes take turns; another process's pass makes this one skip.
  const run = (): Promise<PruneReport[] | undefined> => {
    const pass = current.then(() =>
      store.exclusively('retention', async () => {
        const beforeMs = retentionCutoff(clock.now(), days);
        const reports: PruneReport[] = [];
        for (const tenant of await allStores(store)) {
          if (abort.signal.aborted) break;
          const r = await prune(store, { tenant, beforeMs, signal: abort.signal });
          if (r.statements || r.rejections)
            logger.info({ target: tenant, before: r.before, statements: r.statements, attachments: r.attachments, rejections: r.rejections }, 'retention: pruned');
          reports.push(r);
        }
        return reports;
      }),
    );
    current = pass.catch(() => undefined);
    return pass;
  };
  const tick = () => {
    run().catch((err: unknown) => logger.warn({ err }, 'retention: the prune failed; it is tried again at the next interval'));
  };
  const timer = setInterval(tick, opts.intervalMs ?? 3_600_000);
  timer.unref();
  // The first pass soon after start-up, not in its path.
  const first = setTimeout(tick, 1000);
  first.unref();
  return {
    run,
    async stop() {
      clearInterval(timer);
      clearTimeout(first);
      abort.abort();
      await current;
    },
  };
}
