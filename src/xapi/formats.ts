/**
 * The `format` parameter of GET statements (xAPI-Communication §2.1.3) and the language filtering
 * of canonical format (§2.1.3.s4; the choice of a language is ./languages.ts). Pure: the canonical
 * definitions are looked up by the caller (`activityIdsOf` says which) and passed in.
 *
 * `exact` is the stored statement itself and never goes through this module.
 */
import { idsOnlyActor } from './agents.ts';
import { type LanguagePreferences, pickAmong } from './languages.ts';
import { is2, textWrittenUnder2, writtenUnder2, type XapiVersion } from './versions.ts';
import type {
  Activity,
  ActivityDefinition,
  Actor,
  Agent,
  Attachment,
  Group,
  Context,
  InteractionComponent,
  LanguageMap,
  Statement,
  StatementObject,
  SubStatement,
  Verb,
} from './types.ts';

/** How each kind of object the formats rewrite is rewritten; everything else is kept. */
interface Rewriter {
  actor(a: Actor): Actor;
  verb(v: Verb): Verb;
  activity(a: Activity): Activity;
  attachment(a: Attachment): Attachment;
}

function rewriteObject(o: StatementObject, r: Rewriter): StatementObject {
  switch (o.objectType) {
    case undefined:
    case 'Activity':
      return r.activity(o as Activity);
    case 'Agent':
    case 'Group':
      return r.actor(o);
    case 'SubStatement':
      return rewriteBody(o, r);
    default:
      return o; // StatementRef: nothing to rewrite
  }
}

/**
 * Statements stored under lax validation (docs/validation.md) keep what they were sent with: a
 * part of another shape than the rewriters expect is kept as it is.
 */
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function rewriteContext(c: Context, r: Rewriter): Context {
  const out: Context = { ...c };
  if (isObj(c.instructor)) out.instructor = r.actor(c.instructor);
  if (isObj(c.team)) out.team = r.actor(c.team) as Context['team'];
  if (Array.isArray(c.contextAgents)) out.contextAgents = c.contextAgents.map((a) => (isObj(a) && isObj(a.agent) ? { ...a, agent: r.actor(a.agent) as Agent } : a));
  if (Array.isArray(c.contextGroups)) out.contextGroups = c.contextGroups.map((g) => (isObj(g) && isObj(g.group) ? { ...g, group: r.actor(g.group) as Group } : g));
  if (isObj(c.contextActivities)) {
    const ca: Record<string, unknown> = {};
    for (const [kind, list] of Object.entries(c.contextActivities)) {
      if (Array.isArray(list)) ca[kind] = list.map((a: unknown) => (isObj(a) ? r.activity(a as unknown as Activity) : a));
      else ca[kind] = isObj(list) ? r.activity(list as unknown as Activity) : list;
    }
    out.contextActivities = ca as Context['contextActivities'];
  }
  return out;
}

/** Rewrites a statement or SubStatement, keeping its property order. */
function rewriteBody<T extends Statement | SubStatement>(s: T, r: Rewriter): T {
  const out = { ...s } as Statement & SubStatement;
  out.actor = r.actor(s.actor);
  out.verb = r.verb(s.verb);
  out.object = rewriteObject(s.object, r) as SubStatement['object'];
  if (isObj(s.context)) out.context = rewriteContext(s.context, r);
  if ('authority' in s && s.authority) out.authority = r.actor(s.authority);
  if (s.attachments) out.attachments = s.attachments.map((a) => r.attachment(a));
  return out as T;
}

const keep = <T>(x: T): T => x;

const IDS: Rewriter = {
  actor: idsOnlyActor,
  verb: (v) => ({ id: v.id }),
  activity: (a) => ({ id: a.id }),
  attachment: keep,
};

/**
 * `format=ids`: Agents and Groups reduced to their IFI (an anonymous Group to its members' IFIs),
 * Activities to `{id}` ("Activity Objects contain only the id property", SubStatement ones
 * included), Verbs to `{id}`; everything else as stored.
 */
export function idsStatement(s: Statement): Statement {
  return rewriteBody(s, IDS);
}

/**
 * Activities of one `format=canonical` response that get the LRS's canonical definition; the
 * others keep the statement's own definition (language maps filtered all the same). A statement
 * may name tens of thousands of context activities: the definitions read per request stay
 * bounded (a default page of 100 statements names a few hundred).
 */
export const CANONICAL_DEFINITIONS_MAX = 5000;

/**
 * Ids of the Activities the statements mention (object, context activities, SubStatement ones),
 * each once, in order of appearance, the first `max` only.
 */
export function activityIdsOf(statements: readonly Statement[], max = Infinity): string[] {
  const ids = new Set<string>();
  for (const s of statements) {
    if (ids.size >= max) break;
    rewriteBody(s, {
      actor: keep,
      verb: keep,
      activity: (a) => {
        if (ids.size < max && typeof a.id === 'string') ids.add(a.id);
        return a;
      },
      attachment: keep,
    });
  }
  return [...ids];
}

