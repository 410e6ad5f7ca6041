/**
 * `lectern import`: statements from an export (NDJSON or a JSON array, `.gz` too) or pulled from
 * another LRS's Statement resource, stored through exactly what POST /statements runs — the same
 * validation, attachment and signature checks (acceptStatements), the same preparation and the
 * same store insert with its conflict and voiding rules — in batches. Statement ids make it
 * idempotent: a re-run (after a crash, Ctrl-C, or on purpose) stores nothing twice. Every refused
 * statement is reported with its line and reason in the rejects file; the rest go in.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { LrsError, type ValidationIssue } from '../errors.ts';
import { acceptStatements } from '../xapi/accept.ts';
import { surrogateMessage, unpairedSurrogate } from '../xapi/json.ts';
import type { AttachmentPart } from '../xapi/attachments.ts';
import type { Store } from '../store/types.ts';
import { ifiKey } from '../xapi/agents.ts';
import { type PreparedStatement, prepareStatement, sameStatement } from '../xapi/statement.ts';
import type { Actor, Statement } from '../xapi/types.ts';
import { validateAgentParam } from '../xapi/validate.ts';
import { statementRules } from '../xapi/versions.ts';
import { CliError } from './errors.ts';
import { openPull, type Pull, type PulledStatement } from './from-lrs.ts';
import { readNotCarried } from '../ops/archive.ts';
import { OutputFile, openCliStore, openInput, parseAgentOption, siblings } from './datafiles.ts';
import { interruptible, Progress, rerun } from './progress.ts';

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
  more?: string;
  progressInterval?: string;
}

/** The authority of imported statements that carry none (an export from an LRS always has one). */
export const IMPORT_AUTHORITY: Actor = { objectType: 'Agent', name: 'lectern import', account: { homePage: 'https://lectern.invalid', name: 'import' } };

/** One statement to import: its line (file) or number (pull), the parsed JSON or why it is not JSON. */
interface Item extends Partial<PulledStatement> {
  n: number;
  malformed?: string;
}

// ----- reading files -------------------------------------------------------------------------

/** Strict UTF-8, as POST decodes bodies: a line with invalid bytes is refused, not patched with U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

function parseItem(n: number, bytes: Buffer): Item | undefined {
  let text: string;
  try {
    text = UTF8.decode(bytes).trim();
  } catch {
    return { n, malformed: 'not valid UTF-8' };
  }
  if (!text) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { n, malformed: `malformed JSON: ${(err as Error).message}` };
  }
  // As POST refuses it: a lone surrogate would be stored as U+FFFD (or not at all).
  const lone = unpairedSurrogate(text, value);
  if (lone) return { n, malformed: `at ${lone.path.join('.') || 'the top'}: ${surrogateMessage(lone)}` };
  return { n, value };
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d, 0xef, 0xbb, 0xbf]); // and a UTF-8 BOM

/**
 * The statements of a file: NDJSON (one per line, blank lines ignored) or, when its first
 * non-blank character is `[`, a JSON array split into its elements as it streams in. Works on
 * bytes: every character it looks for is ASCII, which never occurs inside a multi-byte UTF-8
 * sequence.
 */
