/**
 * Structured logs (pino) on stdout: JSON lines, or human-readable (pino-pretty) when stdout is a
 * terminal. Request lines carry the request id (`reqId`); nothing here logs bodies or credentials.
 */
import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Header and field names whose values pino must never write, wherever a caller puts them. */
const REDACT = ['req.headers.authorization', 'headers.authorization', 'authorization', 'password', '*.password', 'hash', '*.hash'];

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  const options = { name: 'lectern', level, base: { pid: process.pid }, redact: { paths: REDACT, censor: '[redacted]' } };
  if (destination) return pino(options, destination as DestinationStream);
  if (process.stdout.isTTY) {
    // Loaded only for a terminal; synchronous so nothing is lost when the process exits.
    const pretty = createRequire(import.meta.url)('pino-pretty') as (o: Record<string, unknown>) => DestinationStream;
    return pino(options, pretty({ colorize: true, sync: true, ignore: 'pid,hostname,name', translateTime: 'SYS:HH:MM:ss.l' }));
  }
  return pino(options, process.stdout);
}
