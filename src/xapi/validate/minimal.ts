/**
 * The minimal form a statement must have to be stored under lax validation (docs/validation.md):
 * the service description's (§2.1: an actor of one of the Agent or Group shapes, `verb.id` and
 * `object.id` IRIs, an optional UUID `id`) and what keeps the stored data readable and its
 * indexes right: a StatementRef's UUID, the voiding rule, and what the LRS itself reads
 * (`timestamp`, `stored`, `version`, `authority`, attachments and their signatures). Every other
 * rule the validator checks is, under lax, a violation recorded with the statement.
 */
import { VOIDED_VERB } from '../types.ts';
import { agentOrGroup, AS_ACTOR, AS_OBJECT } from './actors.ts';
import { STATEMENT_FIELDS } from './statement.ts';
import { isUuid } from './syntax.ts';
import { type Ctx, iri, isObject, type J, missing, reportAt, wrongType } from './walk.ts';

/**
 * An Agent or Group in the minimal form: as the validator wants it but for its members, whose
 * problems are only violations (the service description leaves `member` items untyped).
 */
function minimalActor(c: Ctx, v: unknown, as: typeof AS_ACTOR | typeof AS_OBJECT): void {
  const depth = c.path.length;
  const from = c.issues.length;
  agentOrGroup(c, v, as);
  // Drop what was found inside a member (path …, 'member', i, …): the member list itself still counts.
  let kept = from;
  for (let i = from; i < c.issues.length; i++) {
    const loc = c.issues[i].loc;
    if (!(loc[depth] === 'member' && loc.length > depth + 1)) c.issues[kept++] = c.issues[i];
  }
  c.issues.length = kept;
}

function minimalObject(c: Ctx, o: unknown, sub: boolean): void {
  if (!isObject(o)) {
    wrongType(c, o, 'object');
    return;
  }
  switch (o.objectType) {
    case 'Agent':
    case 'Group':
      minimalActor(c, o, AS_OBJECT);
      return;
    case 'StatementRef':
      if (o.id === undefined) missing(c, 'id');
      else if (!isUuid(o.id)) reportAt(c, 'id', 'a StatementRef id must be a UUID in standard form (8-4-4-4-12 hex digits)', 'value_error.uuid');
      return;
    case 'SubStatement':
      if (sub) reportAt(c, 'objectType', 'a SubStatement must not contain a SubStatement', 'value_error.not_allowed');
      else minimalBody(c, o, true);
      return;
    default:
      // An Activity, or an objectType outside the specification: found by its id as an Activity is.
      if (o.id === undefined) missing(c, 'id');
      else {
        c.path.push('id');
        iri(c, o.id);
        c.path.pop();
      }
  }
}

/** A field the LRS reads, checked as the validator checks it. */
function lrsField(c: Ctx, s: J, k: keyof typeof STATEMENT_FIELDS): void {
  if (s[k] === undefined) return;
  const f = STATEMENT_FIELDS[k];
  const check = typeof f === 'function' ? f : f.check;
  c.path.push(k);
  check(c, s[k], false, k);
  c.path.pop();
}

function minimalBody(c: Ctx, s: J, sub: boolean): void {
  if (!sub && s.id !== undefined && !isUuid(s.id)) reportAt(c, 'id', 'must be a UUID in standard form (8-4-4-4-12 hex digits)', 'value_error.uuid');
  if (s.actor === undefined) missing(c, 'actor');
  else {
    c.path.push('actor');
    minimalActor(c, s.actor, AS_ACTOR);
    c.path.pop();
  }
  const verb = s.verb;
  if (verb === undefined) missing(c, 'verb');
  else {
    c.path.push('verb');
    if (!isObject(verb)) wrongType(c, verb, 'object');
    else if (verb.id === undefined) missing(c, 'id');
    else {
      c.path.push('id');
      iri(c, verb.id);
      c.path.pop();
    }
    c.path.pop();
  }
  if (s.object === undefined) missing(c, 'object');
  else {
    c.path.push('object');
    minimalObject(c, s.object, sub);
    c.path.pop();
  }
  // Voiding as under strict (§2.3.2): its object is a StatementRef.
  if (isObject(verb) && verb.id === VOIDED_VERB && !(isObject(s.object) && s.object.objectType === 'StatementRef')) {
    reportAt(c, 'object', 'the object of a voiding statement must be a StatementRef', 'value_error.voiding');
  }
  lrsField(c, s, 'timestamp');
  lrsField(c, s, 'attachments');
  if (!sub) {
    lrsField(c, s, 'stored');
    lrsField(c, s, 'version');
    lrsField(c, s, 'authority');
  }
}

/** Reports what keeps `value` (a statement) from the minimal form: what lax never accepts. */
export function minimalStatement(c: Ctx, value: unknown): void {
  if (!isObject(value)) {
    wrongType(c, value, 'object', 'a Statement object');
    return;
  }
  minimalBody(c, value, false);
}
