/**
 * Import: statements from an export (NDJSON or a JSON array) or pulled from another LRS, stored
 * through exactly what POST /statements runs (./statements.ts: the same validation, attachment
 * and signature checks, preparation and store insert with its conflict and voiding rules) in
 * batches. Statement ids make it idempotent: a re-run (after a crash, an interruption, or on
 * purpose) stores nothing twice. Every refused statement is reported with its line and reason to
 * the rejects sink; the rest go in. The documents of an export are imported alike.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { LrsError, type ValidationIssue } from '../errors.ts';
import type { Store } from '../store/types.ts';
import { ifiKey } from '../xapi/agents.ts';
import type { AttachmentPart } from '../xapi/attachments.ts';
import { type PreparedStatement, sameStatement } from '../xapi/statement.ts';
import type { Actor } from '../xapi/types.ts';
import { validateAgentParam } from '../xapi/validate.ts';
import { fileItems, type ImportItem, readNotCarried } from './archive.ts';
import type { OnProgress, TextSink } from './progress.ts';
import { type PreparedBatch, prepareImported } from './statements.ts';
import type { ValidationMode } from '../xapi/accept.ts';

/** The authority of imported statements that carry none (an export from an LRS always has one). */
export const IMPORT_AUTHORITY: Actor = { objectType: 'Agent', name: 'lectern import', account: { homePage: 'https://lectern.invalid', name: 'import' } };

/**
 * The attachment data an export folder holds for a statement's attachments, but for those it only
 * declared in the source store (`notCarried`: `id sha2` pairs, see NOT_CARRIED_FILE).
 */
function partsFromFolder(value: unknown, dir: string | undefined, notCarried: ReadonlySet<string>): Map<string, AttachmentPart> {
  const parts = new Map<string, AttachmentPart>();
  if (!dir || value === null || typeof value !== 'object') return parts;
  const s = value as { id?: unknown; attachments?: unknown; object?: { objectType?: unknown; attachments?: unknown } };
  const id = typeof s.id === 'string' ? s.id.toLowerCase() : '';
  const lists = [s.attachments, s.object?.objectType === 'SubStatement' ? s.object.attachments : undefined];
  for (const list of lists) {
    if (!Array.isArray(list)) continue;
    for (const a of list as { sha2?: unknown; contentType?: unknown }[]) {
      if (typeof a?.sha2 !== 'string') continue;
      const sha2 = a.sha2.toLowerCase();
      const file = join(dir, sha2);
      if (/^[0-9a-f]+$/.test(sha2) && !parts.has(sha2) && !notCarried.has(`${id} ${sha2}`) && existsSync(file)) {
        parts.set(sha2, { contentType: typeof a.contentType === 'string' ? a.contentType : 'application/octet-stream', body: readFileSync(file) });
      }
    }
  }
  return parts;
}

// ----- storing -----------------------------------------------------------------------------

export interface ImportCounts {
  read: number;
  inserted: number;
  existing: number;
  rejected: number;
  /** Of those stored (or already stored), how many the source held under lax validation (`laxAtSource`). */
  laxAtSource: number;
}

type Ready = { item: ImportItem; p: PreparedStatement; blobs: PreparedBatch['blobs']; lax: boolean };
/** A validated batch: what to store, and the rejects-file lines of what was refused. */
type Batch = { ready: Ready[]; refused: { n: number; line: string }[] };

/**
 * An import into one store, batch by batch; its figures and where a resume starts stay readable
 * after a failure (`lastStored`, `resumePage`).
 */
export class StatementImport {
  readonly counts: ImportCounts = { read: 0, inserted: 0, existing: 0, rejected: 0, laxAtSource: 0 };
  /** The `n` of the last item of the batches stored so far. */
  lastStored: number | undefined;
  private readonly store: Store;
  private readonly tenant: string;
  private readonly authority: Actor;
  private readonly validation: ValidationMode;
  private readonly laxAtSource: ReadonlySet<string>;
  private readonly rejects: TextSink;
  private readonly attachmentsDir: string | undefined;
  private readonly notCarried: ReadonlySet<string>;
  /** For a pull: the page of the first item of each batch not yet stored. */
  private readonly unfinished: (string | undefined)[] = [];

  /**
   * `authority`: of statements that carry none. `attachmentsDir`: an export's attachments folder,
   * for items without parts. `rejects`: one JSON line per refused statement, in input order.
   * `validation`: as a credential's (docs/validation.md); strict when absent. `laxAtSource`: the
   * ids (lower-case) of an export's violations file, validated under lax rules whatever
   * `validation` says: a restore stores them as the source held them, with the violations lax
   * finds in them now.
   */
  constructor(opts: {
    store: Store;
    tenant: string;
    authority: Actor;
    rejects: TextSink;
    attachmentsDir?: string;
    validation?: ValidationMode;
    laxAtSource?: ReadonlySet<string>;
  }) {
    this.store = opts.store;
    this.tenant = opts.tenant;
    this.authority = opts.authority;
    this.validation = opts.validation ?? 'strict';
    this.laxAtSource = opts.laxAtSource ?? new Set();
    this.rejects = opts.rejects;
    this.attachmentsDir = opts.attachmentsDir;
    this.notCarried = opts.attachmentsDir ? readNotCarried(opts.attachmentsDir) : new Set();
  }

