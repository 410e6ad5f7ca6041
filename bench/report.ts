/**
 * What `npm run bench` (bench/run.ts) measured, its shape, and the tables it prints: writes and
 * resources against their limits, the queries at each size, and every filter's growth between the
 * smallest and the largest size.
 */
import type { BackendName, BenchRow, DbLimit, Settled, StatementStat } from './harness.ts';
import type { LoadResult, Run } from './load.ts';
import type { Plan } from './plans.ts';
import type { PruneFigures, ReplicaFigures, TenantRun } from './phases.ts';

/** The workload sizes the report names: pages walked per filter, rows of the raw baselines. */
export interface Shape {
  pages: number;
  rawRows: number;
  /** Each filter's measured window, first page and pages 2–10. */
  querySeconds: number;
}

export interface Baselines {
  http?: Record<string, LoadResult | undefined>;
  httpPeakRss?: number;
  sqlite?: { perTx100: DbLimit; perTx10k: DbLimit };
  postgres?: DbLimit;
}

export interface IngestChunk {
  from: number;
  to: number;
  statementsPerSec: number;
  p50: number;
  p99: number;
  /** Bytes the server wrote to storage during the chunk (WAL, checkpoints), per statement. */
  writtenPerStatement?: number;
}

export interface QueryFigure {
  filter: string;
  size: number;
  first?: Run;
  deep?: Run;
  pagesFound?: number;
  walkMs?: number;
  dbMs?: number;
  dbMsDeep?: number;
  /** Statements on the first page. */
  firstPageCount?: number;
  /** This row is `filter` limited to its whole answer at the smallest size (the growth table compares it). */
  sameAnswerAs?: string;
}

export interface Disk {
  statements: number;
  bytes: number;
  jsonBytes: number;
  parts: Record<string, number>;
}

export interface BackendResult {
  backend: BackendName;
  /** The measured workload: 100 per POST, 4 clients. */
  ingest: IngestChunk[];
  /** With --fill: the chunks loaded between measured ones (their own POST size and clients). */
  fill: (IngestChunk & { batch: number; connections: number })[];
  writes: Record<string, LoadResult | undefined>;
  queries: QueryFigure[];
  peakRss: number;
  disk?: Disk;
  extras: BenchRow[];
  plans: Record<number, Plan[]>;
  /** PostgreSQL with --profile: server time per statement (pg_stat_statements). */
  statementStats?: StatementStat[];
  /** The phases at the largest size (bench/phases.ts): their rows, and what they measured. */
  phaseRows: BenchRow[];
  prune?: PruneFigures;
  /** The queries again after the prune (same filters, same size). */
  afterPrune: QueryFigure[];
  replica?: ReplicaFigures;
  tenants?: TenantRun[];
  /** The bare node:http handler measured again at each size, before its queries: the machine's own drift over a long run. */
  machineChecks: MachineCheck[];
}

/** The same bare handler and bodies as the baseline, at one size of the run. */
export interface MachineCheck {
  size: number;
  /** Before it (and the size's queries): the wait for the machine to fall quiet, and what it saw last. */
  settled?: Settled;
  /** 100-statement POSTs parsed and answered 204 (a CPU proxy for ingest). */
  batchStatementsPerSec?: number;
  /** The canned 100-statement page (a CPU proxy for the queries). */
  getRps?: number;
}

/** How long the machine took to fall quiet, and how busy it still was (the run's log and the report say it alike). */
export const settledText = (s: Settled): string =>
  `the machine fell quiet after ${s.seconds.toFixed(0)} s (${(s.busy * 100).toFixed(0)} % busy, ${(s.steal * 100).toFixed(0)} % stolen by the host)`;

const quiet = (c: MachineCheck) => (c.settled ? `; at ${int(c.size)} ${settledText(c.settled)}` : '');

/** The check at the largest size against the smallest, when both were measured. */
function machineDrift(r: BackendResult, smallest: number, largest: number): { from: MachineCheck; to: MachineCheck } | undefined {
  const from = r.machineChecks.find((c) => c.size === smallest);
  const to = r.machineChecks.find((c) => c.size === largest);
  return from && to && from !== to ? { from, to } : undefined;
}

