/**
 * Scopes (xAPI 1.0.3 Communication §4.2, plus Ralph's names) and the authorisation decision: which
 * scope a request needs, whether the user holds it (with the implications between scopes), and
 * what a granted request may do (read only its own statements, (re)define activities).
 */
import type { AuthUser } from './types.ts';

/** Every scope a credentials entry, `lectern auth -s` or a token may carry. */
export const SCOPES = [
  'statements/write',
  'statements/read/mine',
  'statements/read',
  'state',
  'state/read',
  'state/write',
  'define',
  'profile',
  'profile/read',
  'profile/write',
  'all/read',
  'all',
] as const;
export type Scope = (typeof SCOPES)[number];

export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);

/** What each scope grants besides itself (§4.2: `all/read` is every read, `statements/read` includes `mine`). */
const IMPLIES: Partial<Record<Scope, readonly Scope[]>> = {
  all: SCOPES,
  'all/read': ['statements/read', 'statements/read/mine', 'state/read', 'profile/read'],
  'statements/read': ['statements/read/mine'],
  state: ['state/read', 'state/write'],
  profile: ['profile/read', 'profile/write'],
};

/** The scopes `names` grant, implications applied; names that are not scopes (`openid`, `email`) are ignored. */
export function grantedScopes(names: Iterable<string>): ReadonlySet<Scope> {
  const out = new Set<Scope>();
  for (const n of names) {
    if (!isScope(n)) continue;
    out.add(n);
    for (const implied of IMPLIES[n] ?? []) out.add(implied);
  }
  return out;
}

/** The scopes a route needs: one for reads (GET/HEAD), one for writes (PUT/POST/DELETE). */
export interface RouteScopes {
  read: Scope;
  write: Scope;
}

export interface AccessPolicy {
  /** LECTERN_LRS_RESTRICT_BY_SCOPES: when false, any authenticated user may do anything in its store. */
  restrictByScopes: boolean;
  /** LECTERN_LRS_RESTRICT_BY_AUTHORITY: every user reads only the statements it is the authority of. */
  restrictByAuthority: boolean;
}

/** What an authorised request may do beyond the route itself. */
export interface Access {
  /** Statement reads see only statements whose authority is the user's agent. */
  mineOnly: boolean;
  /** Statements may (re)define the canonical Activity definitions (§4.2 `define`). */
  define: boolean;
}

export type Decision = { ok: true; access: Access } | { ok: false; needed: Scope };

const READS = new Set(['GET', 'HEAD']);

/** Decides whether `user` may call `method` on a route needing `scopes`. */
export function authorise(user: AuthUser, method: string, scopes: RouteScopes, policy: AccessPolicy): Decision {
  const granted = grantedScopes(user.scopes);
  const needed = READS.has(method) ? scopes.read : scopes.write;
  if (policy.restrictByScopes && !granted.has(needed)) return { ok: false, needed };
  return {
    ok: true,
    access: {
      mineOnly: policy.restrictByAuthority || (policy.restrictByScopes && !granted.has('statements/read')),
      define: !policy.restrictByScopes || granted.has('define'),
    },
  };
}
