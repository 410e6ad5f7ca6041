/**
 * The xAPI statement validator (xAPI-Data §2.2, §2.4, §4; 9274.1.1 §4.2), for the request's
 * version (the only differences: 2.0's contextAgents/contextGroups and statement versions). It
 * reports every problem it finds with a precise location, and returns deep, normalised copies of
 * the statements (a single context activity becomes a one-element array, §2.4.6.2.s4.b3).
 *
 * Every issue's `loc` is the path to the offending value (for a missing property, the path to
 * where it belongs); for statements it starts with the index of the statement in the batch.
 *
 * The parts, in validate/: syntax.ts (the value formats, plain predicates), walk.ts (issues, the
 * checks of single values, and the one walker over an object's keys driven by a table of fields
 * per object type), actors.ts (Agents and Groups), activities.ts (Activities and interactions),
 * statement.ts (statements and the rest). On the write path: one pass over each object's own keys,
 * a shared path stack copied only when an issue is reported, no regex compiled at run time, no
 * try/catch, no JSON round-trips.
 */
import { MAX_ISSUES, MORE_ISSUES, type ValidationIssue } from '../errors.ts';
import { isLanguageTag } from './langtag.ts';
import { type Actor, SIGNATURE_USAGE_TYPE, type Statement } from './types.ts';
import type { XapiVersion } from './versions.ts';
import { activityBody } from './validate/activities.ts';
import { agentOrGroup, AS_PARAM } from './validate/actors.ts';
import { minimalStatement } from './validate/minimal.ts';
import { statementBody } from './validate/statement.ts';
import { copyJson, type Ctx, isObject, jsonTypeName, type Loc, MAX_JSON_DEPTH, pathFrom, TOO_DEEP, wrongType } from './validate/walk.ts';

export { isLanguageTag };
export { GIVEN_TIME, givenTimeError, isDuration, isIri, isTimestamp, isUuid, parseGivenTime, parseTimestamp, timestampOutOfRange } from './validate/syntax.ts';
export { type Loc, MAX_JSON_DEPTH } from './validate/walk.ts';

/**
 * Validates one statement (not a SubStatement) at `loc`, appending problems to `issues` up to
 * MAX_ISSUES and counting the others in `dropped`. Returns a normalised deep copy (meaningful only
 * when no issue was found), or undefined when `value` is not an object.
 */
export function validateStatement(value: unknown, loc: Loc, issues: ValidationIssue[], version: XapiVersion, dropped = { count: 0 }): Statement | undefined {
  const c: Ctx = { path: pathFrom(loc), issues, dropped, version };
  if (!isObject(value)) {
    wrongType(c, value, 'object', 'a Statement object');
    return undefined;
  }
  return statementBody(c, value, false) as unknown as Statement;
}

/**
 * Validates a POST/PUT body: one statement or an array of statements. Returns the statements
 * (normalised where the spec allows, e.g. a single context activity becomes an array) and every
 * problem found, each `loc` starting with the statement's index in the batch (0 for a single
 * statement). Two statements of a batch with the same id are reported too (Communication
 * §2.1.2.s2.b6). When there are issues, `statements` is not meaningful. At most MAX_ISSUES are
 * listed: `more` counts the problems found beyond them.
 */
export function validateStatements(body: unknown, version: XapiVersion): { statements: Statement[]; issues: ValidationIssue[]; more: number } {
  const issues: ValidationIssue[] = [];
  const dropped = { count: 0 };
  if (Array.isArray(body)) {
    const statements = new Array<Statement>(body.length);
    let ids: Map<string, number> | undefined;
    for (let i = 0; i < body.length; i++) {
      const s = validateStatement(body[i], [i], issues, version, dropped);
      statements[i] = s as Statement;
      const id = s?.id;
      if (id !== undefined && body.length > 1) {
        ids ??= new Map();
        const key = id.toLowerCase();
        const first = ids.get(key);
        if (first === undefined) ids.set(key, i);
        else if (issues.length >= MAX_ISSUES) dropped.count++;
        else issues.push({ loc: [i, 'id'], msg: `duplicate statement id in batch (same as statement ${first})`, type: 'value_error.duplicate' });
      }
    }
    return { statements, issues, more: dropped.count };
  }
  if (isObject(body)) {
    const s = validateStatement(body, [0], issues, version, dropped);
    return { statements: s ? [s] : [], issues, more: dropped.count };
  }
  issues.push({
    loc: [],
    msg: `the body must be a Statement object or an array of Statements, got ${jsonTypeName(body)}`,
    type: 'type_error.object',
  });
  return { statements: [], issues, more: 0 };
}

