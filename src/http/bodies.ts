/**
 * Request bodies are read by the route that needs one, once the request is allowed (authenticated
 * and authorised), never by the framework beforehand: a refused request costs its headers. Each
 * body is held against a budget of bytes in flight for the whole process until its request ends,
 * so many large uploads at once are answered 503 instead of growing the heap without bound.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AuthUser } from '../auth/types.ts';
import { bodiesInFlight, bodiesInFlightPerUser, type Config } from '../config.ts';
import { HttpRefusal } from './errors.ts';

/** What a request holds: its body's bytes as they arrive, and an estimate of their parsed size. */
export type HeldKind = 'body' | 'parsed';

/** Which share a request would go beyond: the whole budget (or the share of forms read before authentication), or its user's. */
export type Busy = 'total' | 'user';

/**
 * Bytes request bodies hold at once, the share of it bodies read before authentication may hold,
 * and the share one user's requests may hold (so that one user cannot keep every other out). A
 * body counts by what it holds in memory as it arrives, never by the size it declares (a client
 * declaring 64 MiB and trickling bytes holds what it sent); once parsed, a request may also hold an
 * estimate of its parsed size (`holdParsed` in ./xapi/resources.ts).
 */
export class BodyBudget {
  readonly total: number;
  readonly anonymousTotal: number;
  readonly userTotal: number;
  private used = 0;
  private anonymousUsed = 0;
  private readonly byKind: Record<HeldKind, number> = { body: 0, parsed: 0 };
  /** Per user (store and name), what its requests hold; users holding nothing are not kept. */
  private readonly byUser = new Map<string, number>();

  constructor(total: number, anonymousTotal: number, userTotal: number) {
    this.total = total;
    this.anonymousTotal = anonymousTotal;
    this.userTotal = userTotal;
  }

  /** What is held now, by kind. */
  held(kind: HeldKind): number {
    return this.byKind[kind];
  }

  /**
   * A request's account, read before authentication (`anonymous`) or for `user`: what it takes is
   * given back, all at once, by `release()`.
   */
  hold(anonymous: boolean, user?: string): BodyHold {
    const mine: Record<HeldKind, number> = { body: 0, parsed: 0 };
    let mineForUser = 0;
    const userUsed = () => (user === undefined ? 0 : (this.byUser.get(user) ?? 0));
    const busy = (n: number, forUser: number): Busy | undefined => {
      if (this.used + n > this.total || (anonymous && this.anonymousUsed + n > this.anonymousTotal)) return 'total';
      if (user !== undefined && userUsed() + forUser > this.userTotal) return 'user';
      return undefined;
    };
    return {
      busy: (n) => busy(n, n),
      take: (n, kind = 'body', forUser = n) => {
        const why = busy(n, forUser);
        if (why) return why;
        this.used += n;
        if (anonymous) this.anonymousUsed += n;
        this.byKind[kind] += n;
        mine[kind] += n;
        if (user !== undefined) {
          this.byUser.set(user, userUsed() + forUser);
          mineForUser += forUser;
        }
        return undefined;
      },
      get held() {
        return mine.body + mine.parsed;
      },
      release: () => {
        const n = mine.body + mine.parsed;
        this.used -= n;
        if (anonymous) this.anonymousUsed -= n;
        this.byKind.body -= mine.body;
        this.byKind.parsed -= mine.parsed;
        if (user !== undefined && mineForUser) {
          const left = userUsed() - mineForUser;
          if (left > 0) this.byUser.set(user, left);
          else this.byUser.delete(user);
        }
        mine.body = 0;
        mine.parsed = 0;
        mineForUser = 0;
      },
    };
  }
}

export interface BodyHold {
  /** Which share `n` more bytes would go beyond now, or undefined when they fit (nothing taken). */
  busy(n: number): Busy | undefined;
  /**
   * Takes `n` more bytes (`forUser` of them from the user's share: an estimate clamped to that
   * share); the share they would go beyond instead, nothing taken.
   */
  take(n: number, kind?: HeldKind, forUser?: number): Busy | undefined;
  /** What this request holds now. */
  readonly held: number;
  release(): void;
}

export interface BodyLimits {
  /** Largest body, in bytes. */
  limit: number;
  /** The 413's detail. */
  tooLarge: string;
  /** The 503's detail when the budget, or the user's share of it, is spent. */
  busy: Record<Busy, string>;
  /** Longest wait for the next bytes of a body, in milliseconds; also the grace before `minRate` applies. */
  idleMs: number;
  /** Least average bytes per second a body must arrive at once it has been read for `idleMs` (0: none). */
  minRate: number;
}

/**
 * Memory a JSON value costs once parsed and while its request is worked on, in bytes: measured as
 * the peak above an idle server of one request, or the growth per request of concurrent ones, for
 * objects, arrays, strings and numbers and for the bench's statements, on both backends; this is
 * about the dearest of them (docs/security.md, "Input and resources").
 */
