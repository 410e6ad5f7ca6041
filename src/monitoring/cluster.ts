/**
 * GET /metrics of a server run as node:cluster workers (LECTERN_RUNSERVER_WORKERS > 1). A scrape
 * reaches whichever worker the primary handed its connection to; that worker asks the primary,
 * which collects every serving worker's figures over IPC and adds them up with prom-client's own
 * aggregation (`AggregatorRegistry.aggregate`), so that every scrape answers for the whole server.
 * Not prom-client's `clusterMetrics()`: it serves from the primary (which has no HTTP port here),
 * asks workers still starting (which cannot answer yet) and waits out one that died.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';

/** One registry's figures as `getMetricsAsJSON()` gives them. */
export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** How long the primary waits for a worker's figures: a worker that does not answer fails the scrape. */
const COLLECT_TIMEOUT_MS = 5000;

/**
 * A worker's figures: `counted`, what it counts (the server's figure is the sum over the
 * workers); `own`, its own state, each series labelled with its worker id.
 */
export interface WorkerFigures {
  counted: MetricsJson;
  own: MetricsJson;
}

/** Metric types whose sum only grows: a worker gone keeps its part in them. */
const GROWING = new Set(['counter', 'histogram']);

type Message =
  | { type: 'lectern:metrics:scrape'; id: number }
  | { type: 'lectern:metrics:scraped'; id: number; text?: string; error?: string }
  | { type: 'lectern:metrics:collect'; id: number }
  | { type: 'lectern:metrics:collected'; id: number; figures?: WorkerFigures; error?: string };

const isMessage = (m: unknown): m is Message =>
  typeof m === 'object' && m !== null && typeof (m as Message).type === 'string' && (m as Message).type.startsWith('lectern:metrics:');

/** Only what the aggregation reads: no functions (the IPC would refuse them), no exemplars. */
const plain = (metrics: MetricsJson): MetricsJson =>
  metrics.map((m) => ({ name: m.name, help: m.help, type: m.type, aggregator: m.aggregator, values: m.values }) as MetricsJson[number]);

/** To the primary, if it is still there (a send on a closed channel would be an unhandled 'error'). */
const tellPrimary = (m: Message): void => {
  if (process.send && process.connected) process.send(m);
};

/**
 * A worker's side: answers the primary's collections with `collect()` (this process's figures)
 * and asks it for the server's. Concurrent scrapes of one worker share one request.
 */
export class WorkerScrapes {
  private next = 0;
  private readonly waiting = new Map<number, { resolve: (text: string) => void; reject: (err: Error) => void }>();
  private inFlight: Promise<string> | undefined;
  private readonly onMessage = (m: unknown) => {
    if (!isMessage(m)) return;
    if (m.type === 'lectern:metrics:collect') {
      this.collect().then(
        (f) => tellPrimary({ type: 'lectern:metrics:collected', id: m.id, figures: { counted: plain(f.counted), own: plain(f.own) } }),
        (err: unknown) => tellPrimary({ type: 'lectern:metrics:collected', id: m.id, error: String((err as Error)?.message ?? err) }),
      );
    } else if (m.type === 'lectern:metrics:scraped') {
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.text !== undefined) w?.resolve(m.text);
      else w?.reject(new Error(`cannot collect the worker processes' metrics: ${m.error ?? 'no answer'}`));
    }
  };

  private readonly collect: () => Promise<WorkerFigures>;

  constructor(collect: () => Promise<WorkerFigures>) {
    this.collect = collect;
    process.on('message', this.onMessage);
  }

  /** The whole server's figures, as the exposition text. */
  scrape(): Promise<string> {
    this.inFlight ??= new Promise<string>((resolve, reject) => {
      const id = this.next++;
      const fail = (why: string) => {
        this.waiting.delete(id);
        reject(new Error(`cannot collect the worker processes' metrics: ${why}`));
      };
      // The primary answers within its own timeout; this one only guards against a primary gone quiet.
      const timer = setTimeout(() => fail('the primary process did not answer'), COLLECT_TIMEOUT_MS + 1000);
      const settle =
        <T>(fn: (v: T) => void) =>
        (v: T) => {
          clearTimeout(timer);
          fn(v);
        };
      this.waiting.set(id, { resolve: settle(resolve), reject: settle(reject) });
      if (process.connected) {
        tellPrimary({ type: 'lectern:metrics:scrape', id });
      } else {
        clearTimeout(timer);
        fail('the primary process is gone');
      }
    }).finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  close(): void {
    process.off('message', this.onMessage);
  }
}