export const int = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : Math.round(n).toLocaleString('en-US'));
const ms = (n: number | undefined) => (n === undefined ? '–' : n < 10 ? n.toFixed(1) : String(Math.round(n)));
const pct = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : `${(n * 100).toFixed(n < 0.1 ? 1 : 0)} %`);
export const gb = (n: number) => `${(n / 1024 ** 3).toFixed(1)} GB`;

export function table(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(w[i])).join(' | ')} |`;
  return [line(head), `|${w.map((x) => '-'.repeat(x + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

/** Measured chunks as one window: statements over the seconds they took (`fallback` when none). */
function windowOf(chunks: IngestChunk[], fallback: IngestChunk): { from: number; to: number; statementsPerSec: number } {
  const cs = chunks.length ? chunks : [fallback];
  const count = cs.reduce((n, c) => n + (c.to - c.from), 0);
  const seconds = cs.reduce((t, c) => t + (c.to - c.from) / c.statementsPerSec, 0);
  return { from: cs[0].from, to: cs[cs.length - 1].to, statementsPerSec: count / seconds };
}

export function writeRows(b: Baselines, r: BackendResult, shape: Shape): BenchRow[] {
  const rows: BenchRow[] = [];
  const raw = r.backend === 'sqlite' ? b.sqlite?.perTx100.rowsPerSec : b.postgres?.rowsPerSec;
  const rawName = r.backend === 'sqlite' ? 'raw node:sqlite loop, 100 rows/tx' : 'PostgreSQL COPY, 10k rows/tx';
  const httpBatch = b.http?.batch?.statementsPerSec;
  const first = r.ingest.find((c) => c.from === 0);
  const lastChunk = r.ingest[r.ingest.length - 1];
  if (first) {
    rows.push({
      workload: `batch ingest 0→${int(first.to)} (100/POST, 4 clients)`,
      value: first.statementsPerSec,
      unit: 'statements/s',
      baseline: raw,
      baselineName: rawName,
      ratio: raw && first.statementsPerSec / raw,
      p50: first.p50,
      p99: first.p99,
    });
    rows.push({
      workload: '  same, against the HTTP limit',
      value: first.statementsPerSec,
      unit: 'statements/s',
      baseline: httpBatch,
      baselineName: 'bare node:http, same bodies',
      ratio: httpBatch && first.statementsPerSec / httpBatch,
    });
    // What the gap is made of: bytes written to storage (WAL pages, checkpoints) per statement.
    const rawWritten = r.backend === 'sqlite' ? b.sqlite?.perTx100.writtenPerRow : undefined;
    if (first.writtenPerStatement) {
      rows.push({
        workload: '  bytes written to storage per statement',
        value: first.writtenPerStatement,
        unit: 'bytes',
        baseline: rawWritten,
        baselineName: 'raw loop, 100 rows/tx',
        ratio: rawWritten && first.writtenPerStatement / rawWritten,
      });
    }
  }
  if (lastChunk && lastChunk !== first) {
    rows.push({
      workload: `batch ingest ${int(lastChunk.from)}→${int(lastChunk.to)}`,
      value: lastChunk.statementsPerSec,
      unit: 'statements/s',
      baseline: raw,
      baselineName: rawName,
      ratio: raw && lastChunk.statementsPerSec / raw,
      p50: lastChunk.p50,
      p99: lastChunk.p99,
    });
    if (first?.writtenPerStatement && lastChunk.writtenPerStatement) {
      rows.push({
        workload: '  bytes written to storage per statement',
        value: lastChunk.writtenPerStatement,
        unit: 'bytes',
        baseline: first.writtenPerStatement,
        baselineName: 'first chunk',
        ratio: lastChunk.writtenPerStatement / first.writtenPerStatement,
      });
    }
    if (first) {
      // One 20k chunk swings by ±15 % from the next on this machine (checkpoints, the load
      // generator's scheduling): flatness compares the last tenth of the load with the first.
      const size = lastChunk.to;
      const early = windowOf(
        r.ingest.filter((c) => c.to <= size / 10),
        first,
      );
      const late = windowOf(
        r.ingest.filter((c) => c.from >= size - size / 10),
        lastChunk,
      );
      // At 10M the tenths are the last million and the first (the flatness: target ≥ 85 %).
      rows.push({
        workload: `  ingest flatness: last tenth ${int(late.from)}→${int(late.to)} vs first ${int(early.from)}→${int(early.to)} (target ≥ 85 %)`,
        value: late.statementsPerSec,
        unit: 'statements/s',
        baseline: early.statementsPerSec,
        baselineName: 'first tenth, from the empty store',
        ratio: late.statementsPerSec / early.statementsPerSec,
      });
      // Not Lectern's figure: how much the machine itself slowed or sped up between the two.
      const drift = machineDrift(r, r.machineChecks[0]?.size ?? 0, size);
      if (drift?.from.batchStatementsPerSec && drift.to.batchStatementsPerSec) {
        rows.push({
          workload: `  machine check: bare node:http batch parse at ${int(drift.to.size)} vs at ${int(drift.from.size)}`,
          value: drift.to.batchStatementsPerSec,
          unit: 'statements/s',
          baseline: drift.from.batchStatementsPerSec,
          baselineName: `same handler at ${int(drift.from.size)}`,
          ratio: drift.to.batchStatementsPerSec / drift.from.batchStatementsPerSec,
        });
      }
    }
  }
  for (const f of r.fill) {
    rows.push({
      workload: `  (fill ${int(f.from)}→${int(f.to)}: ${f.batch}/POST, ${f.connections} clients)`,
      value: f.statementsPerSec,
      unit: 'statements/s',
      p50: f.p50,
      p99: f.p99,
    });
  }
  const httpSingle = { post: b.http?.post?.run?.rps, put: b.http?.put?.run?.rps, documents: b.http?.documents?.run?.rps };
  for (const [name, label] of [
    ['post', 'single-statement POST (32 clients)'],
    ['put', 'single-statement PUT (32 clients)'],
    ['documents', 'State documents PUT/GET (32 clients)'],
  ] as const) {
    const w = r.writes[name]?.run;
    if (!w) continue;
    const base = httpSingle[name];
    rows.push({
      workload: label,
      value: w.rps,
      unit: 'req/s',
      baseline: base,
      baselineName: 'bare node:http, same bodies',
      ratio: base && w.rps / base,
      p50: w.latency.p50,
      p99: w.latency.p99,
    });
  }
  if (r.peakRss)
    rows.push({
      workload: 'peak server RSS',
      value: r.peakRss / 1024 / 1024,
      unit: 'MB',
      baseline: b.httpPeakRss && b.httpPeakRss / 1024 / 1024,
      baselineName: 'bare node:http process',
      ratio: b.httpPeakRss && r.peakRss / b.httpPeakRss,
    });
  if (r.disk) {
    const per = r.disk.bytes / r.disk.statements;
    const json = r.disk.jsonBytes / r.disk.statements;
    rows.push({
      workload: `disk per statement (${int(r.disk.statements)} stored)`,
      value: per,
      unit: 'bytes',
      baseline: json,
      baselineName: 'the statement JSON itself',
      ratio: per / json,
    });
    const rawDisk = r.backend === 'sqlite' ? b.sqlite?.perTx100 : b.postgres;
    if (rawDisk) {
      const rawPer = rawDisk.bytesOnDisk / shape.rawRows;
      rows.push({ workload: '  same, against the raw one-table store', value: per, unit: 'bytes', baseline: rawPer, baselineName: 'raw baseline table', ratio: per / rawPer });
    }
  }
  return [...rows, ...r.extras, ...r.phaseRows];
}

export function report(b: Baselines, results: BackendResult[], shape: Shape): string {
  const out: string[] = [];
  for (const r of results) {
    const rows = writeRows(b, r, shape);
    out.push(`\n## ${r.backend}: writes and resources (ratio = Lectern / limit measured in this run)\n`);
    out.push(
      table(
        ['workload', 'ratio', 'Lectern', 'limit', 'limit measured', 'p50 ms', 'p99 ms'],
        rows.map((x) => [
          x.note ? `${x.workload} (${x.note})` : x.workload,
          pct(x.ratio),
          `${int(x.value)} ${x.unit}`,
          x.baseline === undefined ? '–' : `${int(x.baseline)} ${x.unit}`,
          x.baselineName ?? '',
          ms(x.p50),
          ms(x.p99),
        ]),
      ),
    );
    const qs = r.queries;
    if (qs.length) {
      const bare = b.http?.get?.run?.rps;
      const smallest = Math.min(...qs.map((q) => q.size));
      const largest = Math.max(...qs.map((q) => q.size));
      const growth = largest === smallest ? '' : `; growth = p50 at ${int(largest)} ÷ p50 at ${int(smallest)}`;
      out.push(
        `\n## ${r.backend}: queries, limit 100, 8 clients, ${shape.querySeconds} s each (ratio = req/s ÷ bare handler serving a canned 100-statement page: ${int(bare)} req/s${growth})\n`,
      );
      out.push(
        table(
          ['filter', 'statements', 'ratio', 'req/s', 'p50 ms', 'p99 ms', `pages 2–${shape.pages} p50`, 'p99', 'db ms p1', 'db ms deepest', 'p50 growth'],
          qs.map((q) => {
            const base = qs.find((x) => x.filter === q.filter && x.size === smallest)?.first?.latency.p50;
            const growth = q.size === largest && largest !== smallest && base && q.first ? q.first.latency.p50 / base : undefined;
            return [
              q.filter,
              int(q.size),
              pct(bare && q.first ? q.first.rps / bare : undefined),
              int(q.first?.rps),
              ms(q.first?.latency.p50),
              ms(q.first?.latency.p99),
              q.deep ? ms(q.deep.latency.p50) : `(${q.pagesFound ?? 0} page)`,
              q.deep ? ms(q.deep.latency.p99) : '–',
              ms(q.dbMs),
              ms(q.dbMsDeep),
              growth === undefined ? '' : `${growth.toFixed(2)}×`,
            ];
          }),
        ),
      );
      if (largest !== smallest) out.push(growthTable(r.backend, qs, smallest, largest, shape, machineDrift(r, smallest, largest)));
    }
  }
  return out.join('\n');
}

/** Every filter at the largest size against the smallest: first page and pages 2–10, p50 and p99 (target: within 1.5×). */
export function growthTable(backend: string, qs: QueryFigure[], smallest: number, largest: number, shape: Shape, drift?: { from: MachineCheck; to: MachineCheck }): string {
  const TARGET = 1.5;
  let met = 0;
  let measured = 0;
  const rows = qs
    .filter((q) => q.size === largest && !q.sameAnswerAs)
    .map((twinless) => {
      // A filter that was one short page at the smallest size is compared by its twin with that page's length.
      const q = qs.find((x) => x.size === largest && x.sameAnswerAs === twinless.filter) ?? twinless;
      const base = qs.find((x) => x.filter === twinless.filter && x.size === smallest);
      const ratios = [
        [q.first?.latency.p50, base?.first?.latency.p50],
        [q.first?.latency.p99, base?.first?.latency.p99],
        [q.deep?.latency.p50, base?.deep?.latency.p50],
        [q.deep?.latency.p99, base?.deep?.latency.p99],
      ].map(([a, b]) => (a !== undefined && b ? a / b : undefined));
      const known = ratios.filter((x) => x !== undefined);
      measured++;
      const ok = known.length > 0 && known.every((x) => x <= TARGET);
      if (ok) met++;
      return [q.filter, ...ratios.map((x) => (x === undefined ? '–' : `${x.toFixed(2)}×`)), known.length ? (ok ? 'yes' : 'no') : '–'];
    });
  return [
    `\n## ${backend}: queries at ${int(largest)} against ${int(smallest)} (latency ratio; target ≤ ${TARGET}×: ${met} of ${measured} filters)\n`,
    table(['filter', 'first page p50', 'p99', `pages 2–${shape.pages} p50`, 'p99', 'met?'], rows),
    // The ratios above are raw; this says whether the machine itself changed between the two sizes.
    ...(drift?.from.getRps && drift.to.getRps
      ? [
          `\nMachine check before each size's queries (bare node:http serving a canned page): ${int(drift.from.getRps)} req/s at ${int(drift.from.size)}, ${int(drift.to.getRps)} at ${int(drift.to.size)} (${(drift.to.getRps / drift.from.getRps).toFixed(2)}×)${quiet(drift.from)}${quiet(drift.to)}.`,
        ]
      : []),
  ].join('\n');
}
