/**
 * HTTP Basic authentication against the credentials file, with an LRU+TTL cache of successful
 * bcrypt checks, and against the database credentials (./database.ts) for a name the file does
 * not have: the file's users keep their names. Every refusal, whoever the name, takes one path:
 * the address's throttle, then a bcrypt check (a decoy for an unknown user or a refused database
 * key), then a failure counted against the address. Cache keys are hashes of username and password
 * under a per-process secret, so no plain-text password is kept, and a wrong password can never
 * hit a cached success. The bcrypt checks themselves are bounded and shared fairly between client
 * addresses (./throttle.ts).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import bcrypt from 'bcrypt';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { type CredentialEntry, readCredentialsFile } from './credentials.ts';
import { type DatabaseCredentials, fingerprint, sameUser } from './database.ts';
import { CheckRefused, CheckThrottle, type ThrottleOptions } from './throttle.ts';
import { type AuthFailure, type AuthResult, type Authenticator, type AuthUser, type Recheck, TOKEN_STAMP } from './types.ts';

export interface BasicAuthOptions {
  file: string;
  cacheMaxSize: number;
  cacheTtlSeconds: number;
  throttle: ThrottleOptions;
  logger: Logger;
  /** Database credentials, asked for a name the file does not have. */
  database?: DatabaseCredentials;
}

const UNAUTHORIZED: AuthResult = {
  ok: false,
  status: 401,
  body: { error: 'Invalid authentication credentials: the user is not authenticated' },
  headers: { 'www-authenticate': 'Basic realm="lectern"' },
};

/** Refused before any bcrypt: too many failures or checks from the address (429), or from all (503). */
const refusedCheck = (status: 429 | 503, retryAfter: number, detail: string): AuthFailure => ({
  ok: false,
  status,
  body: { detail },
  headers: { 'retry-after': String(retryAfter) },
});

function toUser(e: CredentialEntry): AuthUser {
  const user: AuthUser = { username: e.username, scopes: e.scopes, agent: { ...e.agent, objectType: 'Agent' }, target: e.target ?? '' };
  if (e.validation) user.validation = e.validation;
  return user;
}

/** A stamp's prefix says which kind of credential it fingerprints. */
const FILE_STAMP = 'file:';
const DATABASE_STAMP = 'db:';
const stampOf = (e: CredentialEntry): string => `${FILE_STAMP}${fingerprint(e.hash)}`;

/** Which kind of credential a sign-in's stamp (AuthSuccess.stamp) names: what changes its scopes differs. */
export function credentialKind(stamp: string): 'file' | 'database' | 'token' {
  return stamp === TOKEN_STAMP ? 'token' : stamp.startsWith(DATABASE_STAMP) ? 'database' : 'file';
}
const fileUser = (e: CredentialEntry): AuthResult => ({ ok: true, user: toUser(e), stamp: stampOf(e) });

/** Compares without an early exit on the first differing byte. */
function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The bcrypt cost of a hash (`$2b$12$...` → 12). */
const costOf = (hash: string): number => Number(hash.slice(4, 6));

export class BasicAuthenticator implements Authenticator {
  private readonly path: string;
  private readonly logger: Logger;
  private readonly secret = randomBytes(32);
  private readonly cache: LRUCache<string, string> | undefined;
  private users = new Map<string, CredentialEntry>();
  private fileStamp = '';
  private fileError: string | undefined;
  /** A hash of a random password at the cost the file's users have: what an unknown user is checked against. */
  private decoy: Promise<string> | undefined;
  private readonly throttle: CheckThrottle;
  /**
   * Checks under way by credentials key: the same credentials sent again meanwhile (a client's
   * concurrent requests before the first success is cached) wait for that one check.
   */
  private readonly checking = new Map<string, Promise<boolean>>();
  private readonly database: DatabaseCredentials | undefined;

  constructor(opts: BasicAuthOptions) {
    this.path = resolve(opts.file);
    this.logger = opts.logger;
    this.database = opts.database;
    this.throttle = new CheckThrottle(opts.throttle);
    this.cache = opts.cacheMaxSize > 0 ? new LRUCache<string, string>({ max: opts.cacheMaxSize, ttl: Math.max(1, opts.cacheTtlSeconds * 1000) }) : undefined;
    // At start-up, so that a file user named as a database credential's key is reported then.
    if (this.database) this.refresh();
  }

