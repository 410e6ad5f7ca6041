/** Scopes a user can hold (Ralph's names: the xAPI 1.0.3 §4.2 OAuth scopes plus `all`). */
export const SCOPES = [
  'statements/write',
  'statements/read/mine',
  'statements/read',
  'state/write',
  'state/read',
  'define',
  'profile/write',
  'profile/read',
  'all/read',
  'all',
] as const;
export type Scope = (typeof SCOPES)[number];

export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);
