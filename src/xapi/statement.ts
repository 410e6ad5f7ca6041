/**
 * Turning validated statements into what the store keeps: LRS-set properties, the rows that index
 * a statement by agent and activity, voiding targets, and statement comparison (xAPI-Data §2.3.1).
 */
import { randomUUID } from 'node:crypto';
import { LrsError } from '../errors.ts';
import { actorKeys } from './agents.ts';
import { attachmentHashes } from './attachments.ts';
import { canonicalJson, jsonDifference } from './compare.ts';
import type { ActivityDefinition, Actor, Context, Statement, StatementObject, SubStatement } from './types.ts';
import { VOIDED_VERB } from './types.ts';
import { isUuid, isValidDefinition, parseTimestamp, type Violations } from './validate.ts';
import { defaultStatementVersion, is2, type XapiVersion } from './versions.ts';

/**
 * Why an agent is linked to a statement (statement_agents.role): the plain `agent` filter matches
 * DIRECT only, `related_agents=true` every role.
 */
export const AGENT_ROLE = {
  /** Instructor, team, authority, anything inside a SubStatement, group members of those. */
  related: 0,
  /** The statement's actor or object (a Group's members too). */
  direct: 1,
  /** 2.0 context.contextAgents[].agent. */
  contextAgent: 2,
  /** 2.0 context.contextGroups[].group (and its members). */
  contextGroup: 3,
} as const;
export type AgentRole = (typeof AGENT_ROLE)[keyof typeof AGENT_ROLE];

/** Every role: what `related_agents=true` matches. */
export const AGENT_ROLES: readonly AgentRole[] = Object.values(AGENT_ROLE);

/** When one agent plays several roles in a statement, the row keeps the first of these. */
const ROLE_PRECEDENCE: readonly AgentRole[] = [AGENT_ROLE.direct, AGENT_ROLE.contextAgent, AGENT_ROLE.contextGroup, AGENT_ROLE.related];

export interface IndexedAgent {
  key: string;
  role: AgentRole;
}

export interface IndexedActivity {
  id: string;
  /** true when the activity is the statement's object (the plain `activity` filter). */
  direct: boolean;
}

/** A validated statement with everything the store needs; `stored`/`timestamp` are set by the store. */
export interface PreparedStatement {
  id: string;
  /** The version of the request that brought it: its insert, default-version and comparison rules. */
  xapiVersion: XapiVersion;
  statement: Statement & { id: string };
  verb: string;
  /** The authority's first actor key (statements.authority). */
  authorityKey: string | null;
  /**
   * The writer may read only statements of its own authority (Access.mineOnly): the insert rules
   * then keep another authority's statements from it (src/xapi/insert.ts).
   */
  mineOnly: boolean;
  registration: string | null;
  /** Id of the statement this one targets through a StatementRef object (voiding included). */
  refId: string | null;
  /** Id of the statement this one voids, when it is a voiding statement. */
  voids: string | null;
  agents: IndexedAgent[];
  activities: IndexedActivity[];
  /** Activity definitions this statement carries, for the canonical Activity the LRS maintains. */
  definitions: { id: string; definition: ActivityDefinition }[];
  /** Lower-case sha2 of each attachment the statement (or its SubStatement) declares. */
  attachmentHashes: string[];
  /**
   * Those whose data came with it (its request's parts): it carried them, and readers who may
   * read it may have that data. A declaration by hash alone carries nothing.
   */
  carried: string[];
  /** Accepted under lax validation: the rules it broke, kept with it (undefined: none). */
  violations: Violations | undefined;
}

export const isVoiding = (s: Statement): boolean => s.verb.id === VOIDED_VERB && s.object.objectType === 'StatementRef';

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A context activity list as stored: an array, or (kept as sent under lax validation) a single Activity. */
const activityList = (v: unknown): unknown[] => (Array.isArray(v) ? v : isObj(v) ? [v] : []);

/**
 * Collects index rows; a key seen in several roles is kept once (agents: see ROLE_PRECEDENCE;
 * activities: direct wins). It reads statements stored under lax validation too (docs/validation.md):
 * whatever is not of the expected shape is skipped, never a reason to fail.
 */
class IndexCollector {
  private agents = new Map<string, AgentRole>();
  private activities = new Map<string, boolean>();
  readonly definitions: { id: string; definition: ActivityDefinition }[] = [];