/**
 * The primary's side: answers each worker's scrape with the figures of `serving()` (the workers
 * that have started) added up. A worker that does not answer within COLLECT_TIMEOUT_MS fails the
 * scrape: a partial sum would look like counters going back. One that exits keeps its counters
 * and histograms, as last collected, in every later sum, so that the server's counters only grow
 * while the primary runs. Scrapes arriving while a collection runs share it.
 */
export function answerWorkerScrapes(serving: () => Iterable<Worker>): void {
  const scrapes = new PrimaryScrapes(serving);
  cluster.on('exit', (w: Worker) => scrapes.retire(w));
  cluster.on('message', (w: Worker, m: unknown) => scrapes.onMessage(w, m));
}

class PrimaryScrapes {
  private next = 0;
  private inFlight: Promise<string> | undefined;
  private readonly pending = new Map<number, (m: Extract<Message, { type: 'lectern:metrics:collected' }>) => void>();
  /** Each worker's counters and histograms as last collected. */
  private readonly last = new Map<Worker, MetricsJson>();
  /** Those of the workers gone (summed at each scrape into one). */
  private retired: MetricsJson[] = [];

  private readonly serving: () => Iterable<Worker>;

  constructor(serving: () => Iterable<Worker>) {
    this.serving = serving;
  }

  retire(w: Worker): void {
    const gone = this.last.get(w);
    this.last.delete(w);
    if (gone?.length) this.retired.push(gone);
  }

  onMessage(w: Worker, m: unknown): void {
    if (!isMessage(m)) return;
    if (m.type === 'lectern:metrics:collected') this.pending.get(m.id)?.(m);
    if (m.type !== 'lectern:metrics:scrape') return;
    this.inFlight ??= this.collectAll().finally(() => (this.inFlight = undefined));
    this.inFlight.then(
      (text) => w.isConnected() && w.send({ type: 'lectern:metrics:scraped', id: m.id, text } satisfies Message),
      (err: unknown) => w.isConnected() && w.send({ type: 'lectern:metrics:scraped', id: m.id, error: (err as Error).message } satisfies Message),
    );
  }

  private async collectAll(): Promise<string> {
    if (this.retired.length > 1) {
      const parts = this.retired.length;
      const sum = plain(await AggregatorRegistry.aggregate(this.retired.slice(0, parts)).getMetricsAsJSON());
      this.retired = [sum, ...this.retired.slice(parts)];
    }
    // The workers gone before this collection; one that goes during it is counted by its answer
    // (or its last one), and among the retired from the next.
    const gone = [...this.retired];
    const workers = [...this.serving()].filter((w) => w.isConnected());
    const figures = await Promise.all(workers.map((w) => this.collectOne(w)));
    // A process's own series differ by their worker label: summing keeps each as it is (their
    // own aggregators would average them, keep the first worker's or drop them).
    const own = figures.map((f) => f.own.map((m) => ({ ...m, aggregator: 'sum' as const })));
    return AggregatorRegistry.aggregate([...gone, ...figures.map((f) => f.counted), ...own]).metrics();
  }

  private collectOne(w: Worker): Promise<WorkerFigures> {
    return new Promise<WorkerFigures>((resolve, reject) => {
      const id = this.next++;
      // Gone before it answers: counted as last collected (it is not in the retired yet).
      const previous = this.last.get(w) ?? [];
      const done = () => {
        clearTimeout(timer);
        this.pending.delete(id);
        w.off('exit', onExit);
      };
      const onExit = () => {
        done();
        resolve({ counted: previous, own: [] });
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`worker ${w.id} did not answer within ${COLLECT_TIMEOUT_MS / 1000} s`));
      }, COLLECT_TIMEOUT_MS);
      this.pending.set(id, (m) => {
        done();
        if (!m.figures) return reject(new Error(`worker ${w.id}: ${m.error ?? 'no figures'}`));
        this.last.set(
          w,
          m.figures.counted.filter((f) => GROWING.has(String(f.type))),
        );
        resolve(m.figures);
      });
      w.once('exit', onExit);
      w.send({ type: 'lectern:metrics:collect', id } satisfies Message);
    });
  }
}
