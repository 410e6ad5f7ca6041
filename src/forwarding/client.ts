/**
 * The HTTP side of forwarding: one undici Agent per target (its own connections, so a target that
 * hangs never holds a healthy one's), POSTs of statement batches with Basic auth and the xAPI
 * version header, and the classification of what came back.
 */
import type { Agent } from 'undici';
import { buildStatementsMultipart } from '../xapi/multipart.ts';
import type { AttachmentBlob } from '../store/types.ts';
import { LECTERN_VERSION } from '../version.ts';
import { textWrittenUnder2 } from '../xapi/versions.ts';
import type { ForwardingTarget } from './config.ts';

/**
 * - delivered: the target has the statements (2xx, or 409 for a single statement: it already has it)
 * - split: the target refused the batch for its content (400, 409, 413); sent one by one, the
 *   others still arrive and only the offending statement becomes a dead letter
 * - retry: connection error, timeout, 408, 429, 5xx
 * - reject: any other 4xx (bad credentials, missing scope, wrong url): a dead letter
 */
export type Outcome = { kind: 'delivered' } | { kind: 'split' | 'retry' | 'reject'; error: string };

const SPLIT = new Set([400, 409, 413]);

/** Bytes of a refusal's body read for its error message (the rest is discarded unread). */
const ERROR_BODY_BYTES = 16_384;
/** Characters of it kept in the error (logs, dead letters, `lectern forwarding status`). */
const ERROR_TEXT_CHARS = 300;

const REDACTED = '[redacted]';
/** An Authorization header's value, as `name: value` (to the end of the line) or a JSON/form field. */
const AUTH_HEADER = /\b((?:proxy-)?authorization)(["']?\s*[:=]\s*)(?:"(?:[^"\\]|\\.)*"|'[^']*'|[^\r\n,;&}]*)/gi;
/**
 * A credential after the name of a scheme that carries one (token68, JSON-escaped slashes too).
 * Case-insensitive, so the word that follows "basic" in prose goes too: a message loses a word
 * rather than keep a secret.
 */
const SCHEME_CREDENTIAL = /\b(Basic|Bearer|Digest|Negotiate|NTLM)(\s+)[\w.~+/\\-]+=*/gi;
/** The userinfo of a URL (`scheme://user:password@`). */
const URL_USERINFO = /\b([a-z][a-z\d+.-]*:\/\/)[^\s/?#@"'<>]+@/gi;

/** What replaces a target's whole answer when it repeats this target's credentials in some encoding. */
const WITHHELD = "[the target's answer is not kept: it repeats the credentials Lectern sent it]";

/** Lenient percent-decoding of `%XX` runs: malformed escapes stay as they are. */
function percentDecoded(text: string): string {
  return text.replace(/(?:%[0-9a-f]{2})+/gi, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return Buffer.from(run.replace(/%/g, ''), 'hex').toString('latin1');
    }
  });
}

/** JSON string escapes undone (`\/`, `\uXXXX`, `\"`…), leniently. */
function jsonUnescaped(text: string): string {
  return text.replace(/\\u([0-9a-f]{4})|\\(.)/gi, (_m, hex: string | undefined, c: string) => (hex ? String.fromCharCode(parseInt(hex, 16)) : c));
}

/**
 * Whether `text` holds this target's password or username:password in any common encoding a
 * target might echo it in: as is, base64 (with or without padding, base64url, wrapped over lines),
 * hex, percent-encoded or JSON-escaped. Patterns cannot follow every encoding: such an answer is
 * not kept at all.
 */
function repeatsCredentials(text: string, target: Pick<ForwardingTarget, 'username' | 'password'>): boolean {
  const pair = `${target.username}:${target.password}`;
  const plain = [pair, ...(target.password.length >= 4 ? [target.password] : [])];
  const secrets = new Set<string>();
  for (const s of plain) {
    const bytes = Buffer.from(s);
    secrets.add(s);
    secrets.add(bytes.toString('base64').replace(/=+$/, ''));
    secrets.add(bytes.toString('base64url'));
    secrets.add(bytes.toString('hex'));
  }
  const decodings = [text, jsonUnescaped(text), percentDecoded(text), jsonUnescaped(percentDecoded(text))];
  const views = decodings.flatMap((d) => [d, d.replace(/\s+/g, ''), d.toLowerCase().replace(/[\s:,-]+|0x|\\x/g, '')]);
  return views.some((view) => [...secrets].some((s) => s.length >= 4 && view.includes(s)));
}

/**
 * What a target answered, fit to be logged and stored: withheld whole when it repeats this
 * target's credentials in any encoding (a target may echo the request's headers), otherwise with
 * credentials of any kind taken out wherever they appear: Authorization values, any scheme's
 * credential, URL userinfo.
 */
export function redactCredentials(text: string, target: Pick<ForwardingTarget, 'username' | 'password'>): string {
  if (repeatsCredentials(text, target)) return WITHHELD;
  return text
    .replace(AUTH_HEADER, (_m, name: string, sep: string) => `${name}${sep}${REDACTED}`)
    .replace(SCHEME_CREDENTIAL, (_m, scheme: string, space: string) => `${scheme}${space}${REDACTED}`)
    .replace(URL_USERINFO, (_m, scheme: string) => `${scheme}${REDACTED}@`);
}

/** The start of a response body as text, at most `max` bytes read; the rest is dropped unread. */
async function bodyStart(body: AsyncIterable<Buffer> & { destroy(): unknown }, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= max) break; // leaving the loop destroys the body
  }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}

