/**
 * `lectern import`: statements from an export (NDJSON or a JSON array, `.gz` too) or pulled from
 * another LRS's Statement resource, stored as POST would (src/ops/import.ts), in batches; refused
 * statements reported in the rejects file. Those an export's violations file names were stored
 * under lax validation at the source, and are validated so here. Ctrl-C stops after the batch in
 * hand and prints how to resume.
 */
import { existsSync } from 'node:fs';
import { fileItems, type ImportItem, readViolationIds } from '../ops/archive.ts';
import { IMPORT_AUTHORITY, type ImportCounts, importDocuments, StatementImport } from '../ops/import.ts';
import { checkValidation } from '../ops/credentials.ts';
import { CliError } from './errors.ts';
import { openPull, type Pull } from './from-lrs.ts';
import { OutputFile, openCliStore, openInput, parseAgentOption, siblings } from './datafiles.ts';
import { interruptible, progressBars, rerun, say } from './progress.ts';

export interface ImportOptions {
  backend?: string;
  target?: string;
  fromLrs?: string;
  user?: string;
  password?: string;
  token?: string;
  attachments?: boolean | string;
  documents?: boolean | string;
  rejects?: string;
  skip?: string;
  batchSize?: string;
  pageSize?: string;
  authority?: string;
  validation?: string;
  violations?: string;
  more?: string;
  progressInterval?: string;
}

const positive = (raw: string | undefined, name: string, dflt: number): number => {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new CliError(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return n;
};

export async function importCommand(file: string | undefined, opts: ImportOptions): Promise<void> {
  if ((file === undefined) === (opts.fromLrs === undefined)) throw new CliError('give either FILE or --from-lrs URL');
  const batchSize = Math.max(1, positive(opts.batchSize, '--batch-size', 1000));
  const skip = positive(opts.skip, '--skip', 0);
  const authority = opts.authority === undefined ? IMPORT_AUTHORITY : parseAgentOption(opts.authority, '--authority');
  const side = file !== undefined && file !== '-' ? siblings(file) : undefined;
  // Sibling attachments/documents of an export are used when present; a path names them explicitly.
  const pick = (v: boolean | string | undefined, sibling: string | undefined) => (typeof v === 'string' ? v : sibling && (v === true || existsSync(sibling)) ? sibling : undefined);
  const attachmentsDir = opts.fromLrs ? undefined : pick(opts.attachments, side?.attachments);
  const documentsFile = opts.fromLrs ? undefined : pick(opts.documents, side?.documents);
  if (opts.fromLrs !== undefined && opts.violations !== undefined) throw new CliError('--violations is the violations file of an export: not for --from-lrs');
  const violationsFile = opts.fromLrs ? undefined : pick(opts.violations, side?.violations);
  for (const [path, what] of [
    [violationsFile, 'violations file'],
    [attachmentsDir, 'attachments folder'],
    [documentsFile, 'documents file'],
  ] as const) {
    if (path && !existsSync(path)) throw new CliError(`the ${what} ${path} does not exist`);
  }
  const rejectsPath = opts.rejects ?? (side ? side.rejects : 'lectern-import.rejects.ndjson');

  let pull: Pull | undefined;
  let items: AsyncIterable<ImportItem>;
  let input: ReturnType<typeof openInput> | undefined;
  if (opts.fromLrs !== undefined) {
    pull = await openPull({ ...opts, fromLrs: opts.fromLrs, pageSize: positive(opts.pageSize, '--page-size', 500) });
    items = pull.items;
  } else {
    input = openInput(file!);
    items = fileItems(input.stream);
  }

  const asked = checkValidation(opts.validation);
  const laxAtSource = violationsFile === undefined ? undefined : await readViolationIds(openInput(violationsFile).stream, violationsFile);
  const { config, store } = await openCliStore(opts.backend);
  const validation = asked ?? config.xapiValidation;
  const tenant = opts.target ?? '';
  let rejectsFile: OutputFile | undefined;
  const rejects = () => (rejectsFile ??= new OutputFile(rejectsPath, { append: skip > 0 || opts.more !== undefined }));
  const rejectsSink = { write: (text: string) => rejects().write(text) };
  const job = new StatementImport({ store, tenant, authority, rejects: rejectsSink, attachmentsDir, validation, laxAtSource });
  const n = (x: number) => x.toLocaleString('en-US');
  const onProgress = progressBars<'statements', ImportCounts>(
    { statements: { label: 'import', unit: 'statements', total: input?.size } },
    Number(opts.progressInterval ?? 10) * 1000,
    (c) => ({ measure: input?.bytesRead(), extra: `${n(c.inserted)} new, ${n(c.existing)} already stored, ${n(c.rejected)} rejected` }),
  );
  const stop = interruptible();
  try {
    const complete = await job.run(items, { batchSize, skip: pull ? 0 : skip, signal: stop.signal, onProgress });
    if (!complete) {
      const done = job.lastStored ?? skip;
      const next = pull ? (pull.current ? ['--more', pull.current] : []) : ['--skip', String(done)];
      say(
        `import interrupted: everything up to ${pull ? `statement ${done}` : `line ${done}`} is stored or in ${rejectsPath}. ` +
          `To resume: ${rerun({ '--skip': true, '--more': true }, next)} (statements already stored are skipped either way)`,
      );
      process.exitCode = 130;
      return;
    }
    let docs: Awaited<ReturnType<typeof importDocuments>> | undefined;
    if (documentsFile) docs = await importDocuments(store, { tenant, input: openInput(documentsFile).stream, file: documentsFile, rejects: rejectsSink });
    const c = job.counts;
    process.stderr.write(
      `imported ${c.read} statements: ${c.inserted} stored, ${c.existing} already stored, ${c.rejected} rejected` +
        (laxAtSource ? `; ${c.laxAtSource} of them stored under lax validation at the source, their violations kept (${violationsFile})` : '') +
        (docs ? `; ${docs.stored} documents stored, ${docs.unchanged} unchanged, ${docs.rejected} rejected` : '') +
        (c.rejected || docs?.rejected ? ` (reasons in ${rejectsPath})` : '') +
        '\n',
    );
    if (c.rejected || docs?.rejected) process.exitCode = 1;
  } catch (err) {
    if (err instanceof CliError) throw err;
    const done = job.lastStored ?? skip;
    const page = job.resumePage ?? pull?.current;
    const next = pull ? (page ? ['--more', page] : []) : ['--skip', String(done)];
    throw new CliError(
      `import stopped: ${(err as Error).message}. Everything before ${pull ? 'that page' : `line ${done + 1}`} is stored; ` +
        `to resume: ${rerun({ '--skip': true, '--more': true }, next)}`,
    );
  } finally {
    stop.dispose();
    await rejectsFile?.close();
    await store.close();
  }
}
