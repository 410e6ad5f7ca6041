/**
 * Export: a store's statements as NDJSON, one stored statement per line exactly as the LRS serves
 * it, in stored order; what those stored under lax validation broke (./archive.ts, violationLine);
 * optionally their attachments (one file per SHA-256 in a folder) and the documents. Page by
 * page: memory stays flat whatever the size.
 */
import { appendFileSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DocumentKey, Store, StoredRow } from '../store/types.ts';
import { actorFromKey } from '../xapi/agents.ts';
import { attachmentHashes } from '../xapi/attachments.ts';
import { personKey } from '../xapi/erasure.ts';
import { parseStatementRequest, type StatementQuery } from '../xapi/query.ts';
import type { Actor, Statement } from '../xapi/types.ts';
import { documentLine, NOT_CARRIED_FILE, violationLine } from './archive.ts';
import { OpsError } from './errors.ts';
import type { OnProgress, TextSink } from './progress.ts';

const PAGE = 1000;
/** Bytes of statement JSON a filtered page holds at most (the query ends a page early past it, as for GET). */
const PAGE_BYTES = 32 * 1024 * 1024;
const DOCUMENT_PAGE = 200;

/** Which statements to export, as the Statement resource's parameters of the same names. */
export type ExportFilters = Partial<Record<'agent' | 'verb' | 'activity' | 'since' | 'until', string>>;

/**
 * The filters as the Statement resource parses them: same validation, same ValidationFailed
 * (its issues located at `[query, name]`).
 */
export function exportQuery(filters: ExportFilters): StatementQuery {
  const params: Record<string, string> = { ascending: 'true', limit: String(PAGE) };
  for (const k of ['agent', 'verb', 'activity', 'since', 'until'] as const) if (filters[k] !== undefined) params[k] = filters[k];
  const r = parseStatementRequest(params, { maxLimit: PAGE, maxBytes: PAGE_BYTES });
  if (r.kind !== 'query') throw new OpsError('unexpected filters');
  return r.query;
}

export interface StatementExport {
  tenant: string;
  /** From exportQuery. With an agent, verb or activity, voided statements are left out, as GET does. */
  query: StatementQuery;
  /** Continue after this position (an interrupted export's `after`). */
  after?: string;
  out: TextSink;
  /** Where the violations of the statements stored under lax validation go, one line each (absent: counted only). */
  violations?: TextSink;
  /** Also write the attachments' data there. */
  attachmentsDir?: string;
  /** The export continues one in that folder (NOT_CARRIED_FILE is appended to, not started afresh). */
  append?: boolean;
  /** Stops after the page in hand. */
  signal?: AbortSignal;
  /** `statements`: statements written (the total when known: unfiltered, from the start). */
  onProgress?: OnProgress<'statements'>;
}

export interface ExportResult {
  written: number;
  /** Statements written that were stored under lax validation with violations. */
  lax: number;
  attachments: number;
  /** False when stopped by the signal: each line written is complete; continue after `after`. */
  complete: boolean;
  after?: string;
}

/** True when the query filters on more than `stored` (the scan cannot serve it). */
const filtered = (q: StatementQuery): boolean => q.filter.agent !== undefined || q.filter.verb !== undefined || q.filter.activity !== undefined;

export async function exportStatements(store: Store, req: StatementExport): Promise<ExportResult> {
  const { tenant, query, out, violations, attachmentsDir, signal, onProgress } = req;
  const byQuery = filtered(query);
  const total = byQuery || req.after !== undefined ? undefined : await store.countStatements(tenant, { sinceMs: query.since, untilMs: query.until });
  onProgress?.({ type: 'start', phase: 'statements', total });
  if (attachmentsDir) mkdirSync(attachmentsDir, { recursive: true });
  let written = 0;
  let lax = 0;
  let attachments = 0;
  let after = req.after;
  for (;;) {
    if (signal?.aborted) {
      onProgress?.({ type: 'end', phase: 'statements' });
      return { written, lax, attachments, complete: false, after };
    }
    // Filters go through the Statement resource's query (voided statements left out, as GET does);
    // without them, every stored statement is exported, voided ones included.
    const page = byQuery
      ? await store.queryStatements(tenant, { ...query, after })
      : await store.scanStatements(tenant, { after, limit: PAGE, sinceMs: query.since, untilMs: query.until });
    if (page.rows.length) await out.write(`${page.rows.map((r) => r.json).join('\n')}\n`);
    lax += await writeViolations(store, tenant, page.rows, violations);
    if (attachmentsDir) attachments += await writeAttachments(store, tenant, attachmentsDir, page.rows, req.append === true || written > 0);
    written += page.rows.length;
    onProgress?.({ type: 'advance', phase: 'statements', done: written });
    if (!page.next) break;
    after = page.next;
  }
  onProgress?.({ type: 'end', phase: 'statements' });
  return { written, lax, attachments, complete: true, after };
}

/** Writes the violations of these statements that have some (to `sink`, when given); returns how many have. */
async function writeViolations(store: Store, tenant: string, rows: StoredRow[], sink: TextSink | undefined): Promise<number> {
  if (!rows.length) return 0;
  const found = await store.violationsAt(
    tenant,
    rows.map((r) => r.position),
  );
  if (sink && found.size) {
    const lines = rows.flatMap((r) => {
      const v = found.get(r.position);
      return v ? [violationLine((JSON.parse(r.json) as Statement).id!, v)] : [];
    });
    await sink.write(lines.join(''));
  }
  return found.size;
}

/**
 * Writes the attachments of these statements not already in the folder; returns how many it wrote.
 * Those a statement declared without carrying the data are listed in NOT_CARRIED_FILE (appended
 * to after the first page, or with `append`; started afresh otherwise).
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
    const notCarried = await store.attachmentsNotCarried(
      tenant,
      withAttachments.map((w) => w.position),
    );
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

/** Every document (of the agent, of the activity, when given) as lines of the documents file; returns how many. */
export async function exportDocuments(store: Store, req: { tenant: string; out: TextSink; agent?: Actor; activity?: string }): Promise<number> {
  const agentKey = req.agent === undefined ? undefined : personKey(req.agent);
  const keep = (k: DocumentKey) =>
    (agentKey === undefined || (k.agent !== '' && personKey(actorFromKey(k.agent)) === agentKey)) && (req.activity === undefined || k.activityId === req.activity);
  let n = 0;
  let after: DocumentKey | undefined;
  for (;;) {
    const page = await store.scanDocuments(req.tenant, { after, limit: DOCUMENT_PAGE });
    const kept = page.filter((d) => keep(d.key));
    if (kept.length) await req.out.write(kept.map(documentLine).join(''));
    n += kept.length;
    if (page.length < DOCUMENT_PAGE) break;
    after = page[page.length - 1].key;
  }
  return n;
}
