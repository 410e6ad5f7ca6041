/**
 * The admin actions on forwarding (docs/forwarding.md): the outbox is shared by every store, so
 * each is the operator's. The targets as configured (never a secret), its figures per target,
 * each target's lag, the dead letters, and a retry that puts dead letters back in the queue
 * (audited).
 */
import { activeTargets } from '../../forwarding/config.ts';
import type { DeadLetter } from '../../store/types.ts';
import * as outbox from '../forwarding.ts';
import type { TargetStatus } from '../forwarding.ts';
import { type AdminActor, type AdminContext, changeAudit, requireOperator } from './roles.ts';

/** A forwarding target as configured (LECTERN_XAPI_FORWARDINGS), without its password. */
export interface ConfiguredTarget {
  url: string;
  active: boolean;
  /** Statements sent in one POST (LECTERN_XAPI_FORWARDING_BATCH_SIZE, every target's). */
  batchSize: number;
  maxRetries: number;
  timeoutSeconds: number;
  /** How the target is authenticated: HTTP Basic (the only kind the format has), as this username. */
  auth: { kind: 'basic'; username: string };
}

/** The targets as the server's settings configure them, in their order, the inactive ones too; never a password. */
export function configuredTargets(ctx: AdminContext, by: AdminActor): ConfiguredTarget[] {
  requireOperator(by.role, 'forwarding');
  return ctx.config.xapiForwardings.map((t) => ({
    url: t.url,
    active: t.isActive,
    batchSize: ctx.config.forwardingBatchSize,
    maxRetries: t.maxRetries,
    timeoutSeconds: t.timeoutSeconds,
    auth: { kind: 'basic', username: t.username },
  }));
}

/** Every active target (even with nothing yet) and every target the outbox still holds items of. */
export function forwardingStatus(ctx: AdminContext, by: AdminActor): Promise<TargetStatus[]> {
  requireOperator(by.role, 'forwarding');
  return outbox.forwardingStatus(ctx.store, activeTargets(ctx.config.xapiForwardings));
}

/** Each target's lag (ms): how long its oldest queued statement has waited; absent when nothing is queued. */
export function forwardingLags(ctx: AdminContext, by: AdminActor): Promise<Map<string, number>> {
  requireOperator(by.role, 'forwarding');
  return outbox.forwardingLags(ctx.store, ctx.clock.now());
}

/** A page of dead letters (of every target, or of `url`), oldest first, after the item `after`. */
export function listDeadLetters(ctx: AdminContext, by: AdminActor, input: { url?: string; after?: number; limit: number }): Promise<DeadLetter[]> {
  requireOperator(by.role, 'forwarding');
  return outbox.listDeadLetters(ctx.store, { target: input.url, after: input.after, limit: input.limit });
}

/** Puts the dead letters of every target, or of `url`, back into the queue; how many. A url neither active nor in the outbox: not_found. */
export async function retryDeadLetters(ctx: AdminContext, by: AdminActor, input: { url?: string }): Promise<number> {
  requireOperator(by.role, 'forwarding');
  const audit = changeAudit(ctx, by, 'forwarding.retry', null, { ...(input.url !== undefined && { url: input.url }) }, 'requeued');
  return outbox.retryDeadLetters(ctx.store, activeTargets(ctx.config.xapiForwardings), input.url, audit);
}
