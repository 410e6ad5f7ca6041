/**
 * `lectern export`: the store's statements as NDJSON, one stored statement per line exactly as the
 * LRS serves it, in stored order; optionally their attachments (one file per SHA-256 in a folder)
 * and the documents (one JSON line each, content base64). Streams page by page: memory stays flat
 * whatever the size.
 */
import { appendFileSync, mkdirSync, existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationFailed } from '../errors.ts';
import type { DocumentKey, KeyedDocument, Store, StoredRow } from '../store/types.ts';
import { actorFromKey } from '../xapi/agents.ts';
import { personKey } from '../xapi/erasure.ts';
import { parseStatementRequest, type StatementQuery } from '../xapi/query.ts';
import { attachmentHashes } from '../xapi/attachments.ts';
import type { Statement } from '../xapi/types.ts';
import { CliError } from './errors.ts';
import { NOT_CARRIED_FILE, OutputFile, openCliStore, siblings } from './datafiles.ts';
import { interruptible, Progress, rerun } from './progress.ts';

export interface ExportOptions {
  output?: string;
  backend?: string;
  target?: string;
  since?: string;
  until?: string;
  agent?: string;
  verb?: string;
  activity?: string;
  /** true: the sibling folder; a string: that folder. */
  attachments?: boolean | string;
  /** true: the sibling file; a string: that file. */
  documents?: boolean | string;
  after?: string;
  append?: boolean;
  progressInterval?: string;
}

const PAGE = 1000;
/** Bytes of statement JSON a filtered page holds at most (the query ends a page early past it, as for GET). */
const PAGE_BYTES = 32 * 1024 * 1024;

/** One line of the documents file (read back by importDocuments in ./import.ts). */
export function documentLine(d: KeyedDocument): string {
  const agent = d.key.agent ? actorFromKey(d.key.agent) : undefined;
  return `${JSON.stringify({
    kind: d.key.kind,
    activityId: d.key.activityId || undefined,
    agent,
    registration: d.key.registration || undefined,
    id: d.key.docId,
    contentType: d.contentType,
    updated: new Date(d.updatedMs).toISOString(),
    content: d.content.toString('base64'),
  })}\n`;
}

