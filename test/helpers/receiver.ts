/**
 * A real HTTP receiver on loopback for forwarding tests: records every request (headers and the
 * statements posted) and answers as the test's `respond` says: a status, after a delay, or never.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { parseMultipartMixed } from '../../src/xapi/multipart.ts';

export interface Received {
  headers: IncomingHttpHeaders;
  statements: { id: string; [k: string]: unknown }[];
  /** Attachment parts of a multipart/mixed request (after the statements). */
  parts: { headers: Record<string, string>; body: Buffer }[];
}

/** `hang`: never answer (until the receiver closes); `delayMs`: answer after that long; `body`: instead of the usual one. */
export type Reply = { status: number; delayMs?: number; body?: string } | { hang: true };

export class Receiver {
  readonly requests: Received[] = [];
  respond: (r: Received, n: number) => Reply = () => ({ status: 200 });
  private readonly server: Server;
  private readonly open = new Set<ServerResponse>();
  port = 0;

  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const type = req.headers['content-type'] ?? '';
        const [first, ...parts] = type.startsWith('multipart/') ? parseMultipartMixed(type, body) : [{ headers: {}, body }];
        const r: Received = { headers: req.headers, statements: JSON.parse(first.body.toString('utf8')), parts };
        this.requests.push(r);
        const reply = this.respond(r, this.requests.length);
        if ('hang' in reply) {
          this.open.add(res);
          return;
        }
        const send = () => {
          res.writeHead(reply.status, { 'content-type': 'application/json' });
          res.end(reply.body ?? (reply.status < 300 ? JSON.stringify(r.statements.map((s) => s.id)) : JSON.stringify({ detail: `refused with ${reply.status}` })));
        };
        if (reply.delayMs) setTimeout(send, reply.delayMs);
        else send();
      });
    });
  }

  /** Listens on `port` (0: any free one). */
  async listen(port = 0): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/xAPI/statements`;
  }

  /** Ids of every statement received (with repeats). */
  ids(): string[] {
    return this.requests.flatMap((r) => r.statements.map((s) => s.id));
  }

  async close(): Promise<void> {
    for (const res of this.open) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * A loopback port held by a listener that drops every connection (a target that is down), so no
 * other test's server can take the port while it is "down"; `release()` frees it for the one that
 * comes back there.
 */
export async function downPort(): Promise<{ port: number; release(): Promise<void> }> {
  const server = createNetServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** Polls `check` until it returns a value other than undefined/false; fails after `ms` with `what`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
