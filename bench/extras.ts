/**
 * Extra benchmark entries: measurements that plug into `npm run bench` without touching the
 * runner. Each entry runs once per backend, after the query workloads at the largest size, with
 * the loaded server still running; its rows join the table and the JSON file.
 *
 * To add one (e.g. bench/lifecycle.ts, export/import): export a BenchEntry from its file and list
 * it in EXTRA_ENTRIES below. `--check` fails the run when an entry throws or returns a row with
 * `failed: true`; speed never fails it.
 */
import type { BackendName, Server } from './harness.ts';
import type { Job, LoadResult } from './load.ts';
import { lifecycleEntry } from './lifecycle.ts';

export interface BenchContext {
  backend: BackendName;
  /** The running Lectern (url, pid). */
  server: Server;
  seed: number;
  quick: boolean;
  /** A scratch folder of this backend's run (removed afterwards). */
  dir: string;
  /** Statements stored so far (the loaded stream is statements 0 … n-1 of `seed`). */
  statements: number;
  /** The database the server uses: a file (sqlite) or a URL (postgres). */
  sqlitePath?: string;
  postgresUrl?: string;
  /** `Authorization` header value of the benchmark user (all scopes, default tenant). */
  authorization: string;
  /** The load generator (a separate process) against any URL. */
  load(url: string, jobs: Job[]): Promise<LoadResult[]>;
}

/** One line of the results table. Ratios come first in the table; give one when there is a baseline. */
export interface BenchRow {
  workload: string;
  value: number;
  unit: string;
  baseline?: number;
  /** What the baseline is, e.g. "raw SQLite insert loop". */
  baselineName?: string;
  /** value / baseline (or baseline / value when lower is better): 1.0 is the limit. */
  ratio?: number;
  p50?: number;
  p99?: number;
  failed?: boolean;
  note?: string;
}

export interface BenchEntry {
  name: string;
  run(ctx: BenchContext): Promise<BenchRow[]>;
}

export const EXTRA_ENTRIES: BenchEntry[] = [lifecycleEntry];