  /** For a pull: the page of the first statement not yet stored (where to resume), when one was read. */
  get resumePage(): string | undefined {
    return this.unfinished[0];
  }

  /**
   * Reads, validates and stores `items` in batches of `batchSize`, skipping those numbered up to
   * `skip`; one batch is stored while the next is read and validated. Stops after the batch in
   * hand when `signal` aborts (returns false; true when every item was read). `onProgress`:
   * `statements`, advanced after each batch stored (`done`: items read).
   */
  async run(
    items: AsyncIterable<ImportItem>,
    opts: { batchSize: number; skip?: number; signal?: AbortSignal; onProgress?: OnProgress<'statements', ImportCounts> },
  ): Promise<boolean> {
    const { batchSize, signal, onProgress } = opts;
    const skip = opts.skip ?? 0;
    onProgress?.({ type: 'start', phase: 'statements' });
    let batch: ImportItem[] = [];
    let interrupted = false;
    let writing: Promise<void> | undefined;
    const flush = async () => {
      const last = batch[batch.length - 1].n;
      this.unfinished.push(batch[0].page);
      const ready = await this.prepare(batch);
      batch = [];
      await writing;
      writing = this.insert(ready).then(() => {
        this.lastStored = last;
        this.unfinished.shift();
        onProgress?.({ type: 'advance', phase: 'statements', done: this.counts.read, ...this.counts });
      });
      // A failure is seen at the next `await writing`; until then it must not count as unhandled.
      writing.catch(() => undefined);
    };
    for await (const item of items) {
      if (item.n <= skip) continue;
      batch.push(item);
      if (batch.length >= batchSize) {
        await flush();
        if (signal?.aborted) {
          await writing;
          interrupted = true;
          break;
        }
      }
    }
    if (!interrupted && batch.length) await flush();
    await writing;
    onProgress?.({ type: 'end', phase: 'statements' });
    return !interrupted;
  }

  /** One line of the rejects file. */
  private refusal(item: ImportItem, err: { message: string; status?: number; issues?: ValidationIssue[] }, id?: string): string {
    this.counts.rejected++;
    // Validation locations start with the index in a batch of one: drop it.
    const issues = err.issues?.map((i) => ({ ...i, loc: typeof i.loc[0] === 'number' ? i.loc.slice(1) : i.loc }));
    const error = issues ? issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; ') : err.message;
    return `${JSON.stringify({ line: item.n, id, status: err.status ?? 400, error, issues })}\n`;
  }

  /** Validates and prepares one batch; refused statements go to the rejects file. */
  private async prepare(items: ImportItem[]): Promise<Batch> {
    this.counts.read += items.length;
    const ready: Ready[] = [];
    // Written with the batch, so that the rejects file follows the input's order batch by batch.
    const refused: { n: number; line: string }[] = [];
    const byId = new Map<string, PreparedStatement>();
    for (const item of items) {
      if (item.malformed !== undefined) {
        refused.push({ n: item.n, line: this.refusal(item, { message: item.malformed }) });
        continue;
      }
      if (item.value === null || typeof item.value !== 'object' || Array.isArray(item.value)) {
        refused.push({ n: item.n, line: this.refusal(item, { message: 'each line must be one statement (a JSON object)' }) });
        continue;
      }
      const given = (item.value as { id?: unknown }).id;
      const id = typeof given === 'string' ? given : undefined;
      const lax = id !== undefined && this.laxAtSource.has(id.toLowerCase());
      try {
        const parts = item.parts ? narrow(item.value, item.parts) : partsFromFolder(item.value, this.attachmentsDir, this.notCarried);
        const { batch, blobs } = await prepareImported(item.value, parts, this.authority, lax ? 'lax' : this.validation);
        const p = batch[0];
        const twin = byId.get(p.id);
        if (twin) {
          if (sameStatement(p.statement, twin.statement, p.xapiVersion)) this.counts.existing++;
          else refused.push({ n: item.n, line: this.refusal(item, { status: 409, message: `a different statement with id ${p.id} comes earlier in the input` }, p.id) });
          continue;
        }
        byId.set(p.id, p);
        ready.push({ item, p, blobs, lax });
      } catch (err) {
        if (!(err instanceof LrsError)) throw err;
        refused.push({ n: item.n, line: this.refusal(item, err, id) });
      }
    }
    return { ready, refused };
  }

  /** Stores a prepared batch in one transaction (when one statement spoils it, one by one), then its refusals. */
  private async insert({ ready, refused }: Batch): Promise<void> {
    await this.storeReady(ready, refused);
    if (refused.length)
      await this.rejects.write(
        refused
          .sort((a, b) => a.n - b.n)
          .map((r) => r.line)
          .join(''),
      );
  }