/** The filters as the Statement resource parses them (same validation, same messages). */
function parseFilters(opts: ExportOptions): StatementQuery {
  const params: Record<string, string> = { ascending: 'true', limit: String(PAGE) };
  for (const k of ['agent', 'verb', 'activity', 'since', 'until'] as const) if (opts[k] !== undefined) params[k] = opts[k];
  try {
    const r = parseStatementRequest(params, { maxLimit: PAGE, maxBytes: PAGE_BYTES });
    if (r.kind !== 'query') throw new CliError('unexpected filters');
    return r.query;
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
  if (opts.after !== undefined && !/^\d{1,19}$/.test(opts.after)) throw new CliError(`--after takes the position an interrupted export printed, not ${JSON.stringify(opts.after)}`);
  const query = parseFilters(opts);
  const tenant = opts.target ?? '';
  const { store } = await openCliStore(opts.backend);
  const stop = interruptible();
  const out = new OutputFile(output, { append: opts.append });
  try {
    const filtered = query.filter.agent !== undefined || query.filter.verb !== undefined || query.filter.activity !== undefined;
    const total = filtered || opts.after !== undefined ? undefined : await store.countStatements(tenant, { sinceMs: query.since, untilMs: query.until });
    const progress = new Progress({ label: 'export', unit: 'statements', total, intervalMs: Number(opts.progressInterval ?? 10) * 1000 });
    if (attachmentsDir) mkdirSync(attachmentsDir, { recursive: true });
    let written = 0;
    let attachmentsWritten = 0;
    let after = opts.after;
    for (;;) {
      if (stop.signal.aborted) {
        progress.finish();
        await out.close();
        progress.say(
          `export interrupted: ${written} statements written${output === '-' ? '' : ` to ${output}`}, each line complete. ` +
            `To continue: ${rerun({ '--append': false, '--after': true }, [...(after ? ['--after', after] : []), output === '-' ? '>> FILE' : '--append'])}`,
        );
        process.exitCode = 130;
        return;
      }
      // Filters go through the Statement resource's query (voided statements left out, as GET does);
      // without them, every stored statement is exported, voided ones included.
      const page = filtered
        ? await store.queryStatements(tenant, { ...query, after })
        : await store.scanStatements(tenant, { after, limit: PAGE, sinceMs: query.since, untilMs: query.until });
      if (page.rows.length) await out.write(`${page.rows.map((r) => r.json).join('\n')}\n`);
      if (attachmentsDir) attachmentsWritten += await writeAttachments(store, tenant, attachmentsDir, page.rows, opts.append === true || written > 0);
      written += page.rows.length;
      progress.update(written);
      if (!page.next) break;
      after = page.next;
    }
    progress.finish();
    await out.close();
    let documents = 0;
    if (documentsFile) documents = await exportDocuments(store, tenant, documentsFile, opts);
    process.stderr.write(
      `exported ${written} statements${output === '-' ? '' : ` to ${output}`}` +
        (attachmentsDir ? `, ${attachmentsWritten} attachments to ${attachmentsDir}` : '') +
        (documentsFile ? `, ${documents} documents to ${documentsFile}` : '') +
        '\n',
    );
  } finally {
    stop.dispose();
    // After a failure too: the lines written so far are complete and the gzip stream is closed.
    await out.close();
    await store.close();
  }
}

/**
 * Writes the attachments of these statements not already in the folder; returns how many it wrote.
 * Those a statement declared without carrying the data are listed in NOT_CARRIED_FILE (appended
 * to after the first page, or with --append; started afresh otherwise).
 */
async function writeAttachments(store: Store, tenant: string, dir: string, rows: StoredRow[], append: boolean): Promise<number> {
  const listed = join(dir, NOT_CARRIED_FILE);
  if (!append) rmSync(listed, { force: true });
  const wanted = new Set<string>();
  const withAttachments: { id: string; position: string }[] = [];
  for (const r of rows) {
    if (!r.json.includes('"attachments"')) continue;
    const s = JSON.parse(r.json) as Statement;
    const hashes = attachmentHashes(s);
    if (!hashes.length) continue;
    withAttachments.push({ id: s.id!, position: r.position });
    for (const h of hashes) if (!existsSync(join(dir, h))) wanted.add(h);
  }
  if (withAttachments.length) {
    const notCarried = await store.attachmentsNotCarried(tenant, withAttachments.map((w) => w.position));
    const lines = withAttachments.flatMap((w) => (notCarried.get(w.position) ?? []).map((sha2) => `${JSON.stringify({ id: w.id, sha2 })}\n`));
    if (lines.length) appendFileSync(listed, lines.join(''));
  }
  if (!wanted.size) return 0;
  const blobs = await store.getAttachments(tenant, [...wanted]);
  for (const b of blobs) {
    // Written under a temporary name first: a file named by its hash is always complete.
    const tmp = join(dir, `.${b.sha2}.partial`);
    writeFileSync(tmp, b.content);
    renameSync(tmp, join(dir, b.sha2));
  }
  return blobs.length;
}

/** Every document (of the agent or activity filtered on, if any) to the documents file. */
async function exportDocuments(store: Store, tenant: string, file: string, opts: ExportOptions): Promise<number> {
  const out = new OutputFile(file);
  const agentKey = opts.agent === undefined ? undefined : personKey(JSON.parse(opts.agent));
  const keep = (k: DocumentKey) =>
    (agentKey === undefined || (k.agent !== '' && personKey(actorFromKey(k.agent)) === agentKey)) &&
    (opts.activity === undefined || k.activityId === opts.activity);
  let n = 0;
  let after: DocumentKey | undefined;
  for (;;) {
    const page = await store.scanDocuments(tenant, { after, limit: 200 });
    const kept = page.filter((d) => keep(d.key));
    if (kept.length) await out.write(kept.map(documentLine).join(''));
    n += kept.length;
    if (page.length < 200) break;
    after = page[page.length - 1].key;
  }
  await out.close();
  return n;
}
