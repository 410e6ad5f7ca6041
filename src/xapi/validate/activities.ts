/** Activities and their definitions, interaction activities included (xAPI-Data §2.4.4.1). */
import { type Check, type Ctx, type J, copy, EXTENSIONS, fields, IRI, IRL, isObject, LANGUAGE_MAP, list, missing, OMIT, report, str, walk, wrongType } from './walk.ts';

const INTERACTION_TYPES = 'true-false, choice, fill-in, long-fill-in, matching, performance, sequencing, likert, numeric, other';

/** Component lists each interactionType supports (§2.4.4.1.s15 table 2); undefined: not an interactionType. */
function componentListsFor(t: string): string | undefined {
  switch (t) {
    case 'choice':
    case 'sequencing':
      return 'choices';
    case 'likert':
      return 'scale';
    case 'matching':
      return 'source, target';
    case 'performance':
      return 'steps';
    case 'true-false':
    case 'fill-in':
    case 'long-fill-in':
    case 'numeric':
    case 'other':
      return '';
    default:
      return undefined;
  }
}

/** Whether interactionType `t` (a valid one) supports the component list `list`. */
function supportsList(t: string, list: string): boolean {
  switch (list) {
    case 'choices':
      return t === 'choice' || t === 'sequencing';
    case 'scale':
      return t === 'likert';
    case 'source':
    case 'target':
      return t === 'matching';
    case 'steps':
      return t === 'performance';
    default:
      return false;
  }
}

/** Whether `k` makes an Activity an interaction (it then needs an interactionType). */
function isInteractionKey(k: string): boolean {
  switch (k) {
    case 'correctResponsesPattern':
    case 'choices':
    case 'scale':
    case 'source':
    case 'target':
    case 'steps':
      return true;
    default:
      return false;
  }
}

/** The walk of one component list carries the ids seen so far: they must be distinct. */
interface Seen {
  ids: Set<string> | undefined;
}

const COMPONENT = fields<Seen>({
  id: {
    check: (c, x, seen) => {
      if (!str(c, x)) return OMIT;
      seen.ids ??= new Set();
      if (seen.ids.has(x)) report(c, `duplicate interaction component id "${x}" (ids must be distinct within a list)`, 'value_error.duplicate');
      else seen.ids.add(x);
      return x;
    },
    required: true,
  },
  description: LANGUAGE_MAP,
});

/** An interaction component list (choices, scale, source, target, steps). */
const COMPONENT_LIST = list<Seen>((c, item, seen) => {
  if (isObject(item)) return walk(c, item, COMPONENT, seen);
  wrongType(c, item, 'object');
  return OMIT;
}, 'an array of interaction components');

/** A component list field; the walk's state is the definition itself (its interactionType). */
const components: Check<J> = (c, x, def, k) => {
  const it = def.interactionType;
  const allowed = typeof it === 'string' ? componentListsFor(it) : undefined;
  if (allowed !== undefined && !supportsList(it as string, k)) {
    report(c, `"${k}" is not allowed for interactionType "${it as string}" (${allowed ? `only ${allowed}` : 'no component lists are supported'})`, 'value_error.not_allowed');
  }
  return COMPONENT_LIST(c, x, { ids: undefined }, k);
};

const DEFINITION = fields<J>(
  {
    name: LANGUAGE_MAP,
    description: LANGUAGE_MAP,
    type: IRI,
    moreInfo: IRL,
    extensions: EXTENSIONS,
    interactionType: (c, x) => {
      if (!str(c, x)) return OMIT;
      if (componentListsFor(x) !== undefined) return x;
      report(c, `must be one of ${INTERACTION_TYPES}`, 'value_error.enum');
      return OMIT;
    },
    correctResponsesPattern: list((c, x) => (str(c, x) ? x : OMIT), 'an array of strings', OMIT),
    choices: components,
    scale: components,
    source: components,
    target: components,
    steps: components,
  },
  {
    rules: (c, v) => {
      if (v.interactionType !== undefined) return;
      for (const k in v) {
        if (isInteractionKey(k)) {
          missing(c, 'interactionType', `an interaction Activity (one with "${k}") must have an interactionType`);
          return;
        }
      }
    },
  },
);

const ACTIVITY = fields({
  objectType: copy, // already checked by activityBody
  id: { check: IRI, required: true },
  definition: (c, x) => {
    if (isObject(x)) return walk(c, x, DEFINITION, x);
    wrongType(c, x, 'object');
    return undefined;
  },
});

/** An Activity object; `v` is already known to be an object. */
export function activityBody(c: Ctx, v: J): J | undefined {
  const t = v.objectType;
  if (t !== undefined && t !== 'Activity') {
    c.path.push('objectType');
    if (typeof t !== 'string') wrongType(c, t, 'string');
    else report(c, 'must be "Activity"', 'value_error.enum');
    c.path.pop();
    return undefined;
  }
  return walk(c, v, ACTIVITY, undefined);
}

export function activity(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object', 'an Activity object');
    return undefined;
  }
  return activityBody(c, v);
}