// undici (many modules, and memory a server not forwarding does not need) loads with the first delivery, not at start-up:
// most servers forward nothing.
let undici: Promise<typeof import('undici')> | undefined;

export class TargetClient {
  private agent?: Agent;
  private closed = false;
  private readonly target: ForwardingTarget;
  private readonly authorization: string;
  readonly url: string;
  private readonly timeoutSeconds: number;

  constructor(target: ForwardingTarget) {
    this.target = target;
    this.authorization = `Basic ${Buffer.from(`${target.username}:${target.password}`).toString('base64')}`;
    this.url = target.url;
    this.timeoutSeconds = target.timeoutSeconds;
  }

  /**
   * POSTs the statements (stored JSON texts) as one xAPI batch: application/json, or
   * multipart/mixed when the LRS holds data of their attachments (the target needs it). Never throws.
   */
  async post(statements: string[], attachments: AttachmentBlob[], signal: AbortSignal): Promise<Outcome> {
    const json = `[${statements.join(',')}]`;
    const body = attachments.length
      ? buildStatementsMultipart(
          json,
          attachments.map((a) => ({ sha2: a.sha2, contentType: a.contentType, body: a.content })),
        )
      : { contentType: 'application/json', body: json };
    // A batch holding a statement written under 2.0 travels as 2.0 (a 1.0.3 target refuses it: a
    // dead letter saying why); otherwise as 1.0.3, which every LRS speaks.
    const version = statements.some(textWrittenUnder2) ? '2.0.0' : '1.0.3';
    try {
      const { Agent, request } = await (undici ??= import('undici'));
      if (this.closed) return { kind: 'retry', error: 'forwarding stopped' };
      if (!this.agent) {
        const ms = Math.max(1, Math.round(this.timeoutSeconds * 1000));
        // Inactivity, not a deadline: connecting, waiting for the response headers, and each gap
        // between body chunks are bounded by `timeout`.
        this.agent = new Agent({ connect: { timeout: ms }, headersTimeout: ms, bodyTimeout: ms, keepAliveTimeout: 4_000 });
      }
      const res = await request(this.url, {
        method: 'POST',
        dispatcher: this.agent,
        signal,
        headers: {
          authorization: this.authorization,
          'content-type': body.contentType,
          'x-experience-api-version': version,
          'user-agent': `lectern/${LECTERN_VERSION}`,
        },
        body: body.body,
      });
      const status = res.statusCode;
      if (status >= 200 && status < 300) {
        await res.body.dump();
        return { kind: 'delivered' };
      }
      // Redacted before it is cut short, so no credential survives in part.
      const raw = await bodyStart(res.body, ERROR_BODY_BYTES).catch(() => '');
      const text = redactCredentials(raw, this.target).replace(/\s+/g, ' ').trim().slice(0, ERROR_TEXT_CHARS);
      const error = `HTTP ${status}${text ? `: ${text}` : ''}`;
      if (status === 409 && statements.length === 1) return { kind: 'delivered' };
      if (SPLIT.has(status) && statements.length > 1) return { kind: 'split', error };
      if (status === 408 || status === 429 || status >= 500) return { kind: 'retry', error };
      return { kind: 'reject', error };
    } catch (err) {
      return { kind: 'retry', error: redactCredentials(this.describe(err), this.target) };
    }
  }

  private describe(err: unknown): string {
    const e = err as Error & { code?: string; cause?: Error & { code?: string } };
    const code = e.code ?? e.cause?.code;
    switch (code) {
      case 'UND_ERR_CONNECT_TIMEOUT':
        return `no connection within ${this.timeoutSeconds} s (${code})`;
      case 'UND_ERR_HEADERS_TIMEOUT':
        return `no response within ${this.timeoutSeconds} s (${code})`;
      case 'UND_ERR_BODY_TIMEOUT':
        return `the response stalled for ${this.timeoutSeconds} s (${code})`;
      default:
        return `${e.cause?.message ?? e.message}${code ? ` (${code})` : ''}`;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.agent?.destroy();
  }
}
