/**
 * PostgreSQL's advisory lock keys: how processes sharing the database keep their migrations,
 * statement writes, document writes and background jobs apart.
 */
import { createHash } from 'node:crypto';

/** Advisory lock namespaces (the first int4 of the two-key form; shows as pg_locks.classid). */
export const LOCK_MIGRATE = 0x4c450001;
export const LOCK_STATEMENTS = 0x4c450002;
export const LOCK_DOCUMENT = 0x4c450003;
/** Shared, by each statement group from its first read to its commit (see consistentThrough). */
export const LOCK_INTENT = 0x4c450004;
/** Background jobs one process at a time (retention), the job's name hashed as the second key. */
export const LOCK_JOB = 0x4c450005;

/** A stable non-negative int4 for an advisory lock key (pg_locks shows it as objid). */
export const lockKey = (...parts: string[]): number => createHash('sha256').update(JSON.stringify(parts)).digest().readInt32BE(0) & 0x7fffffff;

/** A tenant's statement lock key, asked by every statement request (Consistent-Through) and write. */
const tenantKeys = new Map<string, number>();
export const tenantLockKey = (tenant: string): number => {
  let key = tenantKeys.get(tenant);
  if (key === undefined) {
    if (tenantKeys.size >= 10_000) tenantKeys.clear();
    tenantKeys.set(tenant, (key = lockKey(tenant)));
  }
  return key;
};
