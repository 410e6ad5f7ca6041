import type { Agent } from '../xapi/types.ts';

/** Who a request is from, once authenticated. */
export interface AuthUser {
  username: string;
  /** The scope names the user holds as given (credentials entry or token), shown by /whoami. */
  scopes: string[];
  /** The user's agent, used as the `authority` of the statements they store. */
  agent: Agent;
  /** The store (tenant) the user works in: '' for the default store. */
  target: string;
  /**
   * How the user's statement writes are validated (docs/validation.md), when its credential
   * chooses (auth.json entry, database credential, token claim); absent: LECTERN_XAPI_VALIDATION.
   */
  validation?: 'strict' | 'lax';
}

/**
 * A refusal: 401 (no valid credentials), 429 (too many failed or concurrent checks from the client's
 * address) or 503 (the identity provider cannot be reached, or too many checks in all).
 */
export interface AuthFailure {
  ok: false;
  status: 401 | 429 | 503;
  body: Record<string, string>;
  headers: Record<string, string>;
}

/**
 * A success. `stamp` names the credential and the version of its secret the user proved (a
 * fingerprint of the stored hash, never the secret): what a console session keeps to ask
 * `recheck` on each request whether that credential still holds. `expiresMs`: when the proof
 * ends by itself (a token's `exp`).
 */
export interface AuthSuccess {
  ok: true;
  user: AuthUser;
  stamp?: string;
  expiresMs?: number;
}

export type AuthResult = AuthSuccess | AuthFailure;

/** The stamp of a sign-in with a token: nothing to recheck, the token's expiry bounds the session. */
export const TOKEN_STAMP = 'token';

/** Whether an earlier sign-in still holds: `unavailable` when the database cannot say right now. */
export type Recheck = 'valid' | 'ended' | 'unavailable';

export interface Authenticator {
  /**
   * `authorization` is the raw header value (or the alternate-syntax form field); `client` the
   * client's address (behind trusted proxies, the one they forward: LECTERN_RUNSERVER_TRUST_PROXY),
   * which per-client limits count by.
   */
  authenticate(authorization: string | undefined, client: string): Promise<AuthResult>;
  /**
   * Whether the credential `stamp` names (from an earlier success) still works as it did and
   * still gives `user` (same scopes, store, agent, validation): not removed, revoked, expired,
   * rotated past its grace, or changed. Cheap: no bcrypt, no database read beyond the
   * credentials' cached change counter. Console sessions ask it on every request.
   */
  recheck(user: AuthUser, stamp: string): Promise<Recheck>;
}
