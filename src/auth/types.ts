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
}

/** A refusal: 401 (no valid credentials) or 503 (the identity provider cannot be reached). */
export interface AuthFailure {
  ok: false;
  status: 401 | 503;
  body: Record<string, string>;
  headers: Record<string, string>;
}

export type AuthResult = { ok: true; user: AuthUser } | AuthFailure;

export interface Authenticator {
  /** `authorization` is the raw header value (or the alternate-syntax form field). */
  authenticate(authorization: string | undefined): Promise<AuthResult>;
}
