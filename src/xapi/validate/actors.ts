/**
 * Agents and Groups (xAPI-Data §2.4.2). Where one appears decides what it may be (its role);
 * the objectType is dispatched on first, then the object is walked by the Agent or the Group
 * table, which collects the inverse functional identifiers it meets for the rules that count them.
 */
import { isIri, isMbox, isSha1Hex } from './syntax.ts';
import { type Check, type Ctx, type Fields, type J, copy, fields, format, IRL, isObject, list, missing, object, OMIT, report, reportAt, STRING, walk, wrongType } from './walk.ts';

/** Where an Agent/Group appears; decides what is allowed. */
export const AS_ACTOR = 0; // actor, context.instructor: Agent (objectType optional) or Group
export const AS_OBJECT = 1; // statement object: objectType required (checked by the object dispatcher)
export const AS_TEAM = 2; // context.team: a Group
export const AS_MEMBER = 3; // group member: an Agent
export const AS_AUTHORITY = 4; // authority: Agent, or anonymous Group of exactly two Agents
export const AS_PARAM = 5; // `agent` query parameter: Agent or identified Group
export const AS_CONTEXT_GROUP = 6; // 2.0 contextGroups[].group: a Group (objectType required)
export const AS_CONTEXT_AGENT = 7; // 2.0 contextAgents[].agent: an Agent
export type Role = 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7;

const IFI_HINT = 'mbox, mbox_sha1sum, openid or account';

function ifiMessage(who: string, found: string[]): string {
  if (found.length === 0) return `${who} must have exactly one inverse functional identifier (${IFI_HINT}), found none`;
  return `${who} must have exactly one inverse functional identifier, found ${found.length}: ${found.join(', ')}`;
}

const ACCOUNT = fields({ homePage: { check: IRL, required: true }, name: { check: STRING, required: true } });

/** An inverse functional identifier: counted in the walk's state (the IFI names met, in order), then checked. */
const ifi =
  (check: Check<unknown>): Check<string[]> =>
  (c, x, found, k) => {
    found.push(k);
    return check(c, x, found, k);
  };

/** The fields Agents and Groups share; the walk's state lists the IFIs met. */
const ACTOR_FIELDS = {
  objectType: copy, // already checked by agentOrGroup
  name: STRING,
  mbox: ifi(format(isMbox, 'must be a "mailto:" IRI with an email address, e.g. "mailto:someone@example.com"', 'mbox')),
  mbox_sha1sum: ifi(format(isSha1Hex, 'must be the hex-encoded SHA-1 of a mailto IRI (40 hex digits)', 'sha1')),
  openid: ifi(format(isIri, 'must be an absolute URI', 'iri')),
  account: ifi(object(ACCOUNT)),
};

const AGENT = fields<string[]>(
  {
    ...ACTOR_FIELDS,
    member: (c) => {
      report(c, 'extra field not permitted ("member" is only allowed on a Group)', 'value_error.extra');
      return OMIT;
    },
  },
  {
    rules: (c, _v, _out, found) => {
      if (found.length !== 1) report(c, ifiMessage('an Agent', found), 'value_error.ifi');
    },
  },
);

/** A Group's table; `anonymous` is its rule when it has no IFI, for its role. */
function groupTable(anonymous: (c: Ctx, v: J, nIfi: number) => void): Fields<string[]> {
  return fields<string[]>(
    { ...ACTOR_FIELDS, member: list((c, x) => agentOrGroup(c, x, AS_MEMBER), 'an array of Agents') },
    {
      rules: (c, v, _out, found) => {
        if (found.length > 1) report(c, ifiMessage('an identified Group', found), 'value_error.ifi');
        else anonymous(c, v, found.length);
      },
    },
  );
}

/** Actor, object, team, context group: an identified Group, or an anonymous one with members. */
const GROUP = groupTable((c, v, nIfi) => {
  if (nIfi !== 0) return;
  const m = v.member;
  if (m === undefined) missing(c, 'member', 'an anonymous Group (one without an inverse functional identifier) must list its members');
  else if (Array.isArray(m) && m.length === 0) {
    reportAt(c, 'member', 'an anonymous Group must have at least one member', 'value_error.empty');
  }
});

/** Authority: an anonymous Group of exactly two Agents (an application and a user, §4.3). */
const AUTHORITY_GROUP = groupTable((c, v, nIfi) => {
  if (nIfi === 1) {
    report(c, 'an authority Group must be an anonymous Group (no inverse functional identifier) of two Agents', 'value_error.authority');
  }
  const m = v.member;
  if (m === undefined) missing(c, 'member', 'an authority Group must list exactly two Agents');
  else if (Array.isArray(m) && m.length !== 2) {
    reportAt(c, 'member', `an authority Group must have exactly two Agent members, found ${m.length}`, 'value_error.authority');
  }
});

/** The `agent` parameter: an identified Group only. */
const PARAM_GROUP = groupTable((c, _v, nIfi) => {
  if (nIfi === 0) {
    report(c, `must be an Agent or an identified Group: a Group here needs exactly one inverse functional identifier (${IFI_HINT}), found none`, 'value_error.ifi');
  }
});

/** An Agent or a Group in the role `as`; the objectType decides which table walks it. */
export function agentOrGroup(c: Ctx, v: unknown, as: Role): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const t = v.objectType;
  const groupOnly = as === AS_TEAM || as === AS_CONTEXT_GROUP;
  const what = as === AS_TEAM ? 'a team' : 'a context group';
  let group: boolean;
  if (t === undefined) {
    if (groupOnly) missing(c, 'objectType', `${what} must be a Group with "objectType": "Group"`);
    group = groupOnly;
  } else if (t === 'Agent') {
    if (groupOnly) {
      reportAt(c, 'objectType', `${what} must be a Group, not an Agent`, 'value_error.not_allowed');
      return undefined;
    }
    group = false;
  } else if (t === 'Group') {
    if (as === AS_MEMBER || as === AS_CONTEXT_AGENT) {
      const msg = as === AS_MEMBER ? 'a Group member must be an Agent; Groups cannot contain Groups' : "a contextAgent's agent must be an Agent (a Group goes in contextGroups)";
      reportAt(c, 'objectType', msg, 'value_error.not_allowed');
      return undefined;
    }
    group = true;
  } else {
    c.path.push('objectType');
    if (typeof t !== 'string') wrongType(c, t, 'string');
    else if (as === AS_MEMBER || as === AS_CONTEXT_AGENT) report(c, 'must be "Agent"', 'value_error.enum');
    else if (groupOnly) report(c, 'must be "Group"', 'value_error.enum');
    else report(c, 'must be "Agent" or "Group"', 'value_error.enum');
    c.path.pop();
    return undefined;
  }
  const table = !group ? AGENT : as === AS_AUTHORITY ? AUTHORITY_GROUP : as === AS_PARAM ? PARAM_GROUP : GROUP;
  return walk(c, v, table, []);
}

/** A field holding an Agent or a Group in the role `as`. */
export const actor =
  (as: Role): Check<unknown> =>
  (c, x) =>
    agentOrGroup(c, x, as);