/** The rules a statement accepted under lax validation broke (loc relative to the statement; `type` is the rule). */
export type Violations = ValidationIssue[];

/**
 * {@link validateStatements} under lax validation (docs/validation.md): a statement that meets the
 * minimal form (validate/minimal.ts) is accepted even when it breaks other rules, exactly as sent
 * (a deep copy, not the validator's normalised one), with what it broke in `violations` (same
 * index; undefined for a statement that broke nothing). `issues` are what lax never accepts.
 * A batch every statement of which is valid costs what strict costs: the rest runs only on a
 * batch with problems.
 */
export function validateStatementsLax(
  body: unknown,
  version: XapiVersion,
): { statements: Statement[]; violations: (Violations | undefined)[]; issues: ValidationIssue[]; more: number } {
  const strict = validateStatements(body, version);
  if (strict.issues.length === 0 || (!Array.isArray(body) && !isObject(body))) return { ...strict, violations: [] };
  const items: unknown[] = Array.isArray(body) ? body : [body];
  const issues: ValidationIssue[] = [];
  const dropped = { count: 0 };
  const statements = new Array<Statement>(items.length);
  const violations = new Array<Violations | undefined>(items.length);
  const ids = new Map<string, number>();
  for (let i = 0; i < items.length; i++) {
    // Each statement on its own: a batch's MAX_ISSUES must not hide one statement's violations.
    const own: ValidationIssue[] = [];
    const ownMore = { count: 0 };
    const valid = validateStatement(items[i], [], own, version, ownMore);
    const before = issues.length + dropped.count;
    let s: Statement | undefined;
    if (own.length === 0) s = valid;
    else {
      minimalStatement({ path: pathFrom([i]), issues, dropped, version }, items[i]);
      const copy = copyJson(items[i], 0);
      if (copy === TOO_DEEP || own.some((x) => x.type === 'value_error.too_deep')) {
        issues.push({ loc: [i], msg: `the statement is nested too deeply (more than ${MAX_JSON_DEPTH} levels)`, type: 'value_error.too_deep' });
      }
      const item = items[i];
      if (isObject(item) && signed(item)) {
        issues.push({
          loc: [i, 'attachments'],
          msg: 'a signed statement must be valid: it is checked against its signature as under strict validation',
          type: 'value_error.signed',
        });
      }
      s = copy as Statement;
      if (ownMore.count > 0) own.push({ loc: [], msg: `and ${ownMore.count} more problem${ownMore.count === 1 ? '' : 's'} not listed`, type: MORE_ISSUES });
      violations[i] = own;
    }
    if (issues.length + dropped.count > before || !s) continue;
    statements[i] = s;
    // Communication §2.1.2.s2.b6: one id twice in a batch, under lax as under strict.
    const id = typeof s.id === 'string' ? s.id.toLowerCase() : undefined;
    if (id !== undefined && items.length > 1) {
      const first = ids.get(id);
      if (first === undefined) ids.set(id, i);
      else issues.push({ loc: [i, 'id'], msg: `duplicate statement id in batch (same as statement ${first})`, type: 'value_error.duplicate' });
    }
  }
  return { statements, violations, issues, more: dropped.count };
}

/** Whether an activity definition (an object) breaks no rule: only such a definition, under lax, (re)defines the canonical Activity. */
export function isValidDefinition(definition: object, version: XapiVersion): boolean {
  const c: Ctx = { path: [], issues: [], dropped: { count: 0 }, version };
  activityBody(c, { id: 'urn:x', definition });
  return c.issues.length === 0;
}

/** Whether a statement declares a signature (only called on a statement whose attachments are valid). */
const signed = (s: Record<string, unknown>): boolean => Array.isArray(s.attachments) && s.attachments.some((a) => isObject(a) && a.usageType === SIGNATURE_USAGE_TYPE);

/**
 * Validates the `agent` query parameter value (already JSON-parsed): an Agent, or an identified
 * Group (exactly one inverse functional identifier). Returns a normalised copy (meaningful only
 * when no issue was added).
 */
export function validateAgentParam(value: unknown, loc: Loc, issues: ValidationIssue[]): Actor | undefined {
  // An agent parameter is the same under every version.
  const c: Ctx = { path: pathFrom(loc), issues, dropped: { count: 0 }, version: '1.0.3' };
  if (!isObject(value)) {
    wrongType(c, value, 'object', 'an Agent or identified Group JSON object');
    return undefined;
  }
  return agentOrGroup(c, value, AS_PARAM) as Actor | undefined;
}
