/**
 * The console sessions signed out before their expiry (SessionStore in ./types.ts), once for every
 * backend as programs (./program.ts, run by ./shared.ts): the same SQL on both. A session is a
 * sealed cookie that any process accepts, so a copy of it would outlive its sign-out; a row here
 * refuses it on every process sharing the database. A row is of no use past the session's own
 * expiry (the cookie is refused then anyway), so each sign-out deletes the rows past theirs.
 */
import { type Program, row, run } from './program.ts';

/** In a transaction: records the session as ended (once), and deletes the rows of sessions past their expiry. */
export function* endSession(id: string, expiresMs: number, nowMs: number): Program<void> {
  yield* run({ text: 'INSERT INTO ended_sessions (id, expires_ms) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', values: [id, expiresMs] });
  yield* run({ text: 'DELETE FROM ended_sessions WHERE expires_ms <= $1', values: [nowMs] });
}

export function* sessionEnded(id: string): Program<boolean> {
  return (yield* row({ text: 'SELECT 1 AS ended FROM ended_sessions WHERE id = $1', values: [id] })) !== undefined;
}