export const PARSED_BYTES_PER_VALUE = 160;

/** Seconds a client told 503 (budget spent) should wait before trying again. */
export const BUSY_RETRY_AFTER = '2';

/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1; curl sends it above 1 MiB): Node answers 100 Continue
 * on its own as soon as the headers arrive, before anything is checked, and the client then sends
 * its body. Instead the request goes through as any other, and `readBody` says 100 Continue when
 * it starts reading: a refused client gets its answer without having sent its body.
 */
export function expectContinueAfterChecks(server: Server): void {
  server.on('checkContinue', (req, res) => server.emit('request', req, res));
}

/** How long a connection closed before its request body's end stays open after the answer. */
const LINGER_MS = 500;

/**
 * For an answer sent before the request body's end: the connection is closed after it (else Node
 * would read and discard the whole body to keep it), without reading any more of the body. It is
 * closed gently: the answer, then our end of the connection (FIN), and only LINGER_MS later the
 * socket. Closed at once with unread bytes, the kernel would reset the connection, and a client
 * still sending would often see that reset (EPIPE, ECONNRESET) instead of the answer
 * (RFC 9112 §9.6; Go's HTTP server waits the same 500 ms).
 */
export function closeAfterAnswer(raw: IncomingMessage): void {
  // Read by us (what Node already buffered, dropped): Node then leaves the rest alone rather than
  // read it to discard it ("the user never called req.read()").
  raw.read();
  const socket = raw.socket;
  // Node's server ends a `Connection: close` response with destroySoon(): linger instead.
  socket.destroySoon = () => {
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    socket.once('close', () => clearTimeout(timer));
  };
}