  actor(actor: unknown, role: AgentRole): void {
    if (!isObj(actor)) return;
    for (const k of actorKeys(actor as Actor)) {
      const had = this.agents.get(k);
      if (had === undefined || ROLE_PRECEDENCE.indexOf(role) < ROLE_PRECEDENCE.indexOf(had)) this.agents.set(k, role);
    }
  }

  activity(a: unknown, direct: boolean): void {
    if (!isObj(a) || typeof a.id !== 'string') return;
    this.activities.set(a.id, direct || (this.activities.get(a.id) ?? false));
    if (isObj(a.definition)) this.definitions.push({ id: a.id, definition: a.definition as ActivityDefinition });
  }

  object(o: StatementObject, direct: boolean): void {
    if (!isObj(o)) return;
    switch (o.objectType) {
      case 'Agent':
      case 'Group':
        this.actor(o, direct ? AGENT_ROLE.direct : AGENT_ROLE.related);
        break;
      case 'SubStatement':
        this.sub(o as unknown as SubStatement);
        break;
      case 'StatementRef':
        break; // handled by refId, not indexed here
      default:
        // An Activity; under lax validation also an object of another objectType, found by its id.
        this.activity(o, direct);
    }
  }

  context(c: Context | undefined, inSub: boolean): void {
    if (!isObj(c)) return;
    this.actor(c.instructor, AGENT_ROLE.related);
    this.actor(c.team, AGENT_ROLE.related);
    // 2.0 (the validator only lets these through under 2.0); inside a SubStatement, merely related.
    if (Array.isArray(c.contextAgents)) for (const a of c.contextAgents) if (isObj(a)) this.actor(a.agent, inSub ? AGENT_ROLE.related : AGENT_ROLE.contextAgent);
    if (Array.isArray(c.contextGroups)) for (const g of c.contextGroups) if (isObj(g)) this.actor(g.group, inSub ? AGENT_ROLE.related : AGENT_ROLE.contextGroup);
    const ca = c.contextActivities;
    if (isObj(ca)) for (const list of [ca.parent, ca.grouping, ca.category, ca.other]) for (const a of activityList(list)) this.activity(a, false);
  }

  sub(s: SubStatement): void {
    this.actor(s.actor, AGENT_ROLE.related);
    this.object(s.object, false);
    this.context(s.context, true);
  }

  result(): { agents: IndexedAgent[]; activities: IndexedActivity[] } {
    return {
      agents: [...this.agents].map(([key, role]) => ({ key, role })),
      activities: [...this.activities].map(([id, direct]) => ({ id, direct })),
    };
  }
}

function collect(statement: Statement): IndexCollector {
  const c = new IndexCollector();
  c.actor(statement.actor, AGENT_ROLE.direct);
  c.object(statement.object, true);
  c.actor(statement.authority, AGENT_ROLE.related);
  c.context(statement.context, false);
  return c;
}

/**
 * The agent and activity index rows of a stored statement, as `prepareStatement` made them when
 * it was stored: the stores delete a statement's link rows by these keys (erasure).
 */
export function indexRows(statement: Statement): { agents: IndexedAgent[]; activities: IndexedActivity[] } {
  return collect(statement).result();
}

/**
 * A timestamp with an offset as the same instant in UTC (`Z`), its fraction digits kept (2.0:
 * "the LRS SHOULD convert timestamps to UTC"); undefined when it is already UTC.
 */
export function toUtc(ts: string): string | undefined {
  if (/[Zz]$/.test(ts)) return undefined;
  const ms = parseTimestamp(ts);
  if (ms === undefined) return undefined;
  const fraction = /[.,](\d+)/.exec(ts.slice(ts.search(/[Tt]/)))?.[1] ?? '';
  const base = new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19);
  return `${base}${fraction ? `.${fraction.padEnd(3, '0')}` : ''}Z`;
}

/** 2.0: the statement's (and its SubStatement's) timestamps in UTC. */
function utcTimestamps(s: Statement): Statement {
  let out = s;
  const ts = s.timestamp && toUtc(s.timestamp);
  if (ts) out = { ...out, timestamp: ts };
  if (s.object.objectType === 'SubStatement' && s.object.timestamp) {
    const sub = toUtc(s.object.timestamp);
    if (sub) out = { ...out, object: { ...s.object, timestamp: sub } };
  }
  return out;
}

