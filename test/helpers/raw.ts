/**
 * A raw HTTP client for tests that must see what the server reads: it streams a body of a given
 * size (never held whole in memory), stops sending as soon as an answer arrives, and can connect
 * from another loopback address (Linux routes all of 127.0.0.0/8 to lo) or hold part of the body
 * back until told to go on. The server side of each connection is found by port, so a test can
 * read `bytesRead` on the server's own socket.
 */
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { TestLrs } from './lrs.ts';

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** Body bytes the client had written when the answer arrived. */
  sent: number;
  /** Bytes the server's socket of this connection had read from the kernel once the exchange ended. */
  serverRead: number;
  /** With `expectContinue`: whether the server said 100 Continue. */
  continued: boolean;
}

export interface RawRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  /** Body bytes to send (repeated `fill`); with `chunked`, no Content-Length is sent. */
  size?: number;
  /** The body's bytes: cycled up to `size`. */
  fill?: Buffer;
  chunked?: boolean;
  /** Send only this many body bytes, then wait for `release()` of the returned handle. */
  holdAt?: number;
  localAddress?: string;
  /** Send `Expect: 100-continue` and the body only once the server says 100 Continue. */
  expectContinue?: boolean;
}

/** Records the server-side sockets of a test server by their client's address and port. */
export function serverSockets(t: TestLrs): Map<string, Socket> {
  const sockets = new Map<string, Socket>();
  t.lrs.app.server.on('connection', (s: Socket) => sockets.set(`${s.remoteAddress}:${s.remotePort}`, s));
  return sockets;
}

const CHUNK = 64 * 1024;

export interface RawExchange {
  /** Resolves with the answer (or rejects if the connection failed before one came). */
  answer: Promise<RawAnswer>;
  /** Resumes sending a body held at `holdAt`. */
  release(): void;
  /** Bytes the server's socket has read so far (0 before it is known). */
  serverRead(): number;
  /** Ends the connection abruptly. */
  abort(): void;
}

export function rawRequest(t: TestLrs, sockets: Map<string, Socket>, r: RawRequest): RawExchange {
  const url = new URL(t.url);
  const size = r.size ?? 0;
  const fill = r.fill ?? Buffer.alloc(CHUNK, 0x78);
  const headers: Record<string, string> = { ...r.headers };
  if (!r.chunked && size > 0) headers['content-length'] = String(size);
  if (r.expectContinue) headers.expect = '100-continue';
  let local: string | undefined;
  let held: (() => void) | undefined;
  let released = false;
  let abort = () => {};
  const serverRead = () => (local === undefined ? 0 : (sockets.get(local)?.bytesRead ?? 0));

  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const answer = new Promise<RawAnswer>((resolve, reject) => {
    const req = httpRequest({
      host: url.hostname,
      port: url.port,
      method: r.method ?? 'POST',
      path: r.path,
      headers,
      // Keep-alive, as clients ask: whether the server closes the connection is its own choice.
      agent,
      localAddress: r.localAddress,
    });
    abort = () => req.destroy();
    let sent = 0;
    let answered = false;
    let continued = false;
    req.on('socket', (s) => s.on('connect', () => (local = `${s.localAddress}:${s.localPort}`)));
    req.on('error', (err) => {
      // Writing into a connection the server closed after answering is expected.
      if (!answered) {
        agent.destroy();
        reject(err);
      }
    });
    req.on('response', (res) => {
      answered = true;
      const atAnswer = sent;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      const done = () => {
        // The server may close its side first: let its socket settle before reading its count.
        setImmediate(() =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString(), sent: atAnswer, serverRead: serverRead(), continued }),
        );
        req.destroy();
        agent.destroy();
      };
      res.on('end', done);
      res.on('error', done);
    });
    const pump = () => {
      while (!answered && sent < size) {
        if (r.holdAt !== undefined && sent >= r.holdAt && !released) {
          held = pump;
          return;
        }
        const limit = r.holdAt !== undefined && !released ? Math.min(size, r.holdAt) : size;
        let n = Math.min(CHUNK, limit - sent);
        const start = sent % fill.length;
        n = Math.min(n, fill.length - start);
        const ok = req.write(fill.subarray(start, start + n));
        sent += n;
        if (!ok) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered && sent >= size) req.end();
    };
    if (r.expectContinue) {
      req.flushHeaders();
      req.on('continue', () => {
        continued = true;
        pump();
      });
    } else pump();
  });
  return {
    answer,
    release() {
      released = true;
      const go = held;
      held = undefined;
      go?.();
    },
    serverRead,
    abort: () => abort(),
  };
}

/** Waits until `check` holds, polling (a test's own timeout bounds the wait). */
export async function until(check: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`gave up waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
