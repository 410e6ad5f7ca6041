/**
 * Scopes (xAPI 1.0.3 Communication §4.2, plus Ralph's names, plus the admin API's two) and the
 * authorisation decisions: which scope an xAPI request needs, whether the user holds it (with the
 * implications between scopes), what a granted request may do (read only its own statements,
 * (re)define activities); and which admin role, if any, a user has.
 */
import type { AuthUser } from './types.ts';

/** The xAPI scopes: `all` is every one of them, and none of them reaches the admin API. */
export const XAPI_SCOPES = [
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

/**
 * The admin API's (docs/admin-api.md): `admin` makes an operator (every store) of a user of the
 * default store, and a store administrator of a user with a target; `admin/store` a store
 * administrator of the user's own store. Never implied by an xAPI scope.
 */
export const ADMIN_SCOPES = ['admin', 'admin/store'] as const;

/** Every scope a credentials entry, `lectern auth -s` or a token may carry. */
export const SCOPES = [...XAPI_SCOPES, ...ADMIN_SCOPES] as const;
export type Scope = (typeof SCOPES)[number];

export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);

/** What each scope grants besides itself (§4.2: `all/read` is every read, `statements/read` includes `mine`). */
const IMPLIES: Partial<Record<Scope, readonly Scope[]>> = {
  all: XAPI_SCOPES,
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

/** Who may do what on the admin API: an operator acts on every store, a store administrator on its own only. */
export type AdminRole = { kind: 'operator' } | { kind: 'store'; target: string };

/**
 * The user's admin role, or undefined (no admin scope: every admin route is a 403). A store's
 * user never becomes an operator, whatever it holds: its credentials cannot reach other stores.
 * Independent of LECTERN_LRS_RESTRICT_BY_SCOPES, which is about the xAPI routes.
 */
export function adminRole(user: AuthUser): AdminRole | undefined {
  if (user.scopes.includes('admin') && user.target === '') return { kind: 'operator' };
  if (user.scopes.includes('admin') || user.scopes.includes('admin/store')) return { kind: 'store', target: user.target };
  return undefined;
}