/**
 * Prepares a validated statement for storage under request version `version`: assigns an id when
 * absent (lower-cased: UUIDs are case-insensitive and ids are looked up lower-cased), sets
 * `authority` (the LRS overrides whatever the client sent) and, under 2.0, converts timestamps to
 * UTC. `version` is left to `stamp`, so that statement comparison can tell a version the client
 * sent from one the LRS assigns.
 */
export function prepareStatement(input: Statement, authority: Actor, version: XapiVersion, received: ReadonlySet<string> = new Set(), violations?: Violations): PreparedStatement {
  const statement = { ...(is2(version) ? utcTimestamps(input) : input), id: (input.id ?? randomUUID()).toLowerCase(), authority };
  const c = collect(statement);
  const ref = statement.object.objectType === 'StatementRef' ? statement.object.id : null;
  const registration = statement.context?.registration;
  return {
    id: statement.id,
    xapiVersion: version,
    statement,
    verb: statement.verb.id,
    authorityKey: actorKeys(authority)[0] ?? null,
    mineOnly: false,
    // Under lax validation a registration is indexed only when it is a UUID (docs/validation.md).
    registration: registration === undefined || (violations && !isUuid(registration)) ? null : registration.toLowerCase(),
    refId: ref?.toLowerCase() ?? null,
    voids: isVoiding(statement) && ref ? ref.toLowerCase() : null,
    ...c.result(),
    // A definition that breaks a rule does not (re)define the canonical Activity every reader shares.
    definitions: violations ? c.definitions.filter((d) => isValidDefinition(d.definition, version)) : c.definitions,
    ...carrying(attachmentHashes(statement), received),
    violations,
  };
}

/** A statement's attachment hashes, and those among them whose data was `received` with it. */
const carrying = (hashes: string[], received: ReadonlySet<string>) => ({ attachmentHashes: hashes, carried: hashes.filter((h) => received.has(h)) });

/**
 * Prepares a whole batch; two statements with one id reject the batch (spec 2.1.2.s2.b6). Without
 * `define` (Communication §4.2) the statements are stored as sent but their activity definitions
 * do not (re)define the canonical Activity. `mineOnly`: the writer reads only its own authority's
 * statements (see PreparedStatement.mineOnly). `received`: the sha2 of the attachment data the
 * request brought (every statement declaring one carried it).
 */
export function prepareBatch(
  statements: Statement[],
  authority: Actor,
  version: XapiVersion,
  opts: { define: boolean; mineOnly?: boolean; received?: ReadonlySet<string>; violations?: readonly (Violations | undefined)[] } = { define: true },
): PreparedStatement[] {
  const seen = new Set<string>();
  return statements.map((s, i) => {
    const p = prepareStatement(s, authority, version, opts.received, opts.violations?.[i]);
    if (!opts.define) p.definitions = [];
    p.mineOnly = opts.mineOnly ?? false;
    if (seen.has(p.id)) throw new LrsError('bad_request', `statement ${i} repeats the id ${p.id} of an earlier statement in the batch`);
    seen.add(p.id);
    return p;
  });
}

export type StampedStatement = Statement & { id: string; stored: string; timestamp: string; version: string };

/** Sets the remaining LRS-assigned properties; returns the statement as the LRS will serve it. */
export function stamp(p: PreparedStatement, stored: string): StampedStatement {
  return { ...p.statement, timestamp: p.statement.timestamp ?? stored, stored, version: p.statement.version ?? defaultStatementVersion(p.xapiVersion) };
}

// ---------------------------------------------------------------------------------------------
// Statement comparison (xAPI-Data §2.3.1): one implementation for re-sent statements (the store's
// 409-or-no-op decision) and for signed statements (the JWS payload against the statement).
// ---------------------------------------------------------------------------------------------

/**
 * True when a statement received again under a stored id is the stored statement
 * (Communication §2.1.1.s2.b3, §2.1.2.s2.b5): no difference beyond those
 * {@link statementDifference} ignores. `incoming` is the prepared statement (its `version` and
 * `timestamp` only when the client sent them).
 */
export const sameStatement = (incoming: Statement, stored: Statement, version: XapiVersion): boolean =>
  statementDifference(incoming as unknown as Json, stored as unknown as Json, version) === undefined;

