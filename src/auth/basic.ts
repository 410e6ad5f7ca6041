/**
 * HTTP Basic authentication against the credentials file, with an LRU+TTL cache of successful
 * bcrypt checks. Cache keys are hashes of username and password under a per-process secret, so
 * no plain-text password is kept, and a wrong password can never hit a cached success.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import bcrypt from 'bcrypt';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { type CredentialEntry, readCredentialsFile } from './credentials.ts';
import type { AuthResult, Authenticator, AuthUser } from './types.ts';

export interface BasicAuthOptions {
  file: string;
  cacheMaxSize: number;
  cacheTtlSeconds: number;
  logger: Logger;
}

const UNAUTHORIZED: AuthResult = {
  ok: false,
  status: 401,
  body: { error: 'Invalid authentication credentials: the user is not authenticated' },
  headers: { 'www-authenticate': 'Basic realm="lectern"' },
};

function toUser(e: CredentialEntry): AuthUser {
  return { username: e.username, scopes: e.scopes, agent: { ...e.agent, objectType: 'Agent' }, target: e.target ?? '' };
}

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

  constructor(opts: BasicAuthOptions) {
    this.path = resolve(opts.file);
    this.logger = opts.logger;
    this.cache =
      opts.cacheMaxSize > 0 ? new LRUCache<string, string>({ max: opts.cacheMaxSize, ttl: Math.max(1, opts.cacheTtlSeconds * 1000) }) : undefined;
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
      this.fileError = `credentials file ${this.path} does not exist: every request will get 401 (create it with \`lectern auth ... -w\`)`;
      this.logger.error({ file: this.path }, this.fileError);
      return;
    }
    try {
      this.users = new Map(readCredentialsFile(this.path, (message) => this.logger.warn({ file: this.path }, message)).map((e) => [e.username, e]));
      this.fileError = undefined;
      this.decoy = undefined;
      this.logger.info({ file: this.path, users: this.users.size }, 'credentials file loaded');
    } catch (err) {
      this.users = new Map();
      this.fileError = (err as Error).message;
      this.logger.error({ file: this.path, err: this.fileError }, 'credentials file is invalid: every request will get 401');
    }
  }

  /** Made once per file version, at the highest cost among its users. */
  private decoyHash(): Promise<string> {
    const cost = Math.max(4, ...[...this.users.values()].map((e) => costOf(e.hash)).filter(Number.isFinite));
    this.decoy ??= bcrypt.hash(randomBytes(16).toString('hex'), Math.min(cost, 31));
    return this.decoy;
  }

  async authenticate(authorization: string | undefined): Promise<AuthResult> {
    const m = authorization && /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
    if (!m) return UNAUTHORIZED;
    const decoded = Buffer.from(m[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return UNAUTHORIZED;
    const username = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    this.refresh();
    const entry = this.users.get(username);
    if (!entry) {
      // An unknown user costs a bcrypt check too: answer time does not tell which users exist
      // (with no users at all there is nothing to tell).
      if (this.users.size) await bcrypt.compare(password, await this.decoyHash()).catch(() => false);
      return UNAUTHORIZED;
    }
    // A keyed hash (secret prefix) of the credentials: never the password itself.
    const key = createHash('sha256').update(this.secret).update(username).update('\0').update(password).digest('base64');
    // The cached value is the hash it was checked against: a changed hash in the file invalidates it.
    const cached = this.cache?.get(key);
    if (cached !== undefined && sameText(cached, entry.hash)) return { ok: true, user: toUser(entry) };
    let good = false;
    try {
      good = await bcrypt.compare(password, entry.hash);
    } catch (err) {
      this.logger.error({ username, err: (err as Error).message }, 'bcrypt check failed');
    }
    if (!good) return UNAUTHORIZED;
    this.cache?.set(key, entry.hash);
    return { ok: true, user: toUser(entry) };
  }
}
