/**
 * The admin reads that are not one area's (docs/admin-api.md): the stores and their figures, the
 * audit log, and the server's status. Reads change nothing and are not audited.
 */
import type { MinuteCount } from '../../monitoring/ingest.ts';
import type { AuditEntry, AuditFilter, StoreSummary } from '../../store/types.ts';
import { LECTERN_VERSION } from '../../version.ts';
import type { XapiVersion } from '../../xapi/versions.ts';
import { type AdminActor, type AdminContext, reachableStore, requireOperator } from './roles.ts';

/** The stores the actor sees, with their figures: an operator every one (or `target`), a store administrator its own. */
export function listStores(ctx: AdminContext, by: AdminActor, input: { target?: string } = {}): Promise<StoreSummary[]> {
  return ctx.store.storeSummaries(by.role.kind === 'store' ? reachableStore(by.role, input.target) : input.target);
}

/** The most entries one page lists. */
export const AUDIT_PAGE_MAX = 1000;

/**
 * A page of the audit log, newest first: an operator's of every entry (or `filter.target`'s), a
 * store administrator's of its own store's only (server-wide entries are the operator's).
 */
export function listAudit(ctx: AdminContext, by: AdminActor, filter: Omit<AuditFilter, 'target'> & { target?: string }): Promise<AuditEntry[]> {
  const target = by.role.kind === 'operator' ? filter.target : reachableStore(by.role, filter.target);
  return ctx.store.listAudit({ ...filter, target, limit: Math.min(Math.max(1, filter.limit), AUDIT_PAGE_MAX) });
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

/** This server process's status, the operator's: `startedMs` when it started, `ingest` what it stored per minute. */
export function serverStatus(ctx: AdminContext, by: AdminActor, s: { startedMs: number; ingest: MinuteCount[] }): ServerStatus {
  requireOperator(by.role, 'the server status');
  return {
    version: LECTERN_VERSION,
    backend: ctx.store.backend,
    xapiVersions: ctx.config.xapiVersions,
    startedAt: new Date(s.startedMs).toISOString(),
    uptimeSeconds: Math.max(0, Math.floor((ctx.clock.now() - s.startedMs) / 1000)),
    ingest: s.ingest,
  };
}
