/**
 * `lectern erase --agent JSON`: removes one person from a store, or with `--pseudonymize` replaces
 * them by a keyed pseudonym, through the admin action (src/ops/admin/erasure.ts). Prints what it
 * did (or, with --dry-run, would do); a run is recorded twice (what, when, how many; never who or
 * what the data was): a line of LECTERN_AUDIT_FILE and an entry of the audit log, `via: cli`.
 */
import { erase } from '../ops/admin/erasure.ts';
import type { Erasure } from '../ops/erase.ts';
import { CliError } from './errors.ts';
import { parseAgentOption, withAdmin } from './datafiles.ts';
import { interruptible, progressBars } from './progress.ts';

export interface EraseOptions {
  agent?: string;
  target?: string;
  backend?: string;
  dryRun?: boolean;
  pseudonymize?: boolean;
  /** Also print each statement id and document key. */
  list?: boolean;
  progressInterval?: string;
}

export async function eraseCommand(opts: EraseOptions): Promise<void> {
  if (opts.agent === undefined) throw new CliError('--agent is required: the Agent (or identified Group) as JSON, e.g. \'{"mbox":"mailto:ben@example.com"}\'');
  const person = parseAgentOption(opts.agent, '--agent');
  const dryRun = opts.dryRun === true;
  const pseudonymize = opts.pseudonymize === true;
  const stop = interruptible();
  const scan = pseudonymize ? 'pseudonymize: scan' : 'erase: scan';
  const found = pseudonymize ? 'to pseudonymize' : 'naming the agent';
  let erasure: Erasure;
  try {
    erasure = await withAdmin(opts.backend, (ctx, by) =>
      erase(ctx, by, {
        target: opts.target,
        person,
        pseudonymize,
        dryRun,
        list: opts.list,
        signal: stop.signal,
        onProgress: progressBars<'scan' | 'delete', { found?: number }>(
          { scan: { label: scan, unit: 'statements' }, delete: { label: 'erase: delete', unit: 'statements' } },
          Number(opts.progressInterval ?? 10) * 1000,
          (e) => (e.found === undefined ? {} : { extra: `${e.found} ${found}` }),
        ),
      }),
    );
  } finally {
    stop.dispose();
  }
  const { report, listed } = erasure;
  const did = (past: string, present: string) => (dryRun ? `would ${present}` : past);
  const lines = [
    opts.pseudonymize
      ? `${did('pseudonymized', 'pseudonymize')} the agent in ${report.statements} statements and ${report.documents} documents`
      : `${did('erased', 'erase')} ${report.statements} statements (${report.referring ?? 0} of them voiding or targeting the agent's statements), ` +
        `${report.attachments} attachments no other statement ${dryRun ? 'uses' : 'used'}, and ${report.documents} State/Agent Profile documents`,
  ];
  if (report.rejections !== undefined) lines.push(`${did('removed', 'remove')} ${report.rejections} kept rejections (refused writes) mentioning the agent`);
  if (!report.complete) lines.push('interrupted before the end: run the same command again to finish (what is done stays done)');
  const items = [
    ...listed.statements.map((id) => `statement ${id}`),
    ...listed.documents.map((d) => `document ${JSON.stringify({ kind: d.kind, activityId: d.activityId || undefined, registration: d.registration || undefined, id: d.docId })}`),
  ];
  process.stdout.write(`${[...items, ...lines].join('\n')}\n${JSON.stringify(report)}\n`);
  if (!report.complete) process.exitCode = 130;
}
