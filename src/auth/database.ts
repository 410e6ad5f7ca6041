/**
 * Credentials kept in the database (`lectern credentials`, src/ops/credentials.ts), checked for
 * HTTP Basic beside the credentials file's users (./basic.ts asks here for a name the file does
 * not have).
 *
 * A secret is 32 random bytes: a guess is hopeless whatever the hash's speed, so it is kept as its
 * SHA-256 (no bcrypt: a check costs a microsecond, on the event loop) and compared in constant
 * time; a refusal still costs what an unknown user's does (./basic.ts), so keys cannot be told
 * from unknown names. Rows are cached per key, unknown keys too, without a database read per
 * request: the change counter every create, revoke and rotation bumps (src/store/credentials.ts)
 * is read at most once per `refreshMs`, by the first request after it elapsed, and when it moved
 * the cache is dropped. A revocation or rotation is therefore in force on every process within
 * `refreshMs` (plus one read) of its commit; expiry and a rotation's grace are checked on each use
 * from the cached row. A secret the cached row refuses is checked again on the row read anew (at
 * most once per key per `refreshMs`) before the refusal stands, so that a new secret (a rotation,
 * a creation) works on every process at once rather than failing sign-ins there. The last use is
 * written at most once a minute per key and process, in the background: a failed write never
 * fails the request.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { type Clock, systemClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { CredentialRow, CredentialStore } from '../store/types.ts';
import type { AuthUser, Recheck } from './types.ts';

/** What a secret is stored as: its SHA-256, base64url. */
export const hashSecret = (secret: string): string => createHash('sha256').update(secret, 'utf8').digest('base64url');

/**
 * What a console session keeps of the stored hash its user proved (a database credential's
 * SHA-256 of the secret, or a file user's bcrypt hash): enough to tell, later, that the same
 * secret is still the one stored, never enough to check a guess of it (a bcrypt hash without its
 * salt and cost is no use for that), and short. Not keyed: the session cookie is sealed anyway.
 */
export function fingerprint(storedHash: string): string {
  let f = fingerprints.get(storedHash);
  if (f === undefined) {
    f = createHash('sha256').update('lectern-session\0').update(storedHash, 'utf8').digest('base64url').slice(0, 22);
    fingerprints.set(storedHash, f);
  }
  return f;
}
/** Each request's sign-in gives one: the hashes in use are few, a hash costs more than a lookup. */
const fingerprints = new LRUCache<string, string>({ max: 10_000 });

/** A value as JSON with object keys sorted: two agents equal whatever their keys' order. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

/** Whether two users are the same grant: name, store, scopes (as a set), agent and validation. */
export function sameUser(a: AuthUser, b: AuthUser): boolean {
  const scopes = (u: AuthUser) => [...new Set(u.scopes)].sort().join(' ');
  return a.username === b.username && a.target === b.target && a.validation === b.validation && scopes(a) === scopes(b) && canonical(a.agent) === canonical(b.agent);
}

/** Least time between two writes of one key's last use (per process). */
export const LAST_USED_GRANULARITY_MS = 60_000;
/** Keys (known or not) whose rows are cached at most. */
const CACHE_MAX = 10_000;

export interface DatabaseCredentialsOptions {
  store: CredentialStore;
  /** The change counter is read at most this often (LECTERN_AUTH_CREDENTIALS_REFRESH). */
  refreshMs: number;
  logger: Logger;
  /** What expiry, grace and last use are measured by (the counter's interval is real time). */
  clock?: Clock;
}

/**
 * A check's outcome: a user; `refused` (known key, wrong or spent secret); `unknown` (no such key:
 * the caller answers it as it answers an unknown user); `unavailable` (the database cannot say).
 */
export type DatabaseCheck = { ok: true; user: AuthUser; stamp: string } | { ok: false; reason: 'refused' | 'unknown' | 'unavailable' };

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function credentialUser(row: CredentialRow): AuthUser {
  const user: AuthUser = { username: row.key, scopes: row.scopes, agent: { ...row.agent, objectType: 'Agent' }, target: row.target };
  if (row.validation) user.validation = row.validation;
  return user;
}

export class DatabaseCredentials {
  private readonly store: CredentialStore;
  private readonly refreshMs: number;
  private readonly logger: Logger;
  private readonly clock: Clock;
  /** Rows by key; `row` undefined for a key the database does not have. */
  private readonly rows = new LRUCache<string, { row?: CredentialRow }>({ max: CACHE_MAX });
  private readonly loading = new Map<string, Promise<CredentialRow | undefined>>();
  /** Bumped when the cache is dropped: a row read before that is not cached after it. */
  private generation = 0;
  private version: number | undefined;
  /** performance.now() of the last counter read. */
  private checkedAt = -Infinity;
  private checking: Promise<void> | undefined;
  private readonly touched = new LRUCache<string, number>({ max: CACHE_MAX });
  /** performance.now() of each key's last re-read after a refusal (mayReread). */
  private readonly rereadAt = new LRUCache<string, number>({ max: CACHE_MAX });

  constructor(opts: DatabaseCredentialsOptions) {
    this.store = opts.store;
    this.refreshMs = opts.refreshMs;
    this.logger = opts.logger;
    this.clock = opts.clock ?? systemClock;
  }

  /** Reads the change counter when `refreshMs` has passed since the last read (one read at a time); drops the cache when it moved. */
  private fresh(): Promise<void> {
    if (performance.now() - this.checkedAt < this.refreshMs) return Promise.resolve();
    this.checking ??= (async () => {
      try {
        const startedAt = performance.now();
        const version = await this.store.credentialsVersion();
        if (version !== this.version) {
          this.rows.clear();
          // Reads under way may predate the change: later requests start their own.
          this.loading.clear();
          this.generation++;
          this.version = version;
        }
        this.checkedAt = startedAt;
      } finally {
        this.checking = undefined;
      }
    })();
    return this.checking;
  }

