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
 * The server's name does not resolve: getaddrinfo's ENOTFOUND (no such name) stays so, unlike
 * EAI_AGAIN (the resolver did not answer), which start-up retries as it does a refused connection.
 */
export const isUnknownHost = (err: unknown): boolean => {
  const e = err as PgLikeError | null;
  return e?.code === 'ENOTFOUND' || (Array.isArray(e?.errors) && e.errors.some(isUnknownHost));
};

/** host:port of a connection URL, for the lines that say what start-up waits for (never the user or password). */
export function serverOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || u.searchParams.get('host') || 'localhost'}:${u.port || '5432'}`;
  } catch {
    return 'the configured server';
  }
}

/** Why start-up waits, in words: a refused connection, no answer in time, or the error itself. */
export function waitReason(err: unknown, connectTimeoutMs: number): string {
  const e = err as PgLikeError;
  const codes = [e.code, ...(Array.isArray(e.errors) ? e.errors.map((x) => (x as PgLikeError).code) : [])];
  if (codes.includes('ECONNREFUSED')) return 'connection refused';
  if (codes.includes('ETIMEDOUT') || /timeout exceeded when trying to connect/i.test(e.message ?? '')) return `no answer within ${connectTimeoutMs} ms`;
  if (codes.includes('EAI_AGAIN')) return 'its host name could not be looked up (EAI_AGAIN)';
  if (codes.includes('EHOSTUNREACH') || codes.includes('ENETUNREACH')) return 'no route to the host';
  return describe(err);
}

/**
 * A start-up failure that retrying cannot mend, in one line: what happened at `where` (the URL,
 * password masked, and what names it) and what to check in `name`.
 */
export function refusal(err: unknown, where: string, name: string): string {
  const e = err as PgLikeError;
  if (isUnknownHost(err)) {
    const host = /ENOTFOUND (\S+)/.exec(describe(err))?.[1] ?? 'of the URL';
    return `PostgreSQL at ${where}: unknown host ${host} (${describe(err)}); check the host name in ${name} (an unknown host is not retried)`;
  }
  const check =
    e.code === '28P01'
      ? `check the user and password in ${name} (or PGPASSWORD)`
      : e.code === '28000'
        ? `check the user in ${name} and the server's pg_hba.conf`
        : /SSL|TLS|certificate/i.test(`${e.message ?? ''} ${e.code ?? ''}`)
          ? `check sslmode in ${name} and the server's TLS set-up`
          : `check ${name}`;
  return `PostgreSQL at ${where} refused the connection: ${describe(err)}; ${check} (not retried)`;
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