// ---------------------------------------------------------------------------------------------
// format=canonical
// ---------------------------------------------------------------------------------------------

/**
 * Language-map keys a canonical rewrite chooses among between two of its steps: a statement may
 * hold hundreds of thousands of maps, and the caller gives the event loop back at each step, so
 * that no other request waits on one statement's rewrite for longer than a step takes.
 */
export const CANONICAL_KEYS_PER_STEP = 2000;

const COMPONENT_LISTS = ['choices', 'scale', 'source', 'target', 'steps'] as const;

/** Where a rewritten statement holds a language map still to reduce: `owner[prop]`, `owner` a copy of the rewrite's own. */
interface MapSlot {
  owner: Record<string, unknown>;
  prop: string;
}

/** Records the language maps of `owner` (a fresh copy) under `props` for reduction; returns it. */
function slotsOf<T extends object>(slots: MapSlot[], owner: T, ...props: string[]): T {
  const o = owner as Record<string, unknown>;
  for (const prop of props) if (isObj(o[prop])) slots.push({ owner: o, prop });
  return owner;
}

/** A copy of a definition whose language maps (its own and its components') are recorded in `slots`. */
function definitionSlots(d: ActivityDefinition, slots: MapSlot[]): ActivityDefinition {
  const out = slotsOf(slots, { ...d }, 'name', 'description');
  for (const list of COMPONENT_LISTS) {
    const components = d[list];
    if (Array.isArray(components)) out[list] = components.map((c): InteractionComponent => (isObj(c) ? slotsOf(slots, { ...c }, 'description') : c));
  }
  return out;
}

/**
 * `format=canonical`: every Activity carries the LRS's canonical definition (`definitions`, by
 * activity id; the statement's own when the LRS has none) and every language map — activity
 * name/description, interaction components, verb display, attachment display/description — is
 * reduced to one language chosen by `languages` (the request's Accept-Language). Agents and
 * Groups are returned as stored.
 *
 * A generator: it yields after each CANONICAL_KEYS_PER_STEP keys chosen among, and returns the
 * statement. The copy of the statement's structure is made at once (its cost is that of
 * parsing it); the maps, whose keys are the work, are reduced in steps.
 */
export function* canonicalStatement(s: Statement, definitions: ReadonlyMap<string, ActivityDefinition>, languages: LanguagePreferences): Generator<void, Statement, void> {
  const slots: MapSlot[] = [];
  const out = rewriteBody(s, {
    actor: keep,
    verb: (v) => (isObj(v) ? slotsOf(slots, { ...v }, 'display') : v),
    activity: (a) => {
      const definition = definitions.get(a.id) ?? a.definition;
      const copy: Activity = a.objectType ? { objectType: a.objectType, id: a.id } : { id: a.id };
      if (isObj(definition)) copy.definition = definitionSlots(definition, slots);
      else if (definition !== undefined) copy.definition = definition;
      return copy;
    },
    attachment: (a) => (isObj(a) ? slotsOf(slots, { ...a }, 'display', 'description') : a),
  });
  let keys = 0;
  for (const { owner, prop } of slots) {
    const map = owner[prop] as LanguageMap;
    const mapKeys = Object.keys(map);
    owner[prop] = pickAmong(map, mapKeys, languages);
    keys += mapKeys.length;
    if (keys >= CANONICAL_KEYS_PER_STEP) {
      keys = 0;
      yield;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Statements across versions
// ---------------------------------------------------------------------------------------------

/** Cheap test on the stored text: could this statement need converting for a `reader`? */
export const needsConversion = (json: string, reader: XapiVersion): boolean => !is2(reader) && textWrittenUnder2(json);

/**
 * A stored statement as served to a client of version `reader`. By default every statement is
 * served as stored. With `strict` (LECTERN_XAPI_STRICT_VERSION), a 1.0.3 reader gets a 2.0
 * statement in 1.0.3 form: without contextAgents/contextGroups (statement and SubStatement) and
 * with version 1.0.0, as SQL LRS does. A 1.0.3 statement is valid 2.0 and never converted.
 */
export function forReader(s: Statement, reader: XapiVersion, strict: boolean): Statement {
  if (!strict || is2(reader) || !writtenUnder2(s)) return s;
  const out: Statement = { ...s, version: '1.0.0' };
  const strip = (c: Context | undefined): Context | undefined => {
    if (!c || (!c.contextAgents && !c.contextGroups)) return c;
    const { contextAgents: _a, contextGroups: _g, ...rest } = c;
    return rest;
  };
  if (isObj(s.context)) out.context = strip(s.context);
  if (s.object.objectType === 'SubStatement' && s.object.context) out.object = { ...s.object, context: strip(s.object.context) };
  return out;
}
