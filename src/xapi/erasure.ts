/**
 * Finding and replacing one person in stored statements (erasure and pseudonymisation, GDPR
 * art. 17): every place an Agent or Group can stand — actor, object, authority, instructor, team,
 * Group members, SubStatement actor/object/context, and xAPI 2.0 context agents and groups. Works
 * on plain JSON, so statements of any version are covered.
 */
import { createHmac } from 'node:crypto';
import { ifiKey } from './agents.ts';
import type { Agent, Statement } from './types.ts';

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The IFI key of an actor with the case-insensitive parts of an mbox lower-cased (xAPI-Data
 * §2.3.1.b7: scheme and domain), so `mailto:Ben@Example.com` and `mailto:Ben@example.com` are one
 * person. undefined for an actor without an IFI.
 */
export function personKey(actor: unknown): string | undefined {
  if (!isObject(actor)) return undefined;
  const key = ifiKey(actor as Agent);
  if (key === undefined || typeof actor.mbox !== 'string') return key;
  const mbox = actor.mbox;
  const at = mbox.lastIndexOf('@');
  const colon = mbox.indexOf(':');
  return `mbox:${mbox.slice(0, colon + 1).toLowerCase()}${mbox.slice(colon + 1, at === -1 ? undefined : at)}${at === -1 ? '' : mbox.slice(at).toLowerCase()}`;
}

/** Rebuilds an actor position: `fn` sees every Agent/Group object, members after their Group. */
type ActorFn = (actor: Json) => Json;

function mapActor(value: unknown, fn: ActorFn): unknown {
  if (!isObject(value)) return value;
  let out = value;
  if (Array.isArray(value.member)) {
    const members = value.member.map((m) => mapActor(m, fn));
    if (members.some((m, i) => m !== (value.member as unknown[])[i])) out = { ...value, member: members };
  }
  return fn(out);
}

function mapContext(value: unknown, fn: ActorFn): unknown {
  if (!isObject(value)) return value;
  const out: Json = { ...value };
  if (value.instructor !== undefined) out.instructor = mapActor(value.instructor, fn);
  if (value.team !== undefined) out.team = mapActor(value.team, fn);
  // xAPI 2.0: contextAgents [{agent, relevantTypes}], contextGroups [{group, relevantTypes}].
  if (Array.isArray(value.contextAgents)) {
    out.contextAgents = value.contextAgents.map((c) => (isObject(c) && c.agent !== undefined ? keep(c, { ...c, agent: mapActor(c.agent, fn) }) : c));
  }
  if (Array.isArray(value.contextGroups)) {
    out.contextGroups = value.contextGroups.map((c) => (isObject(c) && c.group !== undefined ? keep(c, { ...c, group: mapActor(c.group, fn) }) : c));
  }
  return keep(value, out);
}

/** `next` when any property differs from `prev` (by identity), else `prev`: unchanged parts stay shared. */
function keep(prev: Json, next: Json): Json {
  for (const k of Object.keys(next)) if (next[k] !== prev[k]) return next;
  return prev;
}

function mapStatementBody(s: Json, fn: ActorFn, top: boolean): Json {
  const out: Json = { ...s };
  out.actor = mapActor(s.actor, fn);
  const object = s.object;
  if (isObject(object)) {
    if (object.objectType === 'Agent' || object.objectType === 'Group') out.object = mapActor(object, fn);
    else if (object.objectType === 'SubStatement') out.object = mapStatementBody(object, fn, false);
  }
  if (s.context !== undefined) out.context = mapContext(s.context, fn);
  if (top && s.authority !== undefined) out.authority = mapActor(s.authority, fn);
  for (const k of ['actor', 'object', 'context', 'authority']) if (!(k in s)) delete out[k];
  return keep(s, out);
}

/** The statement with `fn` applied to every Agent and Group in it; the same object when nothing changed. */
export function mapActors<T extends Statement>(statement: T, fn: ActorFn): T {
  return mapStatementBody(statement as unknown as Json, fn, true) as unknown as T;
}

/** True when the person with key `key` (see personKey) stands anywhere in the statement. */
export function mentionsPerson(statement: Statement, key: string): boolean {
  let found = false;
  mapActors(statement, (a) => {
    if (!found && personKey(a) === key) found = true;
    return a;
  });
  return found;
}

/** Where pseudonyms live: an account on a reserved host (RFC 2606) that no real system serves. */
export const PSEUDONYM_HOMEPAGE = 'https://pseudonym.lectern.invalid';

/**
 * The pseudonym of a person: an account whose name is the HMAC-SHA256 of their IFI key under the
 * operator's secret. Stable (the same person always gets the same pseudonym, so analytics still
 * group their statements) and not reversible without the key.
 */
export function pseudonymFor(key: string, secret: string): Agent {
  return { objectType: 'Agent', account: { homePage: PSEUDONYM_HOMEPAGE, name: createHmac('sha256', secret).update(key).digest('hex') } };
}

/**
 * Replaces the person `key` by `pseudonym` everywhere in the statement: their identifier and name
 * go; a Group keeps its members (each replaced in turn when it is the person) and its objectType.
 */
export function pseudonymizeStatement<T extends Statement>(statement: T, key: string, pseudonym: Agent): T {
  return mapActors(statement, (a) => {
    if (personKey(a) !== key) return a;
    const out: Json = { objectType: a.objectType ?? 'Agent', account: pseudonym.account };
    if (Array.isArray(a.member)) out.member = a.member;
    return out;
  });
}
