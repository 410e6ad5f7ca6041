/**
 * Telling "the database is unreachable" apart from bugs: the former become 503 (LrsError
 * 'unavailable') and heal by themselves when PostgreSQL returns; the latter stay 500s.
 */
import { LrsError } from '../../errors.ts';

interface PgLikeError {
  code?: string;
  message?: string;
  errors?: unknown[];
}

/** Node socket errors meaning the server cannot be reached or went away. */
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED']);

/**
 * SQLSTATEs of an unavailable server: class 08 (connection exception), shutdown/recovery (57P01-57P03),
 * too many connections (53300), statement_timeout or lock wait cancelled (57014), read-only
 * standby after a fail-over (25006).
 */
const SQLSTATE_UNAVAILABLE = /^(08...|57P0[1-4]|53300|57014|25006)$/;

/** pg's own messages for a client whose socket died or that could not get a connection in time. */
const PG_MESSAGES = /Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|is not queryable|Query read timeout/i;

export function isUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as PgLikeError;
  if (e.code && (NET_CODES.has(e.code) || SQLSTATE_UNAVAILABLE.test(e.code))) return true;
  if (Array.isArray(e.errors) && e.errors.some(isUnavailable)) return true; // AggregateError: every address failed
  return typeof e.message === 'string' && PG_MESSAGES.test(e.message);
}

/** One line saying what went wrong, even for AggregateErrors whose own message is empty. */
export function describe(err: unknown): string {
  if (typeof err !== 'object' || err === null) return String(err);
  const e = err as PgLikeError;
  if (Array.isArray(e.errors) && e.errors.length && !e.message) return e.errors.map(describe).join('; ');
  const msg = (e.message ?? '').split('\n')[0];
  return e.code && !msg.includes(e.code) ? `${msg || 'error'} (${e.code})` : msg || String(err);
}

/**
 * SQLSTATE 53100 (disk_full): PostgreSQL could not extend a file. The connection is sound and the
 * transaction rolled back; writes succeed again once the disk has room.
 */
export const isDiskFull = (err: unknown): boolean => (err as PgLikeError | null)?.code === '53100';

/**
 * Maps connection-level failures and a full disk to a 503 (the cause goes to the log, not to
 * clients: it names hosts, ports and files); everything else passes through unchanged.
 */
export function toLrsError(err: unknown): unknown {
  if (err instanceof LrsError) return err;
  if (isUnavailable(err)) return new LrsError('unavailable', 'the database is unavailable; try again later');
  if (isDiskFull(err)) return new LrsError('unavailable', 'the LRS cannot write to its database right now (its disk is full): nothing of this request was stored; try again later');
  return err;
}

/** SQLSTATEs after which the whole transaction may simply run again. */
export const isRetryable = (err: unknown): boolean => {
  const code = (err as PgLikeError | null)?.code;
  return code === '40001' || code === '40P01' || code === '23505';
};