async function* fileItems(stream: Readable): AsyncGenerator<Item> {
  let buf: Buffer = Buffer.alloc(0);
  let mode: 'ndjson' | 'array' | undefined;
  let line = 0;
  // Array scanner state: nesting depth, inside a string, after a backslash, bytes already scanned.
  let depth = 0;
  let inString = false;
  let escaped = false;
  let scanned = 0;
  let element = 0;
  for await (const chunk of stream) {
    buf = buf.length ? Buffer.concat([buf, chunk as Buffer]) : (chunk as Buffer);
    if (mode === undefined) {
      let i = 0;
      while (i < buf.length && WHITESPACE.has(buf[i])) i++;
      if (i === buf.length) continue;
      mode = buf[i] === 0x5b ? 'array' : 'ndjson';
      if (mode === 'array') {
        buf = buf.subarray(i + 1);
        depth = 1;
      }
    }
    if (mode === 'ndjson') {
      let from = 0;
      let nl: number;
      while ((nl = buf.indexOf(0x0a, from)) !== -1) {
        line++;
        const item = parseItem(line, buf.subarray(from, nl));
        from = nl + 1;
        if (item) yield item;
      }
      buf = Buffer.from(buf.subarray(from));
      continue;
    }
    let start = 0;
    for (let i = scanned; i < buf.length; i++) {
      const c = buf[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (c === 0x5c) escaped = true;
        else if (c === 0x22) inString = false;
      } else if (c === 0x22) inString = true;
      else if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d || c === 0x2c) {
        if (c !== 0x2c) depth--;
        if ((depth === 1 && c === 0x2c) || depth === 0) {
          const item = parseItem(element + 1, buf.subarray(start, i));
          if (item) {
            element++;
            yield item;
          } else if (c === 0x2c) {
            yield { n: ++element, malformed: 'an empty element in the JSON array' };
          }
          start = i + 1;
          if (depth === 0) return;
        }
      }
    }
    buf = Buffer.from(buf.subarray(start));
    scanned = buf.length;
  }
  if (mode === 'ndjson' && buf.length) {
    const item = parseItem(line + 1, buf);
    if (item) yield item;
  }
  if (mode === 'array') yield { n: element + 1, malformed: 'the JSON array is not closed (truncated file?)' };
}

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

interface Counts {
  read: number;
  inserted: number;
  existing: number;
  rejected: number;
}

type Ready = { item: Item; p: PreparedStatement; blobs: { sha2: string; contentType: string; content: Buffer }[] };
/** A validated batch: what to store, and the rejects-file lines of what was refused. */
type Batch = { ready: Ready[]; refused: { n: number; line: string }[] };

class Importer {
  readonly counts: Counts = { read: 0, inserted: 0, existing: 0, rejected: 0 };
  private readonly store: Store;
  private readonly tenant: string;
  private readonly authority: Actor;
  private readonly rejects: () => OutputFile;
  private readonly attachmentsDir: string | undefined;
  private readonly notCarried: ReadonlySet<string>;

  constructor(opts: { store: Store; tenant: string; authority: Actor; rejects: () => OutputFile; attachmentsDir?: string }) {
    this.store = opts.store;
    this.tenant = opts.tenant;
    this.authority = opts.authority;
    this.rejects = opts.rejects;
    this.attachmentsDir = opts.attachmentsDir;
    this.notCarried = opts.attachmentsDir ? readNotCarried(opts.attachmentsDir) : new Set();
  }

  /** One line of the rejects file. */
  private refusal(item: Item, err: { message: string; status?: number; issues?: ValidationIssue[] }, id?: string): string {
    this.counts.rejected++;
    // Validation locations start with the index in a batch of one: drop it.
    const issues = err.issues?.map((i) => ({ ...i, loc: typeof i.loc[0] === 'number' ? i.loc.slice(1) : i.loc }));
    const error = issues ? issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; ') : err.message;
    return `${JSON.stringify({ line: item.n, id, status: err.status ?? 400, error, issues })}\n`;
  }