type Json = Record<string, unknown>;

/**
 * Where two statements differ, or `undefined` when they are logically equivalent.
 *
 * xAPI-Data §2.3.1 "Statement Comparison Requirements": "Differences which could have been caused by
 * exceptions to Statement immutability MUST be ignored" and "Differences relating to a different
 * serialization of any properties not listed as exceptions MUST not be ignored". The exceptions
 * (§2.3.1.b1–b7), and how each is applied to both sides before a structural comparison:
 *
 * - b1 "Potential or required assignments of properties during LRS processing ('id', 'authority',
 *   'stored', 'timestamp', 'version')": `authority` and `stored` are ignored (the LRS overwrites
 *   them); `id`, `timestamp` and `version` are only assigned when absent, so they are ignored when
 *   either side lacks them and compared otherwise.
 * - b2 Activity Definitions are not part of the statement: `definition` is dropped from every
 *   Activity (object, context activities, SubStatement ones).
 * - b3 A Verb's `display` is not part of the statement: dropped.
 * - b4 Timestamps may be serialized in another timezone: `timestamp` (statement and SubStatement)
 *   is compared as a point in time.
 * - b5 A Group's `member` list is unordered: compared as a multiset.
 * - b6 Attachments are not part of the statement (and a signed payload predates the signature
 *   attachment): `attachments` is ignored.
 * - b7 Case-insensitive properties, e.g. the domain of an e-mail address: the `mailto:` IRI's scheme
 *   and domain, UUIDs (ids, registration) and the context language tag are compared
 *   case-insensitively.
 *
 * Also treated as equivalent: a defaulted `objectType` written or omitted (Activity for objects and
 * context activities, Agent for actors) and a single context Activity written as an object or as a
 * one-element array (the 0.95 form xAPI-Data §2.4.6.2 keeps for compatibility) — they denote the same
 * statement. Everything else is compared as it is, including Result `duration` under 1.0.3
 * (§2.3.1.b8); under 2.0 durations are compared at 0.01 s precision (9274.1.1: an LRS may truncate
 * finer durations, so a statement re-sent or signed with more digits is the same statement).
 */
export function statementDifference(a: Json, b: Json, version: XapiVersion): string | undefined {
  return comparedDifference(comparable(a, version), comparable(b, version));
}

/**
 * A statement as {@link statementDifference} compares it, for comparing one statement with many
 * (a signed payload with every statement declaring it): normalizing costs up to the statement's
 * size (a Group's members are sorted), comparing two normalized ones stops at the first difference.
 */
export const comparable = (statement: Json, version: XapiVersion): Json => normalizeStatement(statement, false, version);

/** {@link statementDifference} of two {@link comparable} statements (neither is changed). */
export function comparedDifference(a: Json, b: Json): string | undefined {
  const x = { ...a };
  const y = { ...b };
  // b1: id, timestamp and version may be assigned by the LRS when absent.
  for (const key of ['id', 'timestamp', 'version']) {
    if (x[key] === undefined || y[key] === undefined) {
      delete x[key];
      delete y[key];
    }
  }
  return jsonDifference(x, y);
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

const lower = (value: unknown): unknown => (typeof value === 'string' ? value.toLowerCase() : value);

function normalizeStatement(statement: Json, isSubStatement: boolean, version: XapiVersion): Json {
  const out: Json = { ...statement };
  if (is2(version) && isObject(out['result']) && typeof out['result']['duration'] === 'string') {
    out['result'] = { ...out['result'], duration: centiseconds(out['result']['duration']) };
  }
  if (!isSubStatement) {
    delete out['authority']; // b1
    delete out['stored']; // b1
    if (out['id'] !== undefined) out['id'] = lower(out['id']); // b7 (UUID)
  }
  delete out['attachments']; // b6
  if (out['timestamp'] !== undefined) out['timestamp'] = instant(out['timestamp']); // b4
  if (out['actor'] !== undefined) out['actor'] = normalizeActor(out['actor']);
  if (isObject(out['verb'])) {
    const verb: Json = { ...out['verb'] };
    delete verb['display']; // b3
    out['verb'] = verb;
  }
  if (out['object'] !== undefined) out['object'] = normalizeObject(out['object'], isSubStatement, version);
  if (isObject(out['context'])) out['context'] = normalizeContext(out['context']);
  return out;
}

function normalizeObject(object: unknown, insideSubStatement: boolean, version: XapiVersion): unknown {
  if (!isObject(object)) return object;
  const type = object['objectType'];
  if (type === undefined || type === 'Activity') return normalizeActivity(object);
  if (type === 'Agent' || type === 'Group') return normalizeActor(object);
  if (type === 'StatementRef') return { ...object, id: lower(object['id']) };
  if (type === 'SubStatement' && !insideSubStatement) return normalizeStatement(object, true, version);
  return object;
}

function normalizeActivity(activity: unknown): unknown {
  if (!isObject(activity)) return activity;
  const out: Json = { ...activity, objectType: 'Activity' };
  delete out['definition']; // b2
  return out;
}

function normalizeActor(actor: unknown): unknown {
  if (!isObject(actor)) return actor;
  const out: Json = { ...actor };
  out['objectType'] ??= 'Agent';
  if (typeof out['mbox'] === 'string') out['mbox'] = normalizeMbox(out['mbox']);
  if (Array.isArray(out['member'])) {
    // b5: members are unordered.
    out['member'] = out['member']
      .map(normalizeActor)
      .map((m) => [canonicalJson(m), m] as const)
      .sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0))
      .map(([, m]) => m);
  }
  return out;
}

