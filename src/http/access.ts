/**
 * Who may come in, for every front door: `admit` authenticates a request's credentials (the one
 * Authenticator), optionally behind a door's throttle of failed attempts, then lets the door grant
 * what the route needs (xAPI scopes, an admin role). The answer that refuses a request is built
 * here; the body is never read before a request is admitted.
 */
import { type Access, type AccessPolicy, authorise, type RouteScopes } from '../auth/scopes.ts';
import type { Authenticator, AuthUser } from '../auth/types.ts';
import { type Answer, json } from './answer.ts';

/** An admitted request's user and what it may do (`A`: the door's grant), or the answer that refuses it. */
export type Admission<A = Access | undefined> = { user: AuthUser; access: A } | { refusal: Answer };

/** What a route needs of an authenticated user: what it may do (xAPI scopes, an admin role), or the answer that refuses it (403). */
export type Grant<A> = (user: AuthUser) => { access: A } | { refusal: Answer };

/** A door's count of failed credential checks (the admin API's: per address and user name). */
export interface Throttle {
  /** The refusal (429 with Retry-After) of a request not to be checked now, else undefined. */
  blocked(authorization: string | undefined, client: string): Answer | undefined;
  /** Credentials were sent and refused. */
  failed(authorization: string | undefined, client: string): void;
}

export interface AdmitOptions<A> {
  throttle?: Throttle;
  grant?: Grant<A>;
}

/** Authenticates `authorization` from `client` (its address), then grants what the route needs. */
export function admit<A>(
  auth: Pick<Authenticator, 'authenticate'>,
  authorization: string | undefined,
  client: string,
  opts: AdmitOptions<A> & { grant: Grant<A> },
): Promise<Admission<A>>;
export function admit(auth: Pick<Authenticator, 'authenticate'>, authorization: string | undefined, client: string, opts?: { throttle?: Throttle }): Promise<Admission<undefined>>;
export async function admit<A>(
  auth: Pick<Authenticator, 'authenticate'>,
  authorization: string | undefined,
  client: string,
  opts: AdmitOptions<A> = {},
): Promise<Admission<A | undefined>> {
  const blocked = opts.throttle?.blocked(authorization, client);
  if (blocked) return { refusal: blocked };
  const result = await auth.authenticate(authorization, client);
  if (!result.ok) {
    // Credentials sent and refused: a failure. None sent (a client's first try) is not one.
    if (result.status === 401 && authorization !== undefined) opts.throttle?.failed(authorization, client);
    return { refusal: json(result.status, result.body, result.headers) };
  }
  if (!opts.grant) return { user: result.user, access: undefined };
  const granted = opts.grant(result.user);
  return 'refusal' in granted ? granted : { user: result.user, access: granted.access };
}

/**
 * The scopes of each xAPI resource (xAPI-Communication §4.2), which its route and the console's
 * reads of it need. `statements/read/mine` lets a user read statements at all; the read then keeps
 * it to its own unless it holds `statements/read`.
 */
export const RESOURCE_SCOPES = {
  statements: { read: 'statements/read/mine', write: 'statements/write' },
  state: { read: 'state/read', write: 'state/write' },
  profile: { read: 'profile/read', write: 'profile/write' },
  // The canonical Activity is assembled from every statement of the store: a full statements read
  // (and the Agents view, the other read-only view, alike).
  views: { read: 'statements/read', write: 'statements/read' },
} as const satisfies Record<string, RouteScopes>;

/** A grant of `scopes` for `method` on `path`: 403 naming the scope the user lacks. */
export const grantScopes =
  (method: string, path: string, scopes: RouteScopes, policy: AccessPolicy): Grant<Access> =>
  (user) => {
    const decision = authorise(user, method, scopes, policy);
    if (decision.ok) return { access: decision.access };
    const detail = `${method} ${path} needs the scope ${decision.needed}, which the user ${user.username} does not hold`;
    return { refusal: json(403, { detail, scope: decision.needed }) };
  };
