/** Structured JSON logs (pino) on stdout. */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino({ name: 'lectern', level, base: { pid: process.pid } }, destination ?? process.stdout);
}
