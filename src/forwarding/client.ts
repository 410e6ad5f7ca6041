/**
 * The HTTP side of forwarding: one undici Agent per target (its own connections, so a target that
 * hangs never holds a healthy one's), POSTs of statement batches with Basic auth and the xAPI
 * version header, and the classification of what came back.
 */
import type { Agent } from 'undici';
import { buildStatementsMultipart } from '../http/multipart.ts';
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

// undici (≈100 modules, ≈8 MB of a server's memory) loads with the first delivery, not at start-up:
// most servers forward nothing.
let undici: Promise<typeof import('undici')> | undefined;

export class TargetClient {
  private agent?: Agent;
  private closed = false;
  private readonly authorization: string;
  readonly url: string;
  private readonly timeoutSeconds: number;

  constructor(target: ForwardingTarget) {
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
      ? buildStatementsMultipart(json, attachments.map((a) => ({ sha2: a.sha2, contentType: a.contentType, body: a.content })))
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
      const text = (await res.body.text().catch(() => '')).replace(/\s+/g, ' ').trim().slice(0, 300);
      const error = `HTTP ${status}${text ? `: ${text}` : ''}`;
      if (status === 409 && statements.length === 1) return { kind: 'delivered' };
      if (SPLIT.has(status) && statements.length > 1) return { kind: 'split', error };
      if (status === 408 || status === 429 || status >= 500) return { kind: 'retry', error };
      return { kind: 'reject', error };
    } catch (err) {
      return { kind: 'retry', error: this.describe(err) };
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
