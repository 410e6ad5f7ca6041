/**
 * Statements and SubStatements (xAPI-Data §2.4) and what only they hold: verbs, statement
 * references, results, contexts (2.0's contextAgents/contextGroups included) and attachments.
 * Each object type is a table of fields walked by walk.ts; what a table cannot say (which type
 * the statement's object is, the voiding rule, the score's range) is a function next to it.
 */
import { VOIDED_VERB } from '../types.ts';
import { acceptsStatementVersion, statementVersionHint } from '../versions.ts';
import { activity, activityBody } from './activities.ts';
import { actor, agentOrGroup, AS_ACTOR, AS_AUTHORITY, AS_CONTEXT_AGENT, AS_CONTEXT_GROUP, AS_OBJECT, AS_TEAM } from './actors.ts';
import { isDuration, isMediaType, isSha2Hex } from './syntax.ts';
import {
  type Check,
  type Ctx,
  type J,
  BOOLEAN,
  copy,
  EXTENSIONS,
  fields,
  forbidden,
  format,
  IRI,
  iri,
  IRL,
  isObject,
  LANGUAGE_MAP,
  LANGUAGE_TAG,
  list,
  missing,
  num,
  NUMBER,
  object,
  OMIT,
  report,
  reportAt,
  str,
  STRING,
  TIMESTAMP,
  UUID,
  walk,
  wrongType,
} from './walk.ts';

/** A string that must be exactly `value` (an objectType). */
const literal =
  (value: string): Check<unknown> =>
  (c, x) => {
    if (x === value) return x;
    if (str(c, x)) report(c, `must be "${value}"`, 'value_error.enum');
    return OMIT;
  };

// ---------------------------------------------------------------------------------------------
// Verb (§2.4.3), statement references and the statement's object (§2.4.4)
// ---------------------------------------------------------------------------------------------

const VERB = fields({ id: { check: IRI, required: true }, display: LANGUAGE_MAP });

const STATEMENT_REF = fields({
  objectType: { check: literal('StatementRef'), required: 'a Statement Reference must have "objectType": "StatementRef"' },
  id: { check: UUID, required: true },
});

const OBJECT_TYPES = 'Activity, Agent, Group, StatementRef, SubStatement';