  /**
   * Re-reads the file when its size, mtime or inode changed since the last read. A synchronous
   * stat of a cached inode costs about a microsecond: cheaper than a thread-pool round trip.
   */
  private refresh(): void {
    const s = statSync(this.path, { throwIfNoEntry: false });
    const stamp = s ? `${s.ino}:${s.size}:${s.mtimeMs}` : 'missing';
    if (stamp === this.fileStamp) return;
    this.fileStamp = stamp;
    if (stamp === 'missing') {
      this.users = new Map();
      this.fileError = this.database
        ? `credentials file ${this.path} does not exist: only database credentials (\`lectern credentials\`) can sign in with Basic`
        : `credentials file ${this.path} does not exist: every request will get 401 (create it with \`lectern auth ... -w\`)`;
      this.logger[this.database ? 'warn' : 'error']({ file: this.path }, this.fileError);
      return;
    }
    try {
      this.users = new Map(readCredentialsFile(this.path, (message) => this.logger.warn({ file: this.path }, message)).map((e) => [e.username, e]));
      this.fileError = undefined;
      this.decoy = undefined;
      this.logger.info({ file: this.path, users: this.users.size }, 'credentials file loaded');
      void this.database?.warnClashes(this.users.keys());
    } catch (err) {
      // A half-saved edit must not lock every user out: the last good content stays in force.
      this.fileError = (err as Error).message;
      this.logger.error({ file: this.path, err: this.fileError }, `credentials file is invalid, keeping its last good content (${this.users.size} users): ${this.fileError}`);
    }
  }

  /** Made once per file version, at the highest cost among its users. */
  private decoyHash(): Promise<string> {
    const cost = Math.max(4, ...[...this.users.values()].map((e) => costOf(e.hash)).filter(Number.isFinite));
    this.decoy ??= bcrypt.hash(randomBytes(16).toString('hex'), Math.min(cost, 31));
    return this.decoy;
  }

  async authenticate(authorization: string | undefined, client: string): Promise<AuthResult> {
    const m = authorization && /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
    if (!m) return UNAUTHORIZED;
    const decoded = Buffer.from(m[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return UNAUTHORIZED;
    const username = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    this.refresh();
    const entry = this.users.get(username);
    if (!entry && this.database) {
      // A throttled address reads nothing more: only a secret the cache already holds passes, as
      // a file user's cached success does.
      const found = await this.database.check(username, password, !this.throttle.blocked(client));
      if (found.ok) return { ok: true, user: found.user, stamp: `${DATABASE_STAMP}${found.stamp}` };
      if (found.reason === 'unavailable') return refusedCheck(503, 5, 'the credentials cannot be checked right now; try again shortly');
      // A known key refused (wrong secret, revoked, expired) goes on as an unknown name does:
      // the same throttle, the same decoy check, the same count and answer, so that neither
      // the answer nor its time tells which keys exist.
    }
    // With no users at all there is nothing to check, and nothing to tell.
    if (!this.users.size && !this.database) return UNAUTHORIZED;
    // A keyed hash (secret prefix) of the credentials: never the password itself.
    const key = createHash('sha256').update(this.secret).update(username).update('\0').update(password).digest('base64');
    // The cached value is the hash it was checked against: a changed hash in the file invalidates it.
    const cached = entry && this.cache?.get(key);
    if (cached !== undefined && sameText(cached, entry!.hash)) return fileUser(entry!);
    const wait = this.throttle.blocked(client);
    if (wait) return refusedCheck(429, wait, `too many failed sign-ins from this address: try again in ${wait} s`);
    let check = this.checking.get(key);
    if (!check) {
      // An unknown user (or a refused database key) costs a bcrypt check too, against a hash at
      // the users' cost: answer time does not tell which users exist. All go through the same throttle.
      check = this.throttle.run(client, () => (entry ? this.compare(username, password, entry.hash) : this.decoyHash().then((h) => bcrypt.compare(password, h))));
      this.checking.set(key, check);
      void check.finally(() => this.checking.delete(key)).catch(() => {});
    }
    let good = false;
    try {
      good = await check;
    } catch (err) {
      if (err instanceof CheckRefused) return refusedCheck(err.status, err.retryAfter, err.message);
      // The decoy's own failure: an unknown user is refused all the same.
    }
    if (!good || !entry) {
      this.throttle.failed(client);
      return UNAUTHORIZED;
    }
    this.cache?.set(key, entry.hash);
    return fileUser(entry);
  }

  /**
   * A file user's sign-in holds while the file (re-read when it changes) has the same entry: the
   * same hash (a new password ends it) and the same grant. A database credential's, while the
   * file has no user of that name and the credential holds (./database.ts).
   */
  async recheck(user: AuthUser, stamp: string): Promise<Recheck> {
    this.refresh();
    const entry = this.users.get(user.username);
    if (stamp.startsWith(FILE_STAMP)) return entry && stamp === stampOf(entry) && sameUser(toUser(entry), user) ? 'valid' : 'ended';
    if (stamp.startsWith(DATABASE_STAMP) && !entry && this.database) return this.database.recheck(user, stamp.slice(DATABASE_STAMP.length));
    return 'ended';
  }

  private async compare(username: string, password: string, hash: string): Promise<boolean> {
    try {
      return await bcrypt.compare(password, hash);
    } catch (err) {
      this.logger.error({ username, err: (err as Error).message }, 'bcrypt check failed');
      return false;
    }
  }
}
