/**
 * The `multipart/mixed` codec (RFC 2046 §5.1) for statement requests and responses carrying
 * attachments (xAPI-Communication §1.5.2); the xAPI rules of the parts are src/xapi/attachments.ts.
 *
 * Pure functions over buffers already read and size-limited by the server. Bodies are never turned
 * into strings: parts are zero-copy views (`subarray`) into the request buffer, found with
 * `Buffer.indexOf`. Only header blocks (ASCII by RFC 2045) are decoded, as latin1.
 *
 * Line endings: RFC 2046 requires CRLF. A bare LF is also accepted wherever a CRLF is expected (the
 * delimiter search looks for `LF "--" boundary` and takes a CR just before it as part of the
 * delimiter), which costs nothing for well-formed CRLF messages. The one ambiguity it introduces —
 * an LF-only message whose part content really ends with a CR loses that CR — cannot arise from a
 * conforming sender, which uses CRLF throughout.
 */

import { randomBytes } from 'node:crypto';
import { LrsError } from '../errors.ts';
import { parseContentType } from '../xapi/media.ts';

/** One body part: header names lower-cased, values trimmed; `body` is a view into the request buffer. */
export interface MultipartPart {
  headers: Record<string, string>;
  body: Buffer;
}

const bad = (message: string): LrsError => new LrsError('bad_request', message);

const CR = 0x0d;
const LF = 0x0a;
const DASH = 0x2d;
const SP = 0x20;
const HTAB = 0x09;

/** RFC 2045 token characters (any visible ASCII except tspecials). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

interface Delimiter {
  /** Index of the first byte of the delimiter (its leading CRLF/LF, or the dashes at offset 0). */
  start: number;
  /** Index just past the whole delimiter line, including its line ending (or past `--` if close). */
  end: number;
  close: boolean;
}

/**
 * Checks that `--boundary` at `afterDash - dash.length` is a real delimiter line: followed by `--`
 * (close delimiter) or by optional transport padding (spaces/tabs) and a line ending. Returns where
 * the delimiter ends, or undefined when the bytes only start with the boundary (not a delimiter).
 */
function delimiterTail(body: Buffer, afterDash: number): { end: number; close: boolean } | undefined {
  if (body[afterDash] === DASH && body[afterDash + 1] === DASH) {
    return { end: afterDash + 2, close: true };
  }
  let i = afterDash;
  while (i < body.length && (body[i] === SP || body[i] === HTAB)) i++;
  if (body[i] === CR && body[i + 1] === LF) return { end: i + 2, close: false };
  if (body[i] === LF) return { end: i + 1, close: false };
  return undefined;
}

/** The next delimiter (`[CR]LF --boundary ...`) at or after `from`. */
function nextDelimiter(body: Buffer, lfDash: Buffer, from: number): Delimiter | undefined {
  let at = from;
  for (;;) {
    const i = body.indexOf(lfDash, at);
    if (i === -1) return undefined;
    const tail = delimiterTail(body, i + lfDash.length);
    if (tail !== undefined) {
      const start = i > from && body[i - 1] === CR ? i - 1 : i;
      return { start, end: tail.end, close: tail.close };
    }
    at = i + 1; // the boundary is only a prefix of longer text here: keep looking
  }
}

/**
 * Longest header block of a part. An attachment part needs three short headers (Content-Type,
 * Content-Transfer-Encoding, X-Experience-API-Hash: about 200 bytes); without a bound, a part
 * with no blank line would have all its bytes decoded and split as header lines.
 */
export const MAX_PART_HEADER_BYTES = 4 * 1024;

/**
 * Most header fields in one part. Each field costs a property and two strings, many times its
 * bytes, so parts of thousands of tiny distinct fields would turn a body into many times its
 * size in heap (docs/security.md, "Input and resources").
 */
export const MAX_PART_HEADER_FIELDS = 16;

/** Longest boundary RFC 2046 §5.1.1 allows ("boundary := 0*69<bchars> bcharsnospace"). */
export const MAX_BOUNDARY_LENGTH = 70;

