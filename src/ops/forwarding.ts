/**
 * The forwarding outbox of a store, read and mended (safe while servers deliver from it): each
 * target's figures, its dead letters, and dead letters put back into the queue.
 */
import type { ChangeAudit, DeadLetter, ForwardingStats, Store } from '../store/types.ts';
import { OpsError } from './errors.ts';

/** A target's figures, and whether it is among the active targets (LECTERN_XAPI_FORWARDINGS). */
export interface TargetStatus extends ForwardingStats {
  active: boolean;
}

/** Every active target (even with nothing yet) and every target the outbox still holds items of. */
export async function forwardingStatus(store: Store, activeTargets: readonly string[]): Promise<TargetStatus[]> {
  const active = new Set(activeTargets);
  const byTarget = new Map((await store.outbox.stats()).map((s) => [s.target, s]));
  for (const url of active) if (!byTarget.has(url)) byTarget.set(url, { target: url, queued: 0, delivered: 0, retried: 0, dead: 0 });
  return [...byTarget.values()].map((s) => ({ ...s, active: active.has(s.target) }));
}

/**
 * Puts the dead letters of every target, or of `target`, back into the queue; returns how many.
 * A target neither active nor in the outbox is refused (OpsError 'not_found'): likely a typo.
 * With `audit`, its entry is written in the requeue's transaction.
 */
export async function retryDeadLetters(store: Store, activeTargets: readonly string[], target?: string, audit?: ChangeAudit): Promise<number> {
  if (target !== undefined && !activeTargets.includes(target) && !(await store.outbox.stats()).some((s) => s.target === target)) {
    throw new OpsError(`${target} is not an active forwarding target and the outbox holds nothing for it`, 'not_found');
  }
  return store.outbox.requeueDead(target, audit);
}

/**
 * Each target's lag: how long its oldest queued statement has waited since it was stored
 * (milliseconds, at least 0); a target with nothing queued has none (absent).
 */
export async function forwardingLags(store: Store, nowMs: number): Promise<Map<string, number>> {
  return new Map((await store.outbox.oldestQueued()).map((o) => [o.target, Math.max(0, nowMs - o.storedMs)]));
}

/** The most dead letters one page lists. */
export const DEAD_LETTER_PAGE_MAX = 1000;

/** A page of dead letters (of every target, or of `target`), oldest first, after the item `after`. */
export function listDeadLetters(store: Store, opts: { target?: string; after?: number; limit: number }): Promise<DeadLetter[]> {
  return store.outbox.deadLetters({ ...opts, limit: Math.min(Math.max(1, opts.limit), DEAD_LETTER_PAGE_MAX) });
}
