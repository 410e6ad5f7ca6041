/**
 * The admin API's use cases (docs/admin-api.md), for the HTTP routes and the CLI alike: who may
 * reach which store, the stores and their figures, the audit log of admin actions, server status,
 * an erasure recorded as the CLI records it, and a replay of kept rejections with its audit.
 * Roles come from src/auth/scopes.ts (adminRole).
 */
import type { AdminRole } from '../auth/scopes.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { MinuteCount } from '../monitoring/ingest.ts';
import type { AuditEntry, AuditFilter, CredentialStore, KeptRejection, RejectionStore, Store, StoreSummary } from '../store/types.ts';
import type { Actor } from '../xapi/types.ts';
import type { XapiVersion } from '../xapi/versions.ts';
import { auditErasure, type Erasure, erasePerson } from './erase.ts';
import { OpsError } from './errors.ts';
import { type ReplayRequest, type ReplayResult, replayRejections, replaySettings, replaySummary, showRejection } from './rejections.ts';

/** Who acts, with which role, from where: what an audit entry records of them (never a secret). */
export interface AdminActor {
  /** The user name, credential key or token subject; the OS user from the CLI. */
  name: string;
  role: AdminRole;
  /** The client's address (HTTP), or the host the CLI ran on. */
  client: string;
  via: 'http' | 'cli';
}

/**
 * The store an action reaches: `asked` when the role may reach it, else a not_found, the answer a
 * store that holds nothing would get: a store administrator cannot tell other stores' existence
 * from their absence. Not named: the administrator's own store, the default store ('') for an operator.
 */
export function reachableStore(role: AdminRole, asked: string | undefined): string {
  if (role.kind === 'operator') return asked ?? '';
  if (asked === undefined || asked === role.target) return role.target;
  throw new OpsError(`no store ${JSON.stringify(asked)} here`, 'not_found');
}

/** Refuses a store administrator (403): for actions on the server as a whole (status, forwarding). */
export function requireOperator(role: AdminRole, what: string): void {
  if (role.kind !== 'operator') throw new OpsError(`${what} is the operator's: it concerns every store (the admin scope, in the default store)`, 'forbidden');
}

/** Refuses (404, as an unknown key) a credential the role does not reach: another store's, for a store administrator. */
export async function credentialInReach(store: CredentialStore, role: AdminRole, key: string): Promise<void> {
  const row = await store.getCredential(key);
  if (!row || (role.kind === 'store' && row.target !== role.target)) throw new OpsError(`no credential has the key ${JSON.stringify(key)}`, 'not_found');
}

/** A kept rejection the role reaches; another store's is the 404 an unknown id gets. */
export async function rejectionInReach(store: RejectionStore, role: AdminRole, id: string): Promise<KeptRejection> {
  const r = await showRejection(store, id);
  if (role.kind === 'store' && r.tenant !== role.target) throw new OpsError(`no kept rejection with id ${id}`, 'not_found');
  return r;
}

/** The most kept rejections one page lists. */
export const REJECTION_PAGE_MAX = 1000;

/**
 * Refuses (403) scopes the role may not give: a store administrator may give the xAPI scopes and
 * `admin/store`, not `admin` (held in the default store, it makes an operator).
 */
export function checkGrantable(role: AdminRole, scopes: readonly string[]): void {
  if (role.kind === 'store' && scopes.includes('admin')) {
    throw new OpsError('scopes: a store administrator may not give the admin scope (it may give admin/store and the xAPI scopes)', 'forbidden');
  }
}

/** The stores the role sees, with their figures: an operator every one (or `only`), a store administrator its own. */
export async function listStores(store: Store, role: AdminRole, only?: string): Promise<StoreSummary[]> {
  if (role.kind === 'store') return store.storeSummaries(reachableStore(role, only));
  return store.storeSummaries(only);
}