  private async storeReady(ready: Ready[], refused: Batch['refused']): Promise<void> {
    if (!ready.length) return;
    try {
      const out = await this.store.insertStatements(
        this.tenant,
        ready.map((r) => r.p),
        ready.flatMap((r) => r.blobs),
      );
      this.counts.inserted += out.inserted;
      this.counts.existing += ready.length - out.inserted;
      this.counts.laxAtSource += ready.filter((r) => r.lax).length;
    } catch (err) {
      if (!(err instanceof LrsError) || err.kind === 'unavailable') throw err;
      // One statement spoiled the batch (a conflict, voiding a voiding statement): one by one.
      for (const r of ready) {
        try {
          const out = await this.store.insertStatements(this.tenant, [r.p], r.blobs);
          this.counts.inserted += out.inserted;
          this.counts.existing += 1 - out.inserted;
          if (r.lax) this.counts.laxAtSource++;
        } catch (e) {
          if (!(e instanceof LrsError) || e.kind === 'unavailable') throw e;
          refused.push({ n: r.item.n, line: this.refusal(r.item, e, r.p.id) });
        }
      }
    }
  }
}

/** The parts of a pulled page that belong to this statement (matchAttachments refuses extra parts). */
function narrow(value: unknown, parts: Map<string, AttachmentPart>): Map<string, AttachmentPart> {
  const out = new Map<string, AttachmentPart>();
  const s = value as { attachments?: unknown; object?: { objectType?: unknown; attachments?: unknown } };
  for (const list of [s.attachments, s.object?.objectType === 'SubStatement' ? s.object.attachments : undefined]) {
    if (!Array.isArray(list)) continue;
    for (const a of list as { sha2?: unknown }[]) {
      const sha2 = typeof a?.sha2 === 'string' ? a.sha2.toLowerCase() : '';
      const part = parts.get(sha2);
      if (part) out.set(sha2, part);
    }
  }
  return out;
}

// ----- documents -----------------------------------------------------------------------------

/** One line of the documents file (./archive.ts, documentLine). */
interface DocumentLine {
  kind?: unknown;
  activityId?: unknown;
  agent?: unknown;
  registration?: unknown;
  id?: unknown;
  contentType?: unknown;
  updated?: unknown;
  content?: unknown;
}

/**
 * The documents of an export's documents file (`file` names it in the rejects lines), each
 * replacing the stored one with the exported `updated` (Last-Modified) kept; a document stored
 * exactly so already (a re-import) is not written again.
 */
export async function importDocuments(
  store: Store,
  req: { tenant: string; input: Readable; file: string; rejects: TextSink },
): Promise<{ stored: number; unchanged: number; rejected: number }> {
  const { tenant, file, rejects } = req;
  let stored = 0;
  let unchanged = 0;
  let rejected = 0;
  for await (const item of fileItems(req.input)) {
    const d = item.value as DocumentLine | undefined;
    let problem = item.malformed;
    let agentKey = '';
    if (!problem) {
      const kinds = ['state', 'activity_profile', 'agent_profile'];
      if (!d || typeof d !== 'object' || !kinds.includes(d.kind as string)) problem = `kind must be one of ${kinds.join(', ')}`;
      else if (typeof d.id !== 'string' || typeof d.contentType !== 'string' || typeof d.content !== 'string') problem = 'id, contentType and content (base64) are required';
      else if (d.kind !== 'agent_profile' && typeof d.activityId !== 'string') problem = 'activityId is required';
      else if (d.updated !== undefined && (typeof d.updated !== 'string' || !Number.isFinite(Date.parse(d.updated)))) problem = 'updated must be a timestamp';
      else if (d.kind !== 'activity_profile') {
        const issues: { loc: (string | number)[]; msg: string; type: string }[] = [];
        const agent = validateAgentParam(d.agent, ['agent'], issues);
        if (issues.length || !agent) problem = `agent: ${issues.map((i) => i.msg).join('; ') || 'required'}`;
        else agentKey = ifiKey(agent) ?? '';
      }
    }
    if (problem) {
      rejected++;
      await rejects.write(`${JSON.stringify({ document: item.n, file, status: 400, error: problem })}\n`);
      continue;
    }
    const key = {
      kind: d!.kind as 'state' | 'activity_profile' | 'agent_profile',
      activityId: typeof d!.activityId === 'string' ? d!.activityId : '',
      agent: agentKey,
      registration: typeof d!.registration === 'string' ? d!.registration.toLowerCase() : '',
      docId: d!.id as string,
    };
    const content = Buffer.from(d!.content as string, 'base64');
    const contentType = d!.contentType as string;
    const updatedMs = typeof d!.updated === 'string' ? Date.parse(d!.updated) : undefined;
    const current = await store.getDocument(tenant, key);
    if (current && current.contentType === contentType && current.content.equals(content) && (updatedMs === undefined || current.updatedMs === updatedMs)) {
      unchanged++;
      continue;
    }
    await store.putDocument(tenant, key, { content, contentType }, { merge: false, pre: {}, updatedMs });
    stored++;
  }
  return { stored, unchanged, rejected };
}
