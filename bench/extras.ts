/**
 * Extra benchmark entries: measurements that plug into `npm run bench` without touching the
 * runner. Each entry runs once per backend, after the query workloads at the largest size, with
 * the loaded server still running; its rows join the table and the JSON file.
 *
 * To add one (e.g. bench/lifecycle.ts, export/import): export a BenchEntry (bench/harness.ts) from its file and list
 * it in EXTRA_ENTRIES below. `--check` fails the run when an entry throws or returns a row with
 * `failed: true`; speed never fails it.
 */
import type { BenchEntry } from './harness.ts';
import { lifecycleEntry } from './lifecycle.ts';
import { overviewEntry } from './overview.ts';

export const EXTRA_ENTRIES: BenchEntry[] = [overviewEntry, lifecycleEntry];
