/**
 * `lectern export`: the store's statements as NDJSON in stored order, the violations of those
 * stored under lax validation, optionally their attachments and the documents (src/ops/export.ts),
 * to files or stdout. Ctrl-C stops after the page in hand and prints how to continue.
 */
import { rmSync } from 'node:fs';
import { ValidationFailed } from '../errors.ts';
import { exportDocuments, exportQuery, exportStatements } from '../ops/export.ts';
import type { StatementQuery } from '../xapi/query.ts';
import type { Actor } from '../xapi/types.ts';
import { CliError } from './errors.ts';
import { OutputFile, openCliStore, siblings } from './datafiles.ts';
import { interruptible, progressBars, rerun, say } from './progress.ts';

export interface ExportOptions {
  output?: string;
  backend?: string;
  target?: string;
  /** Epoch ms, both (the options read them: ./options.ts, timeOption). */
  since?: number;
  until?: number;
  agent?: string;
  verb?: string;
  activity?: string;
  /** The violations file; default: the sibling file (none with stdout). */
  violations?: string;
  /** true: the sibling folder; a string: that folder. */
  attachments?: boolean | string;
  /** true: the sibling file; a string: that file. */
  documents?: boolean | string;
  after?: string;
  append?: boolean;
  progressInterval?: string;
}

/** The filters as the Statement resource parses them (same validation, same messages). */
function parseFilters(opts: ExportOptions): StatementQuery {
  const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
  try {
    return exportQuery({ agent: opts.agent, verb: opts.verb, activity: opts.activity, since: iso(opts.since), until: iso(opts.until) });
  } catch (err) {
    if (err instanceof ValidationFailed) throw new CliError(`bad filter: ${err.issues!.map((i) => `--${i.loc[1]} ${i.msg}`).join('; ')}`);
    throw err;
  }
}

export async function exportCommand(opts: ExportOptions): Promise<void> {
  const output = opts.output;
  if (output === undefined) throw new CliError('-o/--output is required (a file, or - for stdout)');
  const side = output === '-' ? undefined : siblings(output);
  const pick = (v: boolean | string | undefined, sibling: string | undefined, name: string) => {
    if (v === undefined || v === false) return undefined;
    if (typeof v === 'string') return v;
    if (!sibling) throw new CliError(`--${name} needs a path when the statements go to stdout`);
    return sibling;
  };
  const attachmentsDir = pick(opts.attachments, side?.attachments, 'attachments');
  const documentsFile = pick(opts.documents, side?.documents, 'documents');
  const violationsFile = opts.violations ?? side?.violations;
  if (opts.after !== undefined && !/^\d{1,19}$/.test(opts.after)) throw new CliError(`--after takes the position an interrupted export printed, not ${JSON.stringify(opts.after)}`);
  const query = parseFilters(opts);
  const tenant = opts.target ?? '';
  const { store } = await openCliStore(opts.backend);
  const stop = interruptible();
  const out = new OutputFile(output, { append: opts.append });
  // Created at the first statement stored under lax validation; a stale one is not left beside a new export.
  if (violationsFile !== undefined && !opts.append) rmSync(violationsFile, { force: true });
  let marks: OutputFile | undefined;
  const violations = violationsFile === undefined ? undefined : { write: (text: string) => (marks ??= new OutputFile(violationsFile, { append: opts.append })).write(text) };
  try {
    const r = await exportStatements(store, {
      tenant,
      query,
      after: opts.after,
      out,
      violations,
      attachmentsDir,
      append: opts.append,
      signal: stop.signal,
      onProgress: progressBars({ statements: { label: 'export', unit: 'statements' } }, Number(opts.progressInterval ?? 10) * 1000),
    });
    await out.close();
    await marks?.close();
    if (!r.complete) {
      say(
        `export interrupted: ${r.written} statements written${output === '-' ? '' : ` to ${output}`}, each line complete. ` +
          `To continue: ${rerun({ '--append': false, '--after': true }, [...(r.after ? ['--after', r.after] : []), output === '-' ? '>> FILE' : '--append'])}`,
      );
      process.exitCode = 130;
      return;
    }
    let documents = 0;
    if (documentsFile) {
      const file = new OutputFile(documentsFile);
      documents = await exportDocuments(store, { tenant, out: file, agent: opts.agent === undefined ? undefined : (JSON.parse(opts.agent) as Actor), activity: opts.activity });
      await file.close();
    }
    const lax = !r.lax
      ? ''
      : violationsFile
        ? `, ${r.lax} of them stored under lax validation: their violations in ${violationsFile}`
        : `, ${r.lax} of them stored under lax validation, their violations not written (--violations FILE writes them: an import without them validates those statements under its own mode)`;
    process.stderr.write(
      `exported ${r.written} statements${output === '-' ? '' : ` to ${output}`}${lax}` +
        (attachmentsDir ? `, ${r.attachments} attachments to ${attachmentsDir}` : '') +
        (documentsFile ? `, ${documents} documents to ${documentsFile}` : '') +
        '\n',
    );
  } finally {
    stop.dispose();
    // After a failure too: the lines written so far are complete and the gzip stream is closed.
    await out.close();
    await marks?.close();
    await store.close();
  }
}
