/**
 * The operator console's sessions: a sealed cookie (AES-256-GCM under a key derived from
 * LECTERN_CONSOLE_SECRET), so that any process sharing the secret accepts a session another one
 * opened. The cookie carries the user as the Authenticator gave it (scopes and target: what the
 * console's data calls run as), the stamp of the credential it proved (rechecked on every
 * request: a revoked, expired, rotated or changed credential ends the session), its expiry, its
 * CSRF token and its id. Nothing of a session is stored server-side but the id of one signed out
 * (the store's ended sessions, read on every request): a copy of its cookie is then refused by
 * every process until it would have expired anyway.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AuthUser } from '../../auth/types.ts';

export const SESSION_COOKIE = 'lectern_console';
/** The short-lived cookie that carries an OpenID sign-in's PKCE verifier, state and nonce to the callback. */
export const OIDC_COOKIE = 'lectern_console_oidc';

export interface Session {
  /** Random, one per sign-in (a store switch keeps it): what a sign-out records as ended. */
  id: string;
  user: AuthUser;
  /** Sent back in the X-CSRF-Token header (or a form's `csrf` field) with every change. */
  csrf: string;
  /** Epoch milliseconds after which the session is refused. */
  expires: number;
  /**
   * The credential and the version of its secret the sign-in proved (Authenticator.recheck): a
   * fingerprint of its stored hash, or `token` for OpenID Connect (bounded by the token's expiry).
   */
  stamp: string;
  /** The store an operator chose with the store switcher (ignored for anyone else); absent: its own. */
  store?: string;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Seals and opens values with one secret; each purpose gets its own key, so one cookie cannot pass for another. */
export class Sealer {
  private readonly keys = new Map<string, Buffer>();
  private readonly secret: Buffer;
  constructor(secret: string) {
    // Generated per process when unset: sessions then live as long as the process.
    this.secret = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
  }

  private key(purpose: string): Buffer {
    let k = this.keys.get(purpose);
    if (!k) this.keys.set(purpose, (k = Buffer.from(hkdfSync('sha256', this.secret, 'lectern-console', purpose, 32))));
    return k;
  }

  seal(purpose: string, value: unknown): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key(purpose), iv);
    const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** The value, or undefined when the text was not sealed for `purpose` with this secret (or was altered). */
  open(purpose: string, text: string): unknown {
    const raw = Buffer.from(text, 'base64url');
    if (raw.length < IV_BYTES + TAG_BYTES + 2) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key(purpose), raw.subarray(0, IV_BYTES));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
      return JSON.parse(plain.toString('utf8')) as unknown;
    } catch {
      return undefined;
    }
  }
}

/** A session of `ttlSeconds`, or less when the proof ends sooner by itself (`until`: a token's expiry). */
export function newSession(user: AuthUser, stamp: string, ttlSeconds: number, now: number, until = Infinity): Session {
  return { id: randomBytes(16).toString('base64url'), user, stamp, csrf: randomBytes(24).toString('base64url'), expires: Math.min(now + ttlSeconds * 1000, until) };
}

/** The session a cookie holds, when it is sealed by this secret and not expired. */
export function openSession(sealer: Sealer, cookie: string | undefined, now: number): Session | undefined {
  if (!cookie) return undefined;
  const s = sealer.open('session', cookie) as Session | undefined;
  // A cookie of a release before stamps or ids has none: its user signs in again (it could not be signed out).
  if (!s || typeof s.id !== 'string' || typeof s.expires !== 'number' || typeof s.csrf !== 'string' || typeof s.stamp !== 'string' || !s.user || now >= s.expires) return undefined;
  return s;
}

/** Constant-time comparison of the CSRF token a change carries with its session's. */
export function csrfMatches(session: Session, given: string | undefined): boolean {
  if (!given) return false;
  const a = Buffer.from(session.csrf);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The cookies of a Cookie header, by name (the first of a repeated name). */
export function parseCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (!out.has(name)) out.set(name, part.slice(eq + 1).trim());
  }
  return out;
}

/** A Set-Cookie value: HttpOnly, SameSite (Strict for the session), Secure when the request came over TLS. */
export function cookie(name: string, value: string, opts: { path: string; maxAge: number; secure: boolean; sameSite?: 'Strict' | 'Lax' }): string {
  return [
    `${name}=${value}`,
    `Path=${opts.path}`,
    `Max-Age=${Math.max(0, Math.floor(opts.maxAge))}`,
    'HttpOnly',
    `SameSite=${opts.sameSite ?? 'Strict'}`,
    ...(opts.secure ? ['Secure'] : []),
  ].join('; ');
}