  /** Validates and prepares one batch; refused statements go to the rejects file. */
  async prepare(items: Item[]): Promise<Batch> {
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
      const id = typeof (item.value as Statement).id === 'string' ? (item.value as Statement).id : undefined;
      try {
        const parts = item.parts ? narrow(item.value, item.parts) : partsFromFolder(item.value, this.attachmentsDir, this.notCarried);
        // Each statement is read under the version it was written in (README, "Import").
        const version = statementRules(item.value);
        const { statements, blobs } = await acceptStatements({ value: item.value, parts }, version);
        const s = statements[0];
        // Without an id (and no signed one), a statement gets one derived from its content, not a
        // random one: a re-run then finds it stored instead of storing it twice.
        s.id ??= contentId(item.value);
        // The authority the source LRS recorded is kept (see README, "Import"); the statement
        // carried the data found for it (not the batch's: each statement has its own authority).
        const p = prepareStatement(s, s.authority ?? this.authority, version, new Set(blobs.map((b) => b.sha2)));
        const twin = byId.get(p.id);
        if (twin) {
          if (sameStatement(p.statement, twin.statement, p.xapiVersion)) this.counts.existing++;
          else refused.push({ n: item.n, line: this.refusal(item, { status: 409, message: `a different statement with id ${p.id} comes earlier in the input` }, p.id) });
          continue;
        }
        byId.set(p.id, p);
        ready.push({ item, p, blobs });
      } catch (err) {
        if (!(err instanceof LrsError)) throw err;
        refused.push({ n: item.n, line: this.refusal(item, err, id) });
      }
    }
    return { ready, refused };
  }

  /** Stores a prepared batch in one transaction; when one statement spoils it, one by one. */
  async insert({ ready, refused }: Batch): Promise<void> {
    await this.storeReady(ready, refused);
    if (refused.length) await this.rejects().write(refused.sort((a, b) => a.n - b.n).map((r) => r.line).join(''));
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
    } catch (err) {
      if (!(err instanceof LrsError) || err.kind === 'unavailable') throw err;
      // One statement spoiled the batch (a conflict, voiding a voiding statement): one by one.
      for (const r of ready) {
        try {
          const out = await this.store.insertStatements(this.tenant, [r.p], r.blobs);
          this.counts.inserted += out.inserted;
          this.counts.existing += 1 - out.inserted;
        } catch (e) {
          if (!(e instanceof LrsError) || e.kind === 'unavailable') throw e;
          refused.push({ n: r.item.n, line: this.refusal(r.item, e, r.p.id) });
        }
      }
    }
  }
}

