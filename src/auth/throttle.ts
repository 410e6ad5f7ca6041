/**
 * Bounds the bcrypt work password checks cost, and shares it fairly between clients. bcrypt runs
 * on libuv's thread pool (shared with file I/O): unbounded, a few clients sending unknown users
 * keep a real user's first sign-in waiting for seconds. Here at most `concurrency` checks run at
 * once; the others wait in one queue per client address, served round-robin, addresses without a
 * recent failure first (a real user's check starts as soon as a running one ends, however many an
 * attacker has queued). The queues are bounded (429 for one address, 503 in all: when full, a check
 * from an address without a recent failure takes the place of the newest one waiting from an
 * address with some, so failing addresses cannot fill it against the others), and an address that
 * failed `maxFailures` times within the window gets 429 without any bcrypt until it ends.
 */
import { LRUCache } from 'lru-cache';

export interface ThrottleOptions {
  /** Checks running at once (LECTERN_AUTH_BCRYPT_CONCURRENCY). */
  concurrency: number;
  /** Failed checks an address may have within the window before it gets 429 (0: no limit). */
  maxFailures: number;
  /** The window, in milliseconds, from an address's first failure. */
  failureWindowMs: number;
}

/** Checks one address may have waiting or running; beyond, 429. */
export const ADDRESS_CHECKS = 8;
/** Checks waiting in all; beyond, 503 (at cost 12, 64 checks on two threads are ≈ 8 s of work), but see `evictFailing`. */
export const QUEUED_CHECKS = 64;
/** Keys (addresses, user names) whose failures are remembered (least recently failed forgotten first): bounded memory. */
const REMEMBERED_KEYS = 100_000;

/** A check refused before any bcrypt: 429 (this address) or 503 (every address), with the seconds to wait. */
export class CheckRefused extends Error {
  readonly status: 429 | 503;
  readonly retryAfter: number;
  constructor(status: 429 | 503, retryAfter: number, message: string) {
    super(message);
    this.name = 'CheckRefused';
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

/**
 * The client an address stands for: an IPv4 address as it is (IPv4-mapped IPv6 included), an IPv6
 * address by its /64 prefix, which one host or one customer's network commonly holds whole (so
 * stepping through addresses within it buys no new queue or failure budget).
 */
export function clientKey(address: string): string {
  // A socket closed meanwhile has no address left: all such count as one.
  const ip = (address || 'unknown').replace(/%.*$/, '');
  if (!ip.includes(':')) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1];
  const [head, tail] = ip.split('::') as [string, string | undefined];
  const groups = (s: string | undefined) => (s ? s.split(':') : []);
  // An embedded IPv4 tail (::a.b.c.d) is two groups: only the count matters past the prefix.
  const size = (gs: string[]) => gs.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const h = groups(head);
  const t = groups(tail);
  const full = tail === undefined ? h : [...h, ...Array<string>(Math.max(0, 8 - size(h) - size(t))).fill('0'), ...t];
  return `${full
    .slice(0, 4)
    .map((g) => (Number.parseInt(g, 16) || 0).toString(16))
    .join(':')}::/64`;
}

/**
 * Failures counted by key (a client's address, a user name), each key within a window fixed from
 * its first failure (failing on does not extend it); a key with `maxFailures` is blocked until its
 * window ends. The least recently failed keys are forgotten first: bounded memory.
 */
export class FailureCounter {
  private readonly maxFailures: number;
  private readonly failures: LRUCache<string, { count: number }>;

  /** `maxFailures` 0: nothing is ever blocked. */
  constructor(maxFailures: number, windowMs: number) {
    this.maxFailures = maxFailures;
    this.failures = new LRUCache({ max: REMEMBERED_KEYS, ttl: Math.max(1, windowMs), noUpdateTTL: true });
  }

  /** Seconds `key` must wait, or 0. */
  blocked(key: string): number {
    if (this.maxFailures <= 0) return 0;
    const f = this.failures.get(key);
    if (!f || f.count < this.maxFailures) return 0;
    return Math.max(1, Math.ceil(this.failures.getRemainingTTL(key) / 1000));
  }

  failed(key: string): void {
    const f = this.failures.get(key);
    if (f) f.count++;
    else this.failures.set(key, { count: 1 });
  }

  /** Whether `key` failed within its window. */
  has(key: string): boolean {
    return this.failures.has(key);
  }
}

const busyRefusal = () => new CheckRefused(503, 1, 'the server is checking as many credentials as it can; try again shortly');

interface Waiting {
  /** Order of arrival: the newest waiting check of a failing address is the first given up. */
  seq: number;
  start(): void;
  /** Refuses it (503) without running it, to make room for a check from a clean address. */
  evict(): void;
}

export class CheckThrottle {
  private readonly opts: ThrottleOptions;
  private running = 0;
  private waiting = 0;
  private arrivals = 0;
  /** Per address, its waiting checks; the map's order is the round-robin order. */
  private readonly queues = new Map<string, Waiting[]>();
  /** Per address, its checks waiting or running. */
  private readonly active = new Map<string, number>();
  private readonly failures: FailureCounter;

