/**
 * What a statement stored under lax validation broke (docs/validation.md): the rules recorded
 * with it when it was accepted, for `lectern violations` and, next, the admin API and console.
 */
import type { ValidationIssue } from '../errors.ts';
import type { Store } from '../store/types.ts';
import { isUuid } from '../xapi/validate.ts';
import { OpsError } from './errors.ts';

export interface StatementViolations {
  id: string;
  /** The store (tenant): '' for the default store. */
  target: string;
  /** Each rule the statement broke: `type` the rule, `loc` where, `msg` what (empty: it broke none). */
  violations: ValidationIssue[];
}

/** The violations of the statement `id` in the store `target`; OpsError when it is not stored there. */
export async function statementViolations(store: Store, target: string, id: string): Promise<StatementViolations> {
  if (!isUuid(id)) throw new OpsError(`a statement id is a UUID, got ${JSON.stringify(id)}`);
  const violations = await store.statementViolations(target, id.toLowerCase());
  if (violations === undefined) throw new OpsError(`no statement ${id} is stored${target ? ` in the store ${target}` : ''}`, 'not_found');
  return { id: id.toLowerCase(), target, violations };
}