/** A UUID (version 8, RFC 9562) from the SHA-256 of a statement's JSON. */
function contentId(value: unknown): string {
  const h = createHash('sha256').update(JSON.stringify(value)).digest('hex');
  const variant = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
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

/** One line of the documents file written by `lectern export --documents`. */
interface DocumentLine {
  kind?: unknown;
  activityId?: unknown;
  agent?: unknown;
  registration?: unknown;
  id?: unknown;
  contentType?: unknown;
  content?: unknown;
}

async function importDocuments(store: Store, tenant: string, file: string, rejects: () => OutputFile): Promise<{ stored: number; rejected: number }> {
  const input = openInput(file);
  let stored = 0;
  let rejected = 0;
  for await (const item of fileItems(input.stream)) {
    const d = item.value as DocumentLine | undefined;
    let problem = item.malformed;
    let agentKey = '';
    if (!problem) {
      const kinds = ['state', 'activity_profile', 'agent_profile'];
      if (!d || typeof d !== 'object' || !kinds.includes(d.kind as string)) problem = `kind must be one of ${kinds.join(', ')}`;
      else if (typeof d.id !== 'string' || typeof d.contentType !== 'string' || typeof d.content !== 'string') problem = 'id, contentType and content (base64) are required';
      else if (d.kind !== 'agent_profile' && typeof d.activityId !== 'string') problem = 'activityId is required';
      else if (d.kind !== 'activity_profile') {
        const issues: { loc: (string | number)[]; msg: string; type: string }[] = [];
        const agent = validateAgentParam(d.agent, ['agent'], issues);
        if (issues.length || !agent) problem = `agent: ${issues.map((i) => i.msg).join('; ') || 'required'}`;
        else agentKey = ifiKey(agent) ?? '';
      }
    }
    if (problem) {
      rejected++;
      await rejects().write(`${JSON.stringify({ document: item.n, file, status: 400, error: problem })}\n`);
      continue;
    }
    const key = {
      kind: d!.kind as 'state' | 'activity_profile' | 'agent_profile',
      activityId: typeof d!.activityId === 'string' ? d!.activityId : '',
      agent: agentKey,
      registration: typeof d!.registration === 'string' ? d!.registration.toLowerCase() : '',
      docId: d!.id as string,
    };
    await store.putDocument(tenant, key, { content: Buffer.from(d!.content as string, 'base64'), contentType: d!.contentType as string }, { merge: false, pre: {} });
    stored++;
  }
  return { stored, rejected };
}

// ----- the command -------------------------------------------------------------------------

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
  const pick = (v: boolean | string | undefined, sibling: string | undefined) =>
    typeof v === 'string' ? v : sibling && (v === true || existsSync(sibling)) ? sibling : undefined;
  const attachmentsDir = opts.fromLrs ? undefined : pick(opts.attachments, side?.attachments);
  const documentsFile = opts.fromLrs ? undefined : pick(opts.documents, side?.documents);
  for (const [path, what] of [[attachmentsDir, 'attachments folder'], [documentsFile, 'documents file']] as const) {
    if (path && !existsSync(path)) throw new CliError(`the ${what} ${path} does not exist`);
  }
  const rejectsPath = opts.rejects ?? (side ? side.rejects : 'lectern-import.rejects.ndjson');

  let pull: Pull | undefined;
  let items: AsyncIterable<Item>;
  let input: ReturnType<typeof openInput> | undefined;
  if (opts.fromLrs !== undefined) {
    pull = await openPull({ ...opts, fromLrs: opts.fromLrs, pageSize: positive(opts.pageSize, '--page-size', 500) });
    items = pull.items;
  } else {
    input = openInput(file!);
    items = fileItems(input.stream);
  }

  const { store } = await openCliStore(opts.backend);
  const tenant = opts.target ?? '';
  let rejectsFile: OutputFile | undefined;
  const rejects = () => (rejectsFile ??= new OutputFile(rejectsPath, { append: skip > 0 || opts.more !== undefined }));
  const importer = new Importer({ store, tenant, authority, rejects, attachmentsDir });
  const progress = new Progress({ label: 'import', unit: 'statements', total: input?.size, intervalMs: Number(opts.progressInterval ?? 10) * 1000 });
  const stop = interruptible();
  let done = skip;
  // For a pull: the page of the first statement of each batch not yet stored (where to resume).
  const unfinished: (string | undefined)[] = [];
  const n = (x: number) => x.toLocaleString('en-US');
  const show = () =>
    progress.update(importer.counts.read, {
      measure: input?.bytesRead(),
      extra: `${n(importer.counts.inserted)} new, ${n(importer.counts.existing)} already stored, ${n(importer.counts.rejected)} rejected`,
    });
  try {
    let batch: Item[] = [];
    let interrupted = false;
    // One batch is written while the next is read and validated.
    let writing: Promise<void> | undefined;
    const flush = async () => {
      const last = batch[batch.length - 1].n;
      unfinished.push(batch[0].page);
      const ready = await importer.prepare(batch);
      batch = [];
      await writing;
      writing = importer.insert(ready).then(() => {
        done = last;
        unfinished.shift();
        show();
      });
      // A failure is seen at the next `await writing`; until then it must not count as unhandled.
      writing.catch(() => undefined);
    };
    for await (const item of items) {
      if (item.n <= skip && !pull) continue;
      batch.push(item);
      if (batch.length >= batchSize) {
        await flush();
        if (stop.signal.aborted) {
          await writing;
          interrupted = true;
          break;
        }
      }
    }
    if (!interrupted && batch.length) await flush();
    await writing;
    progress.finish();
    if (interrupted) {
      const next = pull ? (pull.current ? ['--more', pull.current] : []) : ['--skip', String(done)];
      progress.say(
        `import interrupted: everything up to ${pull ? `statement ${done}` : `line ${done}`} is stored or in ${rejectsPath}. ` +
          `To resume: ${rerun({ '--skip': true, '--more': true }, next)} (statements already stored are skipped either way)`,
      );
      process.exitCode = 130;
      return;
    }
    let docs: { stored: number; rejected: number } | undefined;
    if (documentsFile) docs = await importDocuments(store, tenant, documentsFile, rejects);
    const c = importer.counts;
    process.stderr.write(
      `imported ${c.read} statements: ${c.inserted} stored, ${c.existing} already stored, ${c.rejected} rejected` +
        (docs ? `; ${docs.stored} documents stored, ${docs.rejected} rejected` : '') +
        (c.rejected || docs?.rejected ? ` (reasons in ${rejectsPath})` : '') +
        '\n',
    );
    if (c.rejected || docs?.rejected) process.exitCode = 1;
  } catch (err) {
    if (err instanceof CliError) throw err;
    const page = unfinished[0] ?? pull?.current;
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
