import type { Agent } from '../xapi/types.ts';

/** Who a request is from, once authenticated. */
export interface AuthUser {
  username: string;
  scopes: string[];
  /** The user's agent, used as the `authority` of the statements they store. */
  agent: Agent;
  /** The store (tenant) the user works in: '' for the default store. */
  target: string;
}

export type AuthResult =
  | { ok: true; user: AuthUser }
  | { ok: false; status: 401; body: Record<string, string>; headers: Record<string, string> };

export interface Authenticator {
  /** `authorization` is the raw header value (or the alternate-syntax form field). */
  authenticate(authorization: string | undefined): Promise<AuthResult>;
}