  constructor(opts: ThrottleOptions) {
    this.opts = opts;
    this.failures = new FailureCounter(opts.maxFailures, opts.failureWindowMs);
  }

  /** Seconds the address must wait before its credentials are checked again, or 0. */
  blocked(address: string): number {
    return this.failures.blocked(clientKey(address));
  }

  /** Counts a failed check (wrong password, unknown user) against the address. */
  failed(address: string): void {
    this.failures.failed(clientKey(address));
  }

  /** Runs `check` when a slot is free and it is this address's turn; throws CheckRefused when the queues are full. */
  run<T>(address: string, check: () => Promise<T>): Promise<T> {
    const key = clientKey(address);
    const mine = this.active.get(key) ?? 0;
    if (mine >= ADDRESS_CHECKS) {
      return Promise.reject(new CheckRefused(429, 1, `too many credential checks from this address at once (${ADDRESS_CHECKS}); try again shortly`));
    }
    // The queue is full: a clean address's check takes the place of a failing address's newest
    // one, so that addresses which keep failing cannot keep every other client out.
    if (this.running >= this.opts.concurrency && this.waiting >= QUEUED_CHECKS && (this.failures.has(key) || !this.evictFailing())) {
      return Promise.reject(busyRefusal());
    }
    this.active.set(key, mine + 1);
    const done = () => {
      const left = (this.active.get(key) ?? 1) - 1;
      if (left) this.active.set(key, left);
      else this.active.delete(key);
    };
    return new Promise<T>((resolve, reject) => {
      const job: Waiting = {
        seq: this.arrivals++,
        evict: () => {
          done();
          reject(busyRefusal());
        },
        start: () => {
          this.running++;
          let settled: Promise<T>;
          try {
            settled = check();
          } catch (err) {
            settled = Promise.reject(err);
          }
          settled.then(resolve, reject).finally(() => {
            this.running--;
            done();
            this.next();
          });
        },
      };
      if (this.running < this.opts.concurrency) return job.start();
      const queue = this.queues.get(key);
      if (queue) queue.push(job);
      else this.queues.set(key, [job]);
      this.waiting++;
    });
  }

  /** Gives up the newest waiting check of an address with a recent failure (503); false when every waiting address is clean. */
  private evictFailing(): boolean {
    let newest: { key: string; job: Waiting } | undefined;
    for (const [key, queue] of this.queues) {
      const last = queue[queue.length - 1];
      if (this.failures.has(key) && (!newest || last.seq > newest.job.seq)) newest = { key, job: last };
    }
    if (!newest) return false;
    const queue = this.queues.get(newest.key)!;
    queue.pop();
    if (!queue.length) this.queues.delete(newest.key);
    this.waiting--;
    newest.job.evict();
    return true;
  }

  /** Starts the next check: the first address in turn without a recent failure, else the first in turn. */
  private next(): void {
    while (this.running < this.opts.concurrency && this.waiting > 0) {
      let chosen: string | undefined;
      for (const key of this.queues.keys()) {
        chosen ??= key;
        if (!this.failures.has(key)) {
          chosen = key;
          break;
        }
      }
      const queue = this.queues.get(chosen!)!;
      const job = queue.shift()!;
      // To the back of the round.
      this.queues.delete(chosen!);
      if (queue.length) this.queues.set(chosen!, queue);
      this.waiting--;
      job.start();
    }
  }
}

/**
 * Failed admin sign-ins (LECTERN_ADMIN_MAX_FAILURES), counted per client address and per user
 * name. An address with `maxFailures` is refused whatever it sends. A user name with
 * `maxFailures` is refused only at addresses that failed an admin sign-in themselves within
 * their window: a guess spread over many addresses gets one try per address once the name is
 * blocked, while someone failing on purpose, who needs nothing but the name (a database key is
 * no secret), cannot keep the real user out from an address with no failure of its own. The rule
 * depends on the addresses' history only, never on whether the name exists.
 */
export class SignInFailures {
  private readonly counter: FailureCounter;

  constructor(maxFailures: number, windowMs: number) {
    this.counter = new FailureCounter(maxFailures, windowMs);
  }

  /** Seconds a sign-in from `address` naming `user` (none: a bearer token) must wait, or 0. */
  blocked(address: string, user: string | undefined): number {
    const at = `address ${clientKey(address)}`;
    const byAddress = this.counter.blocked(at);
    const byUser = user !== undefined && this.counter.has(at) ? this.counter.blocked(`user ${user}`) : 0;
    return Math.max(byAddress, byUser);
  }

  failed(address: string, user: string | undefined): void {
    this.counter.failed(`address ${clientKey(address)}`);
    if (user !== undefined) this.counter.failed(`user ${user}`);
  }
}
