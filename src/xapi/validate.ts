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
import { MAX_ISSUES, type ValidationIssue } from '../errors.ts';
import { isLanguageTag } from './langtag.ts';
import type { Actor, Statement } from './types.ts';
import type { XapiVersion } from './versions.ts';
import { agentOrGroup, AS_PARAM } from './validate/actors.ts';
import { statementBody } from './validate/statement.ts';
import { type Ctx, isObject, jsonTypeName, type Loc, pathFrom, wrongType } from './validate/walk.ts';

export { isLanguageTag };
export { isDuration, isIri, isTimestamp, isUuid, parseTimestamp, timestampOutOfRange } from './validate/syntax.ts';
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
