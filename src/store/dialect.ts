/**
 * Everything that differs in a backend's SQL, as one object per backend (`sqlite/dialect.ts`,
 * `postgres/dialect.ts`): the statement queries' fragments, and the steps of the shared programs
 * that cannot be the same text on both (a document write's lock and clock, the outbox's claims
 * and batches, the reach rows' reads and writes, the keys' names). Every other shared program is one SQL text for
 * both backends, its placeholders spelled `$n` (./program.ts).
 */
import type { DocumentDialect } from './documents.ts';
import type { KeysDialect } from './keys.ts';
import type { OutboxDialect } from './outbox.ts';
import type { ReachDialect } from './reach.ts';
import type { QueryDialect } from './sql.ts';

export interface StoreDialect {
  /** The statement queries' fragments (./sql.ts). */
  readonly query: QueryDialect;
  /** The document resources' lock, clock and scan order (./documents.ts). */
  readonly documents: DocumentDialect;
  /** The forwarding outbox's claims, settlements and figures (./outbox.ts). */
  readonly outbox: OutboxDialect;
  /** The StatementRef reach rows' reads and writes (./reach.ts). */
  readonly reach: ReachDialect;
  /** The keys dictionary's searches: an agent's newest statement, an activity's definition (./keys.ts). */
  readonly keys: KeysDialect;
}
