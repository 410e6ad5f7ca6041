/**
 * The files of an export, which an import reads back: the statements (NDJSON, one stored statement
 * per line), the violations file (one line per statement stored under lax validation), the
 * attachments folder (one file per SHA-256, and NOT_CARRIED_FILE) and the documents file (one
 * JSON line per document, content base64).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { ValidationIssue } from '../errors.ts';
import type { KeyedDocument } from '../store/types.ts';
import { actorFromKey } from '../xapi/agents.ts';
import type { AttachmentPart } from '../xapi/attachments.ts';
import { surrogateMessage, unpairedSurrogate } from '../xapi/json.ts';
import { isUuid } from '../xapi/validate.ts';
import { OpsError } from './errors.ts';

/**
 * In an export's attachments folder, beside the data files (named by sha2): the attachments that
 * statements declared without carrying their data (Store.attachmentsNotCarried), one
 * `{"id", "sha2"}` line each. An import gives those statements no part, so that they do not
 * become carriers of data their authority never sent. A folder without it (an older export)
 * gives every statement the data of each attachment it declares.
 */
export const NOT_CARRIED_FILE = 'not-carried.ndjson';

/** The (statement id, sha2) pairs of NOT_CARRIED_FILE in `dir`, as `id sha2` strings. */
export function readNotCarried(dir: string): Set<string> {
  const file = join(dir, NOT_CARRIED_FILE);
  const pairs = new Set<string>();
  if (!existsSync(file)) return pairs;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    let v: { id?: unknown; sha2?: unknown };
    try {
      v = JSON.parse(line) as typeof v;
    } catch {
      throw new OpsError(`${file}: a line is not JSON: ${line.slice(0, 80)}`);
    }
    if (typeof v.id !== 'string' || typeof v.sha2 !== 'string') throw new OpsError(`${file}: each line needs an "id" and a "sha2"`);
    pairs.add(`${v.id.toLowerCase()} ${v.sha2.toLowerCase()}`);
  }
  return pairs;
}

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

/**
 * One line of the violations file: a statement the source stored under lax validation, and what
 * it broke there. An import takes the id as the source's word that the statement was stored so
 * (it validates that statement under lax rules, whatever its own mode) and records the violations
 * it finds itself: the file's are for the reader, never trusted.
 */
export const violationLine = (id: string, violations: ValidationIssue[]): string => `${JSON.stringify({ id, violations })}\n`;

/** The statement ids of a violations file (`file` names it in errors), lower-cased. */
export async function readViolationIds(input: Readable, file: string): Promise<Set<string>> {
  const ids = new Set<string>();
  for await (const item of fileItems(input)) {
    const id = (item.value as { id?: unknown } | undefined)?.id;
    if (item.malformed !== undefined || typeof id !== 'string' || !isUuid(id)) {
      throw new OpsError(`${file}, line ${item.n}: ${item.malformed ?? 'each line needs the "id" of a statement (a UUID)'}`);
    }
    ids.add(id.toLowerCase());
  }
  return ids;
}

/**
 * One statement to import: its line (file) or number (pull), the parsed JSON or why it is not
 * JSON; pulled from an LRS, the attachment data of its page and that page (where to resume).
 */
export interface ImportItem {
  n: number;
  value?: unknown;
  malformed?: string;
  parts?: Map<string, AttachmentPart>;
  page?: string;
}

/** Strict UTF-8, as POST decodes bodies: a line with invalid bytes is refused, not patched with U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

function parseItem(n: number, bytes: Buffer): ImportItem | undefined {
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
export async function* fileItems(stream: Readable): AsyncGenerator<ImportItem> {
  let buf: Buffer = Buffer.alloc(0);
  let mode: 'ndjson' | 'array' | undefined;
  let line = 0;
  const array = new ArraySplitter();
  for await (const chunk of stream) {
    buf = buf.length ? Buffer.concat([buf, chunk as Buffer]) : (chunk as Buffer);
    if (mode === undefined) {
      let i = 0;
      while (i < buf.length && WHITESPACE.has(buf[i])) i++;
      if (i === buf.length) continue;
      mode = buf[i] === 0x5b ? 'array' : 'ndjson';
      if (mode === 'array') buf = buf.subarray(i + 1);
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
    const { items, rest } = array.split(buf);
    yield* items;
    if (array.closed) return;
    buf = rest;
  }
  if (mode === 'ndjson' && buf.length) {
    const item = parseItem(line + 1, buf);
    if (item) yield item;
  }
  if (mode === 'array') yield { n: array.elements + 1, malformed: 'the JSON array is not closed (truncated file?)' };
}

/** Splits the inside of a JSON array, as it streams in, into its elements (the `[` already read). */
class ArraySplitter {
  /** Elements split so far. */
  elements = 0;
  /** The array's `]` was read. */
  closed = false;
  private depth = 1;
  private inString = false;
  private escaped = false;
  /** Bytes of the held rest already scanned. */
  private scanned = 0;

  /** The elements complete in `buf` (what the last call left, then more), and what remains of it. */
  split(buf: Buffer): { items: ImportItem[]; rest: Buffer } {
    const items: ImportItem[] = [];
    let start = 0;
    for (let i = this.scanned; i < buf.length && !this.closed; i++) {
      const c = buf[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === 0x5c) this.escaped = true;
        else if (c === 0x22) this.inString = false;
      } else if (c === 0x22) this.inString = true;
      else if (c === 0x7b || c === 0x5b) this.depth++;
      else if (c === 0x7d || c === 0x5d || c === 0x2c) {
        if (c !== 0x2c) this.depth--;
        if ((this.depth === 1 && c === 0x2c) || this.depth === 0) {
          const item = parseItem(this.elements + 1, buf.subarray(start, i));
          if (item) {
            this.elements++;
            items.push(item);
          } else if (c === 0x2c) {
            items.push({ n: ++this.elements, malformed: 'an empty element in the JSON array' });
          }
          start = i + 1;
          this.closed = this.depth === 0;
        }
      }
    }
    const rest = Buffer.from(buf.subarray(start));
    this.scanned = rest.length;
    return { items, rest };
  }
}
