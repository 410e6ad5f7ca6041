/**
 * The `format` parameter of GET statements (xAPI-Communication §2.1.3) and the language filtering
 * of canonical format (§2.1.3.s4). Pure: the canonical definitions are looked up by the caller
 * (`activityIdsOf` says which) and passed in.
 *
 * `exact` is the stored statement itself and never goes through this module.
 */
import { idsOnlyActor } from './agents.ts';
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
// Accept-Language (RFC 2616 §14.4) and language maps
// ---------------------------------------------------------------------------------------------

export interface LanguageRange {
  /** Lower-cased language range, or `*`. */
  range: string;
  q: number;
}

const RANGE = /^(?:\*|[a-z]{1,8}(?:-[a-z0-9]{1,8})*)$/;
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

/** Parses an Accept-Language header; malformed entries are skipped (a header is no reason to fail). */
export function parseAcceptLanguage(header: string | undefined): LanguageRange[] {
  if (!header) return [];
  const out: LanguageRange[] = [];
  for (const item of header.split(',')) {
    const [rawRange, ...params] = item.split(';');
    const range = rawRange.trim().toLowerCase();
    if (!RANGE.test(range)) continue;
    let q = 1;
    let ok = true;
    for (const p of params) {
      const m = /^\s*q\s*=\s*(\S+)\s*$/i.exec(p);
      if (!m) continue; // accept-extensions carry no meaning here
      if (QVALUE.test(m[1])) q = Number(m[1]);
      else ok = false;
    }
    if (ok) out.push({ range, q });
  }
  return out;
}

const primary = (tag: string): string => tag.split('-', 1)[0];

interface Candidate {
  key: string;
  q: number;
  /** Position of the matching range in the header: earlier wins a tie. */
  index: number;
}

/** The key of the candidate with the highest q above 0 (ties: earlier range, then map order). */
function best(candidates: Candidate[]): string | undefined {
  let top: Candidate | undefined;
  for (const c of candidates) if (c.q > 0 && (!top || c.q > top.q || (c.q === top.q && c.index < top.index))) top = c;
  return top?.key;
}

/**
 * Reduces a language map to the one entry the client prefers (§2.1.3.s4.b5: Accept-Language
 * applied to each map on its own), in this order:
 * 1. RFC 2616 matching: a key's quality is that of the longest range equal to it or a prefix of it
 *    at a `-`; the best quality above 0 wins (ties: the range listed first, then map order);
 * 2. the same primary language (`en-US` accepted, only `en-GB` or `en` available), even when
 *    `*;q=0` refuses everything else: a close language beats an arbitrary one;
 * 3. `und`, then the first entry: the client gets one language whatever it asked for.
 * Keys given q=0 are only chosen when nothing else is left.
 */
export function pickLanguage(map: LanguageMap, ranges: readonly LanguageRange[]): LanguageMap {
  const keys = Object.keys(map);
  if (keys.length <= 1) return { ...map };
  const specific = ranges.filter((r) => r.range !== '*');
  const star = ranges.find((r) => r.range === '*');
  // q=0 for a key: by a range naming it (never chosen while anything else is left), or by `*`.
  const refused = new Set<string>();
  const excluded = new Set<string>();
  const one = (key: string): LanguageMap => ({ [key]: map[key] });

  const exact: Candidate[] = [];
  for (const key of keys) {
    const tag = key.toLowerCase();
    let match: LanguageRange | undefined;
    for (const r of specific) {
      if ((tag === r.range || tag.startsWith(`${r.range}-`)) && (!match || r.range.length > match.range.length)) match = r;
    }
    if (match) {
      if (match.q === 0) {
        refused.add(key);
        excluded.add(key);
      }
      exact.push({ key, q: match.q, index: specific.indexOf(match) });
    } else if (star?.q === 0) excluded.add(key);
  }
  const first = best(exact);
  if (first) return one(first);

  const sameLanguage: Candidate[] = [];
  for (const key of keys) {
    if (refused.has(key)) continue;
    const lang = primary(key.toLowerCase());
    specific.forEach((r, index) => {
      if (primary(r.range) === lang) sameLanguage.push({ key, q: r.q, index });
    });
  }
  const second = best(sameLanguage);
  if (second) return one(second);

  const allowed = keys.filter((k) => !excluded.has(k));
  const und = allowed.find((k) => k.toLowerCase() === 'und');
  return one(und ?? allowed[0] ?? keys[0]);
}

const COMPONENT_LISTS = ['choices', 'scale', 'source', 'target', 'steps'] as const;

/** A definition with every language map reduced to one language. */
function filterDefinition(d: ActivityDefinition, ranges: readonly LanguageRange[]): ActivityDefinition {
  const out: ActivityDefinition = { ...d };
  if (isObj(d.name)) out.name = pickLanguage(d.name, ranges);
  if (isObj(d.description)) out.description = pickLanguage(d.description, ranges);
  for (const list of COMPONENT_LISTS) {
    const components = d[list];
    if (Array.isArray(components)) {
      out[list] = components.map((c): InteractionComponent => (isObj(c) && isObj(c.description) ? { ...c, description: pickLanguage(c.description, ranges) } : c));
    }
  }
  return out;
}

/**
 * `format=canonical`: every Activity carries the LRS's canonical definition (`definitions`, by
 * activity id; the statement's own when the LRS has none) and every language map — activity
 * name/description, interaction components, verb display, attachment display/description — is
 * reduced to one language chosen by `ranges` (the request's Accept-Language). Agents and Groups
 * are returned as stored.
 */
export function canonicalStatement(
  s: Statement,
  definitions: ReadonlyMap<string, ActivityDefinition>,
  ranges: readonly LanguageRange[],
): Statement {
  return rewriteBody(s, {
    actor: keep,
    verb: (v) => (isObj(v.display) ? { ...v, display: pickLanguage(v.display, ranges) } : v),
    activity: (a) => {
      const definition = definitions.get(a.id) ?? a.definition;
      const out: Activity = a.objectType ? { objectType: a.objectType, id: a.id } : { id: a.id };
      if (isObj(definition)) out.definition = filterDefinition(definition, ranges);
      else if (definition !== undefined) out.definition = definition;
      return out;
    },
    attachment: (a) => {
      const out: Attachment = { ...a, display: pickLanguage(a.display, ranges) };
      if (a.description) out.description = pickLanguage(a.description, ranges);
      return out;
    },
  });
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
