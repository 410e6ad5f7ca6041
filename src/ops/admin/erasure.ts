/**
 * Erasure (or pseudonymization) of one person from a store, as an admin action: the store the
 * actor reaches, the run (src/ops/erase.ts), and, when it changed the store, its two records: the
 * line of LECTERN_AUDIT_FILE (auditErasure: what, when, how many; never who was erased) and an
 * entry of the audit log. A dry run changes nothing and records nothing.
 */
import type { Actor } from '../../xapi/types.ts';
import { auditErasure, type Erasure, erasePerson, type ErasureRequest } from '../erase.ts';
import { OpsError } from '../errors.ts';
import { type AdminActor, type AdminContext, reachableStore, recordAudit } from './roles.ts';

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
    throw new OpsError('pseudonymize: this server has no LECTERN_PSEUDONYMIZE_KEY (a secret of at least 16 characters, in the environment or .env): it cannot pseudonymize', 'bad_request', 'pseudonymize');
  }
  const { person, dryRun, list, signal, onProgress } = input;
  const erasure = await erasePerson(ctx.store, { tenant, person, pseudonymizeKey: input.pseudonymize ? key : undefined, dryRun, list, signal, onProgress });
  if (!dryRun) {
    const time = new Date(ctx.clock.now());
    auditErasure(ctx.config.auditFile, erasure.report, { command: `erase${input.pseudonymize ? ' --pseudonymize' : ''}`, user: by.name, host: by.client, time });
    const { target: _, ...counts } = erasure.report;
    await recordAudit(ctx, by, erasure.report.action, tenant, counts);
  }
  return erasure;
}