  /** The row from the cache, else read (and cached). */
  private async row(key: string): Promise<CredentialRow | undefined> {
    const cached = this.rows.get(key);
    return cached ? cached.row : this.load(key);
  }

  /** Reads the row and caches it; concurrent reads of one key share one. */
  private load(key: string): Promise<CredentialRow | undefined> {
    let load = this.loading.get(key);
    if (!load) {
      const generation = this.generation;
      load = this.store.getCredential(key).then((row) => {
        if (generation === this.generation) this.rows.set(key, { row });
        return row;
      });
      this.loading.set(key, load);
      const started = load;
      void load
        .finally(() => {
          if (this.loading.get(key) === started) this.loading.delete(key);
        })
        .catch(() => {});
    }
    return load;
  }

  /**
   * Whether a refusal from the cached row of `key` may read the row again first: a read under
   * way is joined; else one read per key per `refreshMs`, so that wrong secrets cannot make one
   * row be read more often than the counter is.
   */
  private mayReread(key: string): boolean {
    if (this.loading.has(key)) return true;
    const now = performance.now();
    const last = this.rereadAt.get(key);
    if (last !== undefined && now - last < this.refreshMs) return false;
    this.rereadAt.set(key, now);
    return true;
  }

  /**
   * Checks `secret` for `key`. A refusal by a cached row (or a cached absence) is checked again
   * on the row read anew, at most once per key per `refreshMs`: a rotation or a creation on
   * another process is then taken at once, not refused until the counter shows it. With `read`
   * false (the caller refuses the client whatever it sends but a secret already proved, e.g. an
   * address throttled), nothing is read but the counter: a key not cached is `unknown`.
   */
  async check(key: string, secret: string, read = true): Promise<DatabaseCheck> {
    try {
      await this.fresh();
      const cached = this.rows.get(key);
      if (!cached) return read ? this.judge(key, secret, await this.load(key)) : { ok: false, reason: 'unknown' };
      const verdict = this.judge(key, secret, cached.row);
      if (verdict.ok || !read || !this.mayReread(key)) return verdict;
      return this.judge(key, secret, await this.load(key));
    } catch (err) {
      // Without the counter, a revocation could go unseen: no database credential passes meanwhile.
      this.logger.error({ err: (err as Error).message }, 'cannot read the database credentials');
      return { ok: false, reason: 'unavailable' };
    }
  }

  /** What `row` says of `secret`: revoked, expired, a wrong or spent secret are refused. */
  private judge(key: string, secret: string, row: CredentialRow | undefined): DatabaseCheck {
    if (!row) return { ok: false, reason: 'unknown' };
    const now = this.clock.now();
    if (row.revokedMs !== undefined || (row.expiresMs !== undefined && now >= row.expiresMs)) return { ok: false, reason: 'refused' };
    const hash = hashSecret(secret);
    const current = sameHash(hash, row.secretHash);
    const previous = row.previousHash !== undefined && row.previousUntilMs !== undefined && now < row.previousUntilMs && sameHash(hash, row.previousHash);
    if (!current && !previous) return { ok: false, reason: 'refused' };
    this.touch(key, now);
    return { ok: true, user: credentialUser(row), stamp: fingerprint(current ? row.secretHash : row.previousHash!) };
  }

  /**
   * Whether a sign-in with the secret whose stored hash has fingerprint `stamp` still holds: the
   * credential not revoked nor expired, that secret still the current one or the previous one
   * within its grace, and the row still giving `user`. From the cache, as check() is.
   */
  async recheck(user: AuthUser, stamp: string): Promise<Recheck> {
    let row: CredentialRow | undefined;
    try {
      await this.fresh();
      row = await this.row(user.username);
    } catch {
      return 'unavailable';
    }
    if (!row) return 'ended';
    const now = this.clock.now();
    if (row.revokedMs !== undefined || (row.expiresMs !== undefined && now >= row.expiresMs)) return 'ended';
    const current = stamp === fingerprint(row.secretHash);
    const previous = !current && row.previousHash !== undefined && row.previousUntilMs !== undefined && now < row.previousUntilMs && stamp === fingerprint(row.previousHash);
    return (current || previous) && sameUser(credentialUser(row), user) ? 'valid' : 'ended';
  }

  /** Records the use when the last one recorded here is a minute old or more; in the background. */
  private touch(key: string, now: number): void {
    const last = this.touched.get(key);
    if (last !== undefined && now - last < LAST_USED_GRANULARITY_MS) return;
    this.touched.set(key, now);
    this.store
      .touchCredentials([{ key, atMs: now }])
      .catch((err: unknown) => this.logger.warn({ key, err: (err as Error).message }, 'cannot record the last use of a database credential'));
  }

  /**
   * Logs each of `names` (the credentials file's users) that is also a database credential's key:
   * the file user signs in under that name, and the database credential cannot be used until one
   * of them is renamed or revoked.
   */
  async warnClashes(names: Iterable<string>): Promise<void> {
    for (const name of names) {
      try {
        if (await this.store.getCredential(name)) {
          this.logger.warn(
            { key: name },
            `the credentials file has a user named as the database credential key ${JSON.stringify(name)}: the file user signs in under that name, the database credential cannot be used until the user is renamed or the credential revoked`,
          );
        }
      } catch (err) {
        this.logger.warn({ err: (err as Error).message }, 'cannot compare the credentials file with the database credentials');
        return;
      }
    }
  }
}