/** b7: "the domain portion an e-mail address is case insensitive" (and so is the URI scheme). */
function normalizeMbox(mbox: string): string {
  const at = mbox.lastIndexOf('@');
  const colon = mbox.indexOf(':');
  const scheme = colon === -1 ? '' : mbox.slice(0, colon + 1).toLowerCase();
  const local = mbox.slice(colon + 1, at === -1 ? mbox.length : at);
  const domain = at === -1 ? '' : mbox.slice(at).toLowerCase();
  return scheme + local + domain;
}

function normalizeContext(context: Json): Json {
  const out: Json = { ...context };
  if (out['registration'] !== undefined) out['registration'] = lower(out['registration']);
  if (out['language'] !== undefined) out['language'] = lower(out['language']);
  if (out['instructor'] !== undefined) out['instructor'] = normalizeActor(out['instructor']);
  if (out['team'] !== undefined) out['team'] = normalizeActor(out['team']);
  for (const [list, key] of [
    ['contextAgents', 'agent'],
    ['contextGroups', 'group'],
  ] as const) {
    if (Array.isArray(out[list])) out[list] = (out[list] as unknown[]).map((e) => (isObject(e) ? { ...e, [key]: normalizeActor(e[key]) } : e));
  }
  if (isObject(out['statement'])) out['statement'] = { ...out['statement'], id: lower(out['statement']['id']) };
  if (isObject(out['contextActivities'])) {
    const activities: Json = {};
    for (const [kind, value] of Object.entries(out['contextActivities'])) {
      const list = Array.isArray(value) ? value : value === undefined ? undefined : [value];
      activities[kind] = list?.map(normalizeActivity);
    }
    out['contextActivities'] = activities;
  }
  return out;
}

const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}(?::?\d{2})?)?$/;

/**
 * b4: an ISO 8601 timestamp as the point in time it denotes (whole UTC seconds since the epoch and
 * the fraction digits, trailing zeros dropped) — so that `2013-04-01T12:00:00Z`,
 * `2013-04-01T14:00:00.000+02:00` compare equal, at any sub-second precision. Anything else is
 * compared as it is.
 */
function instant(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const m = TIMESTAMP.exec(value);
  if (m === null) return value;
  const [, y, mo, d, h, mi, s, fraction = '', zone = 'Z'] = m;
  let offsetMinutes = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone[0] === '-' ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    offsetMinutes = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || '0'));
  }
  const seconds = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)) / 1000 - offsetMinutes * 60;
  const frac = fraction.replace(/0+$/, '');
  return frac === '' ? `@${seconds}` : `@${seconds}.${frac}`;
}

/** A duration's seconds truncated to 0.01 s (`PT1.2345S` → `PT1.23S`); other components as they are. */
export function centiseconds(duration: string): string {
  return duration.replace(/(\d+)[.,](\d+)S$/, (_m, whole: string, frac: string) => {
    const f = frac.slice(0, 2).replace(/0+$/, '');
    return f ? `${whole}.${f}S` : `${whole}S`;
  });
}
