/**
 * `lectern prune --before TIME`: removes the statements stored before a time from every store, or
 * from `-t` only (src/ops/prune.ts). Prints what it did (or, with --dry-run, would do); Ctrl-C stops
 * after the batch in hand and the same command finishes the job.
 */
import { prune, allStores, type PruneReport } from '../ops/prune.ts';
import { GIVEN_TIME } from '../xapi/validate.ts';
import { CliError } from './errors.ts';
import { openCliStore } from './datafiles.ts';
import { interruptible, progressBars } from './progress.ts';

export interface PruneOptions {
  /** Epoch ms (the option reads it: ./options.ts, timeOption). */
  before?: number;
  target?: string;
  backend?: string;
  dryRun?: boolean;
  json?: boolean;
  batchSize?: string;
  progressInterval?: string;
}

export async function pruneCommand(opts: PruneOptions): Promise<void> {
  const beforeMs = opts.before;
  if (beforeMs === undefined) throw new CliError(`--before is required: ${GIVEN_TIME}`);
  const batchSize = opts.batchSize === undefined ? undefined : Number(opts.batchSize);
  if (batchSize !== undefined && !(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= 10_000))
    throw new CliError(`--batch-size must be a whole number from 1 to 10000, not ${JSON.stringify(opts.batchSize)}`);
  const { store } = await openCliStore(opts.backend);
  const stop = interruptible();
  const reports: PruneReport[] = [];
  try {
    const targets = opts.target === undefined ? await allStores(store) : [opts.target];
    for (const tenant of targets) {
      if (stop.signal.aborted) break;
      reports.push(
        await prune(store, {
          tenant,
          beforeMs,
          dryRun: opts.dryRun,
          batchSize,
          signal: stop.signal,
          onProgress: progressBars<'prune'>(
            { prune: { label: `prune ${tenant === '' ? 'default store' : tenant}`, unit: 'statements' } },
            Number(opts.progressInterval ?? 10) * 1000,
          ),
        }),
      );
    }
  } finally {
    stop.dispose();
    await store.close();
  }
  const complete = !stop.signal.aborted && reports.every((r) => r.complete);
  if (opts.json) {
    process.stdout.write(reports.map((r) => `${JSON.stringify(r)}\n`).join(''));
  } else {
    const lines = reports.map((r) => {
      const store = r.target === '' ? 'the default store' : `store ${JSON.stringify(r.target)}`;
      return r.dryRun
        ? `${store}: would remove ${r.statements} statements stored before ${r.before} and ${r.rejections} kept rejections`
        : `${store}: removed ${r.statements} statements stored before ${r.before}, ${r.attachments ?? 0} attachments no remaining statement carried, and ${r.rejections} kept rejections`;
    });
    if (!complete) lines.push('interrupted before the end: run the same command again to finish (what is done stays done)');
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  if (!complete) process.exitCode = 130;
}