function statementObject(c: Ctx, v: unknown, inSub: boolean): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const t = v.objectType;
  switch (t) {
    case undefined:
    case 'Activity':
      return activityBody(c, v);
    case 'Agent':
    case 'Group':
      return agentOrGroup(c, v, AS_OBJECT);
    case 'StatementRef':
      return walk(c, v, STATEMENT_REF, undefined);
    case 'SubStatement':
      if (inSub) {
        reportAt(c, 'objectType', 'a SubStatement must not contain a SubStatement', 'value_error.not_allowed');
        return undefined;
      }
      return statementBody(c, v, true);
    default:
      c.path.push('objectType');
      if (typeof t !== 'string') wrongType(c, t, 'string');
      else report(c, `must be one of ${OBJECT_TYPES}`, 'value_error.enum');
      c.path.pop();
      return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Result (§2.4.5)
// ---------------------------------------------------------------------------------------------

const SCORE = fields(
  {
    scaled: (c, x) => {
      if (!num(c, x)) return OMIT;
      if (x < -1 || x > 1) report(c, 'must be between -1 and 1 inclusive', 'value_error.range');
      return x;
    },
    raw: NUMBER,
    min: NUMBER,
    max: NUMBER,
  },
  {
    rules: (c, _v, out) => {
      const { raw, min, max } = out as { raw?: number; min?: number; max?: number };
      if (min !== undefined && max !== undefined && !(min < max)) {
        reportAt(c, 'max', `max (${max}) must be greater than min (${min})`, 'value_error.range');
      }
      if (raw !== undefined) {
        if (min !== undefined && raw < min) reportAt(c, 'raw', `raw (${raw}) must not be less than min (${min})`, 'value_error.range');
        if (max !== undefined && raw > max) reportAt(c, 'raw', `raw (${raw}) must not be greater than max (${max})`, 'value_error.range');
      }
    },
  },
);

const RESULT = fields({
  score: object(SCORE),
  success: BOOLEAN,
  completion: BOOLEAN,
  response: STRING,
  duration: format(isDuration, 'must be an ISO 8601 duration such as "PT4H35M59.14S", "P3Y1M29D" or "P4W"', 'duration'),
  extensions: EXTENSIONS,
});

// ---------------------------------------------------------------------------------------------
// Context (§2.4.6; 9274.1.1 §4.2.2.5 for contextAgents and contextGroups)
// ---------------------------------------------------------------------------------------------

/** A context activity: an array of Activities, or one, always returned as an array (§2.4.6.2.s4.b3). */
const contextActivityList: Check<unknown> = (c, x) => {
  if (Array.isArray(x)) {
    const arr = new Array<unknown>(x.length);
    for (let i = 0; i < x.length; i++) {
      c.path.push(i);
      arr[i] = activity(c, x[i]);
      c.path.pop();
    }
    return arr;
  }
  if (isObject(x)) return [activityBody(c, x)];
  wrongType(c, x, 'array', 'an Activity object or an array of Activity objects');
  return OMIT;
};

const CONTEXT_ACTIVITIES = fields(
  { parent: contextActivityList, grouping: contextActivityList, category: contextActivityList, other: contextActivityList },
  { unknown: 'extra field not permitted (contextActivities keys are parent, grouping, category and other)' },
);

/** relevantTypes: a non-empty array of IRIs; the invalid ones are left out. */
const RELEVANT_TYPES: Check<unknown> = (c, y) => {
  if (!Array.isArray(y)) wrongType(c, y, 'array', 'an array of IRIs');
  else if (y.length === 0) report(c, 'relevantTypes, when present, must list at least one IRI', 'value_error.empty');
  else {
    const types: unknown[] = [];
    y.forEach((t, j) => {
      c.path.push(j);
      if (iri(c, t)) types.push(t);
      c.path.pop();
    });
    return types;
  }
  return OMIT;
};

/** An array of contextAgent or contextGroup objects (an item that is not an object leaves a hole). */
function contextActors(objectType: string, member: string, as: typeof AS_CONTEXT_AGENT | typeof AS_CONTEXT_GROUP): Check<unknown> {
  const item = fields({
    objectType: { check: literal(objectType), required: `must be "${objectType}"` },
    [member]: { check: actor(as), required: true },
    relevantTypes: RELEVANT_TYPES,
  });
  return list((c, x) => {
    if (isObject(x)) return walk(c, x, item, undefined);
    wrongType(c, x, 'object', `a ${objectType} object`);
    return OMIT;
  }, `an array of ${objectType} objects`);
}

/** Revision and platform: only when the statement's object is an Activity (the walk's state says it is not). */
const activityOnly: Check<boolean> = (c, x, objectIsNotActivity, k) => {
  if (!str(c, x)) return OMIT;
  if (objectIsNotActivity) report(c, `"${k}" must only be used when the statement's object is an Activity`, 'value_error.not_allowed');
  return x;
};

const CONTEXT = fields<boolean>({
  registration: UUID,
  instructor: actor(AS_ACTOR),
  team: actor(AS_TEAM),
  contextActivities: object(CONTEXT_ACTIVITIES),
  revision: activityOnly,
  platform: activityOnly,
  language: LANGUAGE_TAG,
  statement: object(STATEMENT_REF, 'a StatementRef object'),
  extensions: EXTENSIONS,
  contextAgents: { check: contextActors('contextAgent', 'agent', AS_CONTEXT_AGENT), since2: true },
  contextGroups: { check: contextActors('contextGroup', 'group', AS_CONTEXT_GROUP), since2: true },
});

// ---------------------------------------------------------------------------------------------
// Attachments (§2.4.11)
// ---------------------------------------------------------------------------------------------

const ATTACHMENT = fields({
  usageType: { check: IRI, required: true },
  display: { check: LANGUAGE_MAP, required: true },
  description: LANGUAGE_MAP,
  contentType: { check: format(isMediaType, 'must be an Internet media type such as "text/plain; charset=utf-8"', 'media_type'), required: true },
  length: {
    check: (c, x) => {
      if (typeof x !== 'number') wrongType(c, x, 'integer');
      else if (!Number.isSafeInteger(x) || x < 0) report(c, 'must be a non-negative integer', 'value_error.integer');
      else return x;
      return OMIT;
    },
    required: true,
  },
  sha2: { check: format(isSha2Hex, 'must be a hex-encoded SHA-2 digest (56, 64, 96 or 128 hex digits)', 'sha2'), required: true },
  fileUrl: IRL,
});

// ---------------------------------------------------------------------------------------------
// Statements and SubStatements (§2.4, §2.4.4.3)
// ---------------------------------------------------------------------------------------------

/** The fields of a statement; the walk's state says whether its object is not an Activity (for the context). */
export const STATEMENT_FIELDS = {
  id: UUID,
  actor: { check: actor(AS_ACTOR), required: true },
  verb: { check: object(VERB), required: true },
  object: { check: (c: Ctx, x: unknown) => statementObject(c, x, false), required: true },
  result: object(RESULT),
  context: object(CONTEXT),
  timestamp: TIMESTAMP,
  stored: TIMESTAMP,
  authority: actor(AS_AUTHORITY),
  version: (c: Ctx, x: unknown) => {
    if (!str(c, x)) return OMIT;
    if (acceptsStatementVersion(c.version, x)) return x;
    report(c, `must be a ${statementVersionHint(c.version)} version such as "1.0.0"`, 'value_error.version');
    return OMIT;
  },
  attachments: list(object(ATTACHMENT, 'an Attachment object'), 'an array of Attachment objects'),
} as const;

const STATEMENT = fields<boolean>(STATEMENT_FIELDS, {
  rules: (c, s) => {
    // §2.3.2.s2.b1: a voiding statement's object must be a StatementRef.
    const o = s.object;
    if (isObject(o) && isObject(s.verb) && s.verb.id === VOIDED_VERB && o.objectType !== 'StatementRef') {
      c.path.push('object');
      if (o.objectType === undefined) missing(c, 'objectType', 'the object of a voiding statement must be a StatementRef');
      else reportAt(c, 'objectType', 'the object of a voiding statement must be a StatementRef', 'value_error.voiding');
      c.path.pop();
    }
  },
});

/** A SubStatement: a statement without what only the LRS sets (§2.4.4.3), nor a SubStatement as its object. */
const SUBSTATEMENT = fields<boolean>({
  ...STATEMENT_FIELDS,
  id: forbidden('a SubStatement must not have an "id"'),
  objectType: copy, // "SubStatement", checked by statementObject
  object: { check: (c: Ctx, x: unknown) => statementObject(c, x, true), required: true },
  stored: forbidden('a SubStatement must not have "stored"'),
  authority: forbidden('a SubStatement must not have an "authority"'),
  version: forbidden('a SubStatement must not have a "version"'),
});

const NON_ACTIVITY_OBJECT_TYPES = new Set(['Agent', 'Group', 'StatementRef', 'SubStatement']);

/** A statement (or a SubStatement) known to be an object. */
export function statementBody(c: Ctx, s: J, sub: boolean): J {
  const o = s.object;
  const objectIsNotActivity = isObject(o) && typeof o.objectType === 'string' && NON_ACTIVITY_OBJECT_TYPES.has(o.objectType);
  return walk(c, s, sub ? SUBSTATEMENT : STATEMENT, objectIsNotActivity);
}
