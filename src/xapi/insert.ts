/**
 * The statement insert rules (Communication §2.1.1, §2.1.2; Data §2.3.2), once for every backend:
 * given a batch and what the store already holds for it, decide what to write. Each backend only
 * reads the rows `rowsToRead` names and writes the plan, in one transaction.
 */
import { LrsError } from '../errors.ts';
import type { AttachmentBlob } from './attachments.ts';
import { type PreparedStatement, sameStatement, stamp, type StampedStatement } from './statement.ts';
import type { Statement } from './types.ts';

/** A statement the store holds (or one an earlier request of the same transaction was granted). */
export interface KnownStatement {
  isVoiding: boolean;
  /** As stored (LRS-set properties included). */
  statement: Statement;
}

export interface InsertOutcome {
  /** Ids in input order; each was inserted now or was already stored with the same content. */
  ids: string[];
  /** How many of them were new. */
  inserted: number;
}

export interface InsertPlan {
  outcome: InsertOutcome;
  /** Statements to store, in batch order, as served, with their voided flag. */
  fresh: { p: PreparedStatement; full: StampedStatement; voided: boolean }[];
  /**
   * Ids the new voiding statements void: stored rows to flag (never a voiding one), and rows
   * written in the same transaction when they are written in one statement with this plan.
   */
  voids: string[];
  /** Attachment data to keep: only what a newly stored statement points to, so a re-sent statement leaves no orphan. */
  attachments: AttachmentBlob[];
}

/** The ids whose stored rows the decision needs: the batch's own ids and the targets of its voiding statements. */
export const rowsToRead = (batch: PreparedStatement[]): string[] => [...new Set(batch.flatMap((p) => (p.voids ? [p.id, p.voids] : [p.id])))];

/**
 * Decides one request:
 * - an id already stored: a no-op when the statement is the same by the comparison rules of its
 *   version, 409 otherwise (nothing of the batch is stored);
 * - a statement voiding a voiding statement (stored, or in the batch): 400;
 * - a statement a stored voiding statement already targets (`voidedEarlier`) arrives voided, and
 *   so does one a statement of the same batch voids;
 * - a voiding statement whose target is unknown is accepted (it voids the target when it comes).
 * `known` maps the ids of `rowsToRead(batch)` the store has; `stored` is the batch's `stored`.
 */
export function planInsert(
  batch: PreparedStatement[],
  attachments: AttachmentBlob[],
  known: ReadonlyMap<string, KnownStatement>,
  voidedEarlier: ReadonlySet<string>,
  stored: string,
): InsertPlan {
  const voidingInBatch = new Set(batch.filter((p) => p.voids).map((p) => p.id));
  const accepted: PreparedStatement[] = [];
  for (const p of batch) {
    const existing = known.get(p.id);
    if (existing) {
      if (!sameStatement(p.statement, existing.statement, p.xapiVersion)) throw new LrsError('conflict', `a different statement with id ${p.id} is already stored`);
      continue;
    }
    if (p.voids && (known.get(p.voids)?.isVoiding || voidingInBatch.has(p.voids))) {
      throw new LrsError('bad_request', `statement ${p.id} voids ${p.voids}, which is itself a voiding statement and cannot be voided`);
    }
    accepted.push(p);
  }
  const voidedNow = new Set(accepted.flatMap((p) => (p.voids ? [p.voids] : [])));
  const linked = new Set(accepted.flatMap((p) => p.attachmentHashes));
  return {
    outcome: { ids: batch.map((p) => p.id), inserted: accepted.length },
    fresh: accepted.map((p) => ({ p, full: stamp(p, stored), voided: !p.voids && (voidedEarlier.has(p.id) || voidedNow.has(p.id)) })),
    voids: [...voidedNow],
    attachments: attachments.filter((a) => linked.has(a.sha2)),
  };
}