/** Whether the request has body bytes to read (GET and HEAD bodies are ignored, as HTTP allows). */
export function hasBody(raw: IncomingMessage): boolean {
  if (raw.method === 'GET' || raw.method === 'HEAD') return false;
  const length = raw.headers['content-length'];
  return raw.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The first buffer a body is read into (or its whole size, when smaller); each larger one at least doubles it. */
const FIRST_BUFFER = 16 * 1024;

/**
 * Reads the body into one buffer that grows with what arrives (doubling, up to the body's
 * Content-Length): the budget is charged the buffer's size as it grows, so a body holds at most
 * twice what it sent (at least 16 KiB), never what it merely declares. A declared length that is
 * over the limit (413) or cannot fit in what the budget has free now (503) is refused before a
 * byte is read. Refusals (413, 503 when arriving bytes would go beyond the budget, 408 when the
 * client sends nothing for `idleMs` or, after `idleMs`, averages under `minRate`) stop reading:
 * the server answers with `Connection: close`, so the rest is never read. The caller releases
 * `hold` when the request ends, however it ends.
 */
export function readBody(raw: IncomingMessage, res: ServerResponse, hold: BodyHold, limits: BodyLimits): Promise<Buffer> {
  const header = raw.headers['content-length'];
  // Node's parser has already refused a malformed or contradictory Content-Length (400).
  const declared = header === undefined || raw.headers['transfer-encoding'] !== undefined ? undefined : Number(header);
  if (declared !== undefined) {
    if (declared > limits.limit) return Promise.reject(new HttpRefusal(413, limits.tooLarge));
    const why = hold.busy(declared);
    if (why) return Promise.reject(busyRefusal(limits, why));
  }
  // A client that asked to be told before sending its body (the server says nothing on its own: see
  // `expectContinueAfterChecks`) sends it now.
  if (/\b100-continue\b/i.test(raw.headers.expect ?? '')) res.writeContinue();
  return new Promise<Buffer>((resolve, reject) => receive(raw, hold, limits, declared, resolve, reject));
}

const busyRefusal = (limits: BodyLimits, why: Busy): HttpRefusal => new HttpRefusal(503, limits.busy[why], { 'retry-after': BUSY_RETRY_AFTER });

/** Reads the body's bytes as they arrive (see readBody), settling once: the body, or the refusal. */
function receive(raw: IncomingMessage, hold: BodyHold, limits: BodyLimits, declared: number | undefined, resolve: (body: Buffer) => void, reject: (err: Error) => void): void {
  // The parser frames a body by its Content-Length: it never goes beyond it.
  const most = declared ?? limits.limit;
  let into = Buffer.alloc(0);
  let received = 0;
  const started = performance.now();
  const timer = setTimeout(() => {
    finish(new HttpRefusal(408, `no bytes of the request body arrived for ${limits.idleMs / 1000} s (LECTERN_REQUEST_BODY_TIMEOUT)`));
  }, limits.idleMs);
  const finish = (err: Error | undefined, body?: Buffer) => {
    clearTimeout(timer);
    raw.off('data', onData);
    raw.off('end', onEnd);
    raw.off('error', onClose);
    raw.off('close', onClose);
    if (!err) return resolve(body!);
    // Whatever is left stays unread: the answer closes the connection.
    raw.pause();
    reject(err);
  };
  const onData = (chunk: Buffer) => {
    timer.refresh();
    const size = received + chunk.length;
    if (size > limits.limit) return finish(new HttpRefusal(413, limits.tooLarge));
    if (size > into.length) {
      const grown = Math.min(most, Math.max(size, 2 * into.length, FIRST_BUFFER));
      const why = hold.take(grown - into.length);
      if (why) return finish(busyRefusal(limits, why));
      const next = Buffer.allocUnsafe(grown);
      into.copy(next, 0, 0, received);
      into = next;
    }
    chunk.copy(into, received);
    received = size;
    const elapsed = performance.now() - started;
    if (limits.minRate > 0 && elapsed > limits.idleMs && received < (limits.minRate * elapsed) / 1000) {
      finish(new HttpRefusal(408, `the request body arrived at less than ${limits.minRate} bytes per second on average (LECTERN_REQUEST_BODY_MIN_RATE)`));
    }
  };
  const onEnd = () => {
    if (declared !== undefined && received !== declared) return finish(new HttpRefusal(400, `the request body has ${received} bytes, not the ${declared} its Content-Length says`));
    finish(undefined, received === into.length ? into : into.subarray(0, received));
  };
  const onClose = () => {
    if (!raw.complete) finish(new HttpRefusal(400, 'the client closed the connection before the end of the request body'));
  };
  raw.on('data', onData);
  raw.on('end', onEnd);
  raw.on('error', onClose);
  raw.on('close', onClose);
}

/** Whose share of the bodies in flight a request counts against: a user of a store. */
const userKey = (user: AuthUser): string => `${user.target}\n${user.username}`;

/** Largest alternate-syntax form read before its credentials (a form field) are checked. */
const ANONYMOUS_FORM_SIZE = 1024 * 1024;

/**
 * The server's request bodies (LECTERN_MAX_REQUEST_SIZE, LECTERN_MAX_BODIES_IN_FLIGHT[_PER_USER],
 * LECTERN_REQUEST_BODY_TIMEOUT, LECTERN_REQUEST_BODY_MIN_RATE): one budget for every front door.
 * Bodies read before authentication (an alternate-syntax form carrying its credentials) may hold
 * a quarter of it between them, each at most 1 MiB: they cannot crowd out the others. One user's
 * requests may hold a share of it (half by default): one user cannot keep the others out.
 */
export class RequestBodies {
  readonly budget: BodyBudget;
  /** What an admitted request's body is read under. */
  readonly limits: BodyLimits;
  /** What a body read before authentication is read under. */
  readonly anonymousLimits: BodyLimits;

  constructor(config: Config) {
    const total = bodiesInFlight(config);
    this.budget = new BodyBudget(total, Math.floor(total / 4), bodiesInFlightPerUser(config));
    this.limits = {
      limit: config.maxRequestSize,
      tooLarge: `the request body is larger than the ${config.maxRequestSize} bytes this LRS accepts (LECTERN_MAX_REQUEST_SIZE)`,
      busy: {
        total: 'the server holds as many request bodies as it may at once (LECTERN_MAX_BODIES_IN_FLIGHT); try again shortly',
        user: "this user's requests hold as much as one user's may at once (LECTERN_MAX_BODIES_IN_FLIGHT_PER_USER); try again shortly",
      },
      idleMs: config.requestBodyTimeout * 1000,
      minRate: config.requestBodyMinRate,
    };
    const formLimit = Math.min(ANONYMOUS_FORM_SIZE, config.maxRequestSize, this.budget.anonymousTotal);
    this.anonymousLimits = {
      ...this.limits,
      limit: formLimit,
      tooLarge: `an alternate-syntax form with its credentials among its fields is read before they are checked, so it may have at most ${formLimit} bytes: send larger ones with an Authorization header`,
    };
  }

  /** A request's account: read before authentication (`anonymous`), and for `user` when known. */
  hold(anonymous: boolean, user?: AuthUser): BodyHold {
    return this.budget.hold(anonymous, user && userKey(user));
  }

  /**
   * A request's whole body under `limits` (undefined: none sent), its hold released once read:
   * `user`'s share, or without one the share of bodies read before authentication (a console
   * sign-in). Every front door's bodies come through here or `readBody`: one set of bounds.
   */
  async readWhole(raw: IncomingMessage, res: ServerResponse, user: AuthUser | undefined, limits: BodyLimits): Promise<Buffer | undefined> {
    if (!hasBody(raw)) return undefined;
    const hold = this.hold(user === undefined, user);
    try {
      return await readBody(raw, res, hold, limits);
    } finally {
      hold.release();
    }
  }
}