function parseHeaders(block: string, partNumber: number): Record<string, string> {
  // A Map, then own properties: a header named "constructor" or "__proto__" is a header like any other.
  const headers = new Map<string, string>();
  const lines = block.split(/\r?\n/);
  let last: string | undefined;
  for (const line of lines) {
    if (line === '') continue;
    if (line[0] === ' ' || line[0] === '\t') {
      // obsolete line folding (RFC 5322 §2.2.3): continues the previous header's value (appended,
      // never re-trimmed: trimming the whole value each time made many folded lines quadratic)
      if (last === undefined) throw bad(`multipart part ${partNumber}: malformed headers (continuation line with no header)`);
      const piece = line.trim();
      const value = headers.get(last)!;
      if (piece) headers.set(last, value ? `${value} ${piece}` : piece);
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon === -1 ? '' : line.slice(0, colon).trim();
    if (colon === -1 || !TOKEN.test(name)) {
      const shown = line.length > 60 ? `${line.slice(0, 60)}...` : line;
      throw bad(`multipart part ${partNumber}: malformed header line ${JSON.stringify(shown)} (expected "Name: value")`);
    }
    const key = name.toLowerCase();
    if (headers.has(key)) throw bad(`multipart part ${partNumber}: duplicate ${name} header`);
    if (headers.size === MAX_PART_HEADER_FIELDS) {
      throw bad(
        `multipart part ${partNumber}: more than ${MAX_PART_HEADER_FIELDS} header fields (an xAPI part needs Content-Type, Content-Transfer-Encoding and X-Experience-API-Hash)`,
      );
    }
    headers.set(key, line.slice(colon + 1).trim());
    last = key;
  }
  return Object.fromEntries(headers);
}

/** Header bytes a request's parts may still use (see `maxHeaderBytes`). */
interface HeaderBudget {
  left: number;
  readonly total: number;
}

/** Splits a part (the bytes between two delimiters) into its headers and its body. */
function parsePart(body: Buffer, start: number, end: number, partNumber: number, budget: HeaderBudget): MultipartPart {
  // No headers at all: the part begins with the blank line (RFC 2046: "MIME-part-headers [CRLF *OCTET]").
  if (body[start] === CR && body[start + 1] === LF && start + 1 < end) {
    return { headers: {}, body: body.subarray(start + 2, end) };
  }
  if (body[start] === LF && start < end) return { headers: {}, body: body.subarray(start + 1, end) };
  const part = body.subarray(start, end);
  // The header block ends at the first empty line: "\n\r\n" (CRLF) or "\n\n" (bare LF), looked
  // for within the first MAX_PART_HEADER_BYTES only; the LF search is bounded by the CRLF match
  // so that it never scans a large binary body.
  const head = part.subarray(0, MAX_PART_HEADER_BYTES + 3);
  const crlf = head.indexOf('\n\r\n', 0, 'latin1');
  const lf = (crlf === -1 ? head : head.subarray(0, crlf + 1)).indexOf('\n\n', 0, 'latin1');
  let headerEnd: number;
  let bodyStart: number;
  if (crlf !== -1 && lf === -1) {
    headerEnd = part[crlf - 1] === CR ? crlf - 1 : crlf;
    bodyStart = crlf + 3;
  } else if (lf !== -1) {
    headerEnd = lf;
    bodyStart = lf + 2;
  } else {
    // Headers only, no body (allowed by RFC 2046).
    headerEnd = part.length;
    bodyStart = part.length;
  }
  if (headerEnd > MAX_PART_HEADER_BYTES) {
    throw bad(`multipart part ${partNumber}: its headers are longer than ${MAX_PART_HEADER_BYTES} bytes (or the blank line that ends them is missing)`);
  }
  budget.left -= headerEnd;
  if (budget.left < 0) {
    throw bad(`multipart part ${partNumber}: the parts' headers come to more than ${budget.total} bytes in all, more than a statement request needs`);
  }
  const headers = parseHeaders(part.toString('latin1', 0, headerEnd), partNumber);
  return { headers, body: part.subarray(bodyStart) };
}

/**
 * Parses a `multipart/mixed` body (RFC 2046 §5.1.1). Accepts a quoted or unquoted boundary, a
 * preamble before the first delimiter, transport padding after delimiters, and an epilogue after
 * the close delimiter (both ignored). Throws `LrsError('bad_request')` when the Content-Type is not
 * multipart/mixed or has no boundary, when no delimiter is found, when the close delimiter is
 * missing, when a part's headers are malformed, when there is no part, and as soon as there are
 * more than `maxParts` parts (each part costs its bookkeeping and, for attachments, a hash: a
 * body of millions of empty parts is refused at the first one too many), and when the header
 * blocks of all parts together exceed `maxHeaderBytes` (each is already at most
 * MAX_PART_HEADER_BYTES and MAX_PART_HEADER_FIELDS).
 *
 * The boundary must be 1 to 70 characters (RFC 2046 §5.1.1): the delimiter is looked for with
 * `Buffer.indexOf`, whose time grows with the needle's length on bodies of near-delimiters; at
 * 70 characters it stays linear in practice (docs/security.md, "Input and resources"). Its characters are not checked beyond line breaks: a client's odd but harmless
 * boundary is accepted.
 */
export function parseMultipartMixed(contentType: string, body: Buffer, opts: { maxParts?: number; maxHeaderBytes?: number } = {}): MultipartPart[] {
  const maxParts = opts.maxParts ?? Infinity;
  const budget: HeaderBudget = { left: opts.maxHeaderBytes ?? Infinity, total: opts.maxHeaderBytes ?? Infinity };
  const { mediaType, params } = parseContentType(contentType);
  if (mediaType === 'multipart/form-data') {
    throw bad('Content-Type multipart/form-data is not supported: xAPI attachments are sent as multipart/mixed');
  }
  if (mediaType !== 'multipart/mixed') {
    throw bad(`expected Content-Type multipart/mixed, got ${JSON.stringify(mediaType)}`);
  }
  const boundary = params['boundary'];
  if (boundary === undefined || boundary === '') {
    throw bad('multipart/mixed Content-Type has no boundary parameter');
  }
  if (boundary.length > MAX_BOUNDARY_LENGTH) {
    // Not echoed: it may be kilobytes.
    throw bad(`multipart/mixed boundary is ${boundary.length} characters long; RFC 2046 §5.1.1 allows at most ${MAX_BOUNDARY_LENGTH}`);
  }
  if (/[\r\n]/.test(boundary)) throw bad('multipart/mixed boundary contains a line break');

  const dash = Buffer.from(`--${boundary}`, 'latin1');
  const lfDash = Buffer.from(`\n--${boundary}`, 'latin1');

  // First delimiter: at the very start (no preamble) or after a preamble and a line ending.
  let current: Delimiter | undefined;
  if (body.subarray(0, dash.length).equals(dash)) {
    const tail = delimiterTail(body, dash.length);
    if (tail !== undefined) current = { start: 0, end: tail.end, close: tail.close };
  }
  current ??= nextDelimiter(body, lfDash, 0);
  if (current === undefined) {
    throw bad(`multipart body does not contain the boundary delimiter "--${boundary}" declared in its Content-Type`);
  }

  const parts: MultipartPart[] = [];
  while (!current.close) {
    if (parts.length === maxParts) {
      throw bad(
        `multipart body has more than ${maxParts} parts: a statement request has one for the statements and one per attachment's data, at most ${maxParts - 1} (twice LECTERN_MAX_STATEMENTS_PER_REQUEST)`,
      );
    }
    // A delimiter line directly followed by another one (sharing its line ending): an empty part.
    if (body.subarray(current.end, current.end + dash.length).equals(dash)) {
      const tail = delimiterTail(body, current.end + dash.length);
      if (tail !== undefined) {
        parts.push({ headers: {}, body: body.subarray(current.end, current.end) });
        current = { start: current.end, end: tail.end, close: tail.close };
        continue;
      }
    }
    const next = nextDelimiter(body, lfDash, current.end);
    if (next === undefined) {
      throw bad(`multipart body has no closing delimiter "--${boundary}--"`);
    }
    parts.push(parsePart(body, current.end, next.start, parts.length + 1, budget));
    current = next;
  }
  if (parts.length === 0) throw bad('multipart body contains no parts');
  return parts;
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

const CRLF = Buffer.from('\r\n', 'latin1');

function checkHeader(name: string, value: string): void {
  if (!TOKEN.test(name)) throw new TypeError(`invalid multipart header name ${JSON.stringify(name)}`);
  if (/[\r\n]/.test(value)) throw new TypeError(`multipart header ${name} contains a line break`);
}

/**
 * Writes a `multipart/mixed` body with CRLF line endings. The boundary is random (`lectern-` and
 * 24 base64url characters, so it never needs quoting) and checked not to occur in any part body;
 * header names/values are checked (tokens, no line breaks) and throw `TypeError` if invalid.
 */
export function buildMultipartMixed(parts: { headers: Record<string, string>; body: Buffer }[]): {
  boundary: string;
  contentType: string;
  body: Buffer;
} {
  const heads = parts.map((part) => {
    let text = '';
    for (const [name, value] of Object.entries(part.headers)) {
      checkHeader(name, value);
      text += `${name}: ${value}\r\n`;
    }
    return text;
  });
  let boundary = '';
  for (let attempt = 0; ; attempt++) {
    if (attempt === 8) throw new Error('could not find a multipart boundary absent from the parts');
    boundary = `lectern-${randomBytes(18).toString('base64url')}`;
    const needle = Buffer.from(`--${boundary}`, 'latin1');
    if (parts.every((p) => p.body.indexOf(needle) === -1)) break;
  }
  const chunks: Buffer[] = [];
  parts.forEach((part, i) => {
    chunks.push(Buffer.from(`--${boundary}\r\n${heads[i]}\r\n`, 'latin1'), part.body, CRLF);
  });
  chunks.push(Buffer.from(`--${boundary}--\r\n`, 'latin1'));
  return { boundary, contentType: `multipart/mixed; boundary=${boundary}`, body: Buffer.concat(chunks) };
}

/**
 * The response to `GET statements?attachments=true` (xAPI-Communication §1.5.2, §2.1.3): the
 * statement result as the first `application/json` part, then one part per attachment with its
 * Content-Type, `Content-Transfer-Encoding: binary` and `X-Experience-API-Hash`.
 */
export function buildStatementsMultipart(
  json: Buffer | string,
  attachments: Iterable<{ sha2: string; contentType: string; body: Buffer }>,
): { boundary: string; contentType: string; body: Buffer } {
  const parts: { headers: Record<string, string>; body: Buffer }[] = [
    {
      headers: { 'Content-Type': 'application/json' },
      body: typeof json === 'string' ? Buffer.from(json, 'utf8') : json,
    },
  ];
  for (const a of attachments) {
    parts.push({
      headers: {
        'Content-Type': a.contentType,
        'Content-Transfer-Encoding': 'binary',
        'X-Experience-API-Hash': a.sha2,
      },
      body: a.body,
    });
  }
  return buildMultipartMixed(parts);
}