/** Records an admin action that changed something: who, from where, what, in which store, when. */
export function recordAudit(
  store: Store,
  by: AdminActor,
  action: string,
  target: string | null,
  details: Record<string, unknown>,
  clock: Clock = systemClock,
): Promise<AuditEntry> {
  const role = by.role.kind === 'operator' ? 'operator' : 'store';
  return store.appendAudit({ timeMs: clock.now(), actor: by.name, role, via: by.via, client: by.client, action, target, details });
}

/**
 * A replay of kept rejections by an administrator (the admin API and the console): run as a new
 * request would be, under the server's settings, then audited with its outcome.
 */
export async function replayAudited(
  store: Store,
  by: AdminActor,
  req: Pick<ReplayRequest, 'ids' | 'all' | 'tenant' | 'validation'>,
  config: Parameters<typeof replaySettings>[0],
  clock: Clock = systemClock,
): Promise<{ results: ReplayResult[] } & ReturnType<typeof replaySummary>> {
  const results = await replayRejections(store, { ...req, ...replaySettings(config), clock });
  const outcome = replaySummary(results);
  const { ids, validation } = req;
  await recordAudit(store, by, 'rejections.replay', req.tenant ?? null, { ...(ids ? { ids } : { all: true }), ...(validation && { validation }), ...outcome }, clock);
  return { results, ...outcome };
}

/** The most entries one page lists. */
export const AUDIT_PAGE_MAX = 1000;

/**
 * A page of the audit log, newest first: an operator's of every entry (or `filter.target`'s), a
 * store administrator's of its own store's only (server-wide entries are the operator's).
 */
export function listAudit(store: Store, role: AdminRole, filter: Omit<AuditFilter, 'target'> & { target?: string }): Promise<AuditEntry[]> {
  const target = role.kind === 'operator' ? filter.target : reachableStore(role, filter.target);
  return store.listAudit({ ...filter, target, limit: Math.min(Math.max(1, filter.limit), AUDIT_PAGE_MAX) });
}

export interface ServerStatus {
  version: string;
  backend: string;
  /** The xAPI versions served (LECTERN_XAPI_VERSIONS). */
  xapiVersions: readonly XapiVersion[];
  startedAt: string;
  uptimeSeconds: number;
  /** Statements newly stored by this process per minute, oldest first, the current minute last. */
  ingest: MinuteCount[];
}

export function serverStatus(s: { version: string; backend: string; xapiVersions: readonly XapiVersion[]; startedMs: number; ingest: MinuteCount[] }, clock: Clock = systemClock): ServerStatus {
  return {
    version: s.version,
    backend: s.backend,
    xapiVersions: s.xapiVersions,
    startedAt: new Date(s.startedMs).toISOString(),
    uptimeSeconds: Math.max(0, Math.floor((clock.now() - s.startedMs) / 1000)),
    ingest: s.ingest,
  };
}

export interface AdminErasure {
  tenant: string;
  person: Actor;
  dryRun: boolean;
  /** The pseudonymization key (LECTERN_PSEUDONYMIZE_KEY) when pseudonymizing, else undefined. */
  pseudonymizeKey?: string;
  /** LECTERN_AUDIT_FILE: the run's line, as `lectern erase` appends it. */
  auditFile: string;
}

/**
 * Erases (or pseudonymizes) one person from a store. A run that changed the store is recorded
 * twice: the CLI's line in the audit file (auditErasure, the same fields) and an entry of the
 * admin audit log. A dry run changes nothing and records nothing.
 */
export async function adminErase(store: Store, by: AdminActor, req: AdminErasure, clock: Clock = systemClock): Promise<Erasure> {
  const erasure = await erasePerson(store, { tenant: req.tenant, person: req.person, pseudonymizeKey: req.pseudonymizeKey, dryRun: req.dryRun });
  if (!req.dryRun) {
    const command = `erase${req.pseudonymizeKey === undefined ? '' : ' --pseudonymize'}`;
    auditErasure(req.auditFile, erasure.report, { command, user: by.name, host: by.client, time: new Date(clock.now()) });
    const { target: _, ...counts } = erasure.report;
    await recordAudit(store, by, erasure.report.action, req.tenant, counts, clock);
  }
  return erasure;
}
