/**
 * The statement insert rules (Communication §2.1.1, §2.1.2; Data §2.3.2), once for every backend:
 * given a batch and what the store already holds for it, decide what to write. Each backend only
 * reads the rows `rowsToRead` names and writes the plan, in one transaction.
 */
import { LrsError } from '../errors.ts';
import { actorKeys } from './agents.ts';
import type { AttachmentBlob } from './attachments.ts';
import { type PreparedStatement, sameStatement, stamp, type StampedStatement } from './statement.ts';
import type { Statement } from './types.ts';

/** A statement the store holds (or one an earlier request of the same transaction was granted). */
export interface KnownStatement {
  isVoiding: boolean;
  /** As stored (LRS-set properties included). */
  statement: Statement;
}

/** A stored voiding statement whose target had not arrived: who wrote it, and whether that writer could read every statement. */
export interface EarlierVoiding {
  /** Its authority's key (statements.authority). */
  authorityKey: string | null;
  /** Written by a writer restricted to its own statements (PreparedStatement.mineOnly): it voids only a statement of its own authority. */
  mineOnly: boolean;
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
  /** Attachment data to keep: only what a newly stored statement carried, so a re-sent statement leaves no orphan. */
  attachments: AttachmentBlob[];
}

/** The ids whose stored rows the decision needs: the batch's own ids and the targets of its voiding statements. */
export const rowsToRead = (batch: PreparedStatement[]): string[] => [...new Set(batch.flatMap((p) => (p.voids ? [p.id, p.voids] : [p.id])))];

/** The authority key of a stored statement, as prepareStatement computed it when it was stored. */
const authorityOf = (s: Statement): string | null => (s.authority ? (actorKeys(s.authority)[0] ?? null) : null);

/**
 * Decides one request:
 * - an id already stored: a no-op when the statement is the same by the comparison rules of its
 *   version, 409 otherwise (nothing of the batch is stored);
 * - a statement voiding a voiding statement (stored, or in the batch): 400;
 * - a statement a stored voiding statement already targets (`voidedEarlier`) arrives voided, and
 *   so does one a statement of the same batch voids;
 * - a voiding statement whose target is unknown is accepted (it voids the target when it comes).
 *
 * A writer restricted to its own statements (`mineOnly`: it may not read another authority's)
 * learns nothing of another authority's statements beyond what store-wide ids make inherent: an
 * id stored by another authority is 409 whatever the content (no comparison, so no content
 * oracle; that the id is taken shows, as it must), and voiding such a statement is 403. Its
 * voiding statement stored before its target arrives voids the target only if the target is of
 * its own authority (`EarlierVoiding`).
 * `known` maps the ids of `rowsToRead(batch)` the store has; `stored` is the batch's `stored`.
 */
export function planInsert(
  batch: PreparedStatement[],
  attachments: AttachmentBlob[],
  known: ReadonlyMap<string, KnownStatement>,
  voidedEarlier: ReadonlyMap<string, readonly EarlierVoiding[]>,
  stored: string,
): InsertPlan {
  const voidingInBatch = new Set(batch.filter((p) => p.voids).map((p) => p.id));
  const accepted: PreparedStatement[] = [];
  for (const p of batch) {
    const existing = known.get(p.id);
    if (existing) {
      if (p.mineOnly && authorityOf(existing.statement) !== p.authorityKey) {
        throw new LrsError('conflict', `the id ${p.id} is taken by a statement of another authority`);
      }
      if (!sameStatement(p.statement, existing.statement, p.xapiVersion)) throw new LrsError('conflict', `a different statement with id ${p.id} is already stored`);
      continue;
    }
    const target = p.voids ? known.get(p.voids) : undefined;
    if (target && p.mineOnly && authorityOf(target.statement) !== p.authorityKey) {
      throw new LrsError('forbidden', `statement ${p.id} voids ${p.voids}, a statement of another authority: this user may void only its own statements`);
    }
    if (p.voids && (target?.isVoiding || voidingInBatch.has(p.voids))) {
      throw new LrsError('bad_request', `statement ${p.id} voids ${p.voids}, which is itself a voiding statement and cannot be voided`);
    }
    accepted.push(p);
  }
  const voidedNow = new Set(accepted.flatMap((p) => (p.voids ? [p.voids] : [])));
  const linked = new Set(accepted.flatMap((p) => p.carried));
  // A restricted writer's voiding statement voids only its own authority's statements.
  const voidedBefore = (p: PreparedStatement) => (voidedEarlier.get(p.id) ?? []).some((v) => !v.mineOnly || v.authorityKey === p.authorityKey);
  return {
    outcome: { ids: batch.map((p) => p.id), inserted: accepted.length },
    fresh: accepted.map((p) => ({ p, full: stamp(p, stored), voided: !p.voids && (voidedBefore(p) || voidedNow.has(p.id)) })),
    voids: [...voidedNow],
    attachments: attachments.filter((a) => linked.has(a.sha2)),
  };
}
