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
  let next = 0;
  let inFlight: Promise<string> | undefined;
  const pending = new Map<number, (m: Extract<Message, { type: 'lectern:metrics:collected' }>) => void>();
  /** Each worker's counters and histograms as last collected; those of the workers gone (summed at each scrape into one). */
  const last = new Map<Worker, MetricsJson>();
  let retired: MetricsJson[] = [];

  const collectOne = (w: Worker) =>
    new Promise<WorkerFigures>((resolve, reject) => {
      const id = next++;
      // Gone before it answers: counted as last collected (it is not in the retired yet).
      const previous = last.get(w) ?? [];
      const done = () => {
        clearTimeout(timer);
        pending.delete(id);
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
      pending.set(id, (m) => {
        done();
        if (!m.figures) return reject(new Error(`worker ${w.id}: ${m.error ?? 'no figures'}`));
        last.set(
          w,
          m.figures.counted.filter((f) => GROWING.has(String(f.type))),
        );
        resolve(m.figures);
      });
      w.once('exit', onExit);
      w.send({ type: 'lectern:metrics:collect', id } satisfies Message);
    });

  const collectAll = async () => {
    if (retired.length > 1) {
      const parts = retired.length;
      const sum = plain(await AggregatorRegistry.aggregate(retired.slice(0, parts)).getMetricsAsJSON());
      retired = [sum, ...retired.slice(parts)];
    }
    // The workers gone before this collection; one that goes during it is counted by its answer
    // (or its last one), and among the retired from the next.
    const gone = [...retired];
    const workers = [...serving()].filter((w) => w.isConnected());
    const figures = await Promise.all(workers.map(collectOne));
    // A process's own series differ by their worker label: summing keeps each as it is (their
    // own aggregators would average them, keep the first worker's or drop them).
    const own = figures.map((f) => f.own.map((m) => ({ ...m, aggregator: 'sum' as const })));
    return AggregatorRegistry.aggregate([...gone, ...figures.map((f) => f.counted), ...own]).metrics();
  };

  cluster.on('exit', (w: Worker) => {
    const gone = last.get(w);
    last.delete(w);
    if (gone?.length) retired.push(gone);
  });

  cluster.on('message', (w: Worker, m: unknown) => {
    if (!isMessage(m)) return;
    if (m.type === 'lectern:metrics:collected') pending.get(m.id)?.(m);
    if (m.type !== 'lectern:metrics:scrape') return;
    inFlight ??= collectAll().finally(() => (inFlight = undefined));
    inFlight.then(
      (text) => w.isConnected() && w.send({ type: 'lectern:metrics:scraped', id: m.id, text } satisfies Message),
      (err: unknown) => w.isConnected() && w.send({ type: 'lectern:metrics:scraped', id: m.id, error: (err as Error).message } satisfies Message),
    );
  });
}
