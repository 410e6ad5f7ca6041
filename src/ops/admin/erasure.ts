/**
 * Erasure (or pseudonymization) of one person from a store, as an admin action: the store the
 * actor reaches, the run (src/ops/erase.ts), and its two records, each written when the run
 * starts (before anything changes) and when it ends: the lines of LECTERN_AUDIT_FILE
 * (auditErasure: what, when, how many; never who was erased) and entries of the audit log. A dry
 * run changes nothing and records nothing.
 */
import type { Actor } from '../../xapi/types.ts';
import { auditErasure, type Erasure, type ErasureAudit, erasePerson, type ErasureRequest } from '../erase.ts';
import { OpsError } from '../errors.ts';
import { actorKindOf, type AdminActor, type AdminContext, reachableStore, recordAudit } from './roles.ts';

export interface EraseInput extends Pick<ErasureRequest, 'list' | 'signal' | 'onProgress'> {
  /** The store; not named: an operator's default store, a store administrator's own. */
  target?: string;
  /** The Agent (or identified Group). */
  person: Actor;
  dryRun: boolean;
  /** Replace the person by a pseudonym keyed with LECTERN_PSEUDONYMIZE_KEY instead of erasing. */
  pseudonymize: boolean;
}

export async function erase(ctx: AdminContext, by: AdminActor, input: EraseInput): Promise<Erasure> {
  const tenant = reachableStore(by.role, input.target);
  const key = ctx.config.pseudonymizeKey;
  if (input.pseudonymize && key === '') {
    throw new OpsError(
      'pseudonymize: this server has no LECTERN_PSEUDONYMIZE_KEY (a secret of at least 16 characters, in the environment or .env): it cannot pseudonymize',
      'bad_request',
      'pseudonymize',
    );
  }
  const { person, dryRun, list, signal, onProgress } = input;
  const request = { tenant, person, pseudonymizeKey: input.pseudonymize ? key : undefined, dryRun, list, signal, onProgress };
  if (dryRun) return erasePerson(ctx.store, request);
  const action = input.pseudonymize ? 'pseudonymize' : 'erase';
  const who = { command: `erase${input.pseudonymize ? ' --pseudonymize' : ''}`, user: by.name, userKind: actorKindOf(ctx, by), host: by.client };
  const line = (what: ErasureAudit) => auditErasure(ctx.config.auditFile, what, { ...who, time: new Date(ctx.clock.now()) });
  // Both records before anything changes: an erasure cut short (kill -9) leaves what was begun.
  line({ phase: 'start', action, target: tenant, dryRun: false });
  const started = await recordAudit(ctx, by, action, tenant, { phase: 'start', dryRun: false });
  let erasure: Erasure;
  try {
    erasure = await erasePerson(ctx.store, request);
  } catch (err) {
    // What was erased stays erased (a re-run finishes the rest): the end says the run failed.
    try {
      line({ phase: 'end', action, target: tenant, failed: true });
      await recordAudit(ctx, by, action, tenant, { phase: 'end', startId: started.id, failed: true });
    } catch {
      // The failure reported is the erasure's.
    }
    throw err;
  }
  line({ phase: 'end', ...erasure.report });
  const { target: _, ...counts } = erasure.report;
  await recordAudit(ctx, by, action, tenant, { phase: 'end', startId: started.id, ...counts });
  return erasure;
}
