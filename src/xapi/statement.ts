/**
 * Turning validated statements into what the store keeps: LRS-set properties, the rows that index
 * a statement by agent and activity, voiding targets, and statement comparison (xAPI-Data §2.3.1).
 */
import { randomUUID } from 'node:crypto';
import { LrsError } from '../errors.ts';
import { actorKeys } from './agents.ts';
import type { Activity, ActivityDefinition, Actor, Context, Statement, StatementObject, SubStatement } from './types.ts';
import { VOIDED_VERB } from './types.ts';

export interface IndexedAgent {
  key: string;
  /** true when the agent is the actor or object (the plain `agent` filter); false for related roles. */
  direct: boolean;
}

export interface IndexedActivity {
  id: string;
  /** true when the activity is the statement's object (the plain `activity` filter). */
  direct: boolean;
}

/** A validated statement with everything the store needs; `stored`/`timestamp` are set by the store. */
export interface PreparedStatement {
  id: string;
  statement: Statement & { id: string };
  verb: string;
  registration: string | null;
  /** Id of the statement this one targets through a StatementRef object (voiding included). */
  refId: string | null;
  /** Id of the statement this one voids, when it is a voiding statement. */
  voids: string | null;
  agents: IndexedAgent[];
  activities: IndexedActivity[];
  /** Activity definitions this statement carries, for the canonical Activity the LRS maintains. */
  definitions: { id: string; definition: ActivityDefinition }[];
  /** sha2 of each attachment the statement declares. */
  attachmentHashes: string[];
}

export const isVoiding = (s: Statement): boolean => s.verb.id === VOIDED_VERB && s.object.objectType === 'StatementRef';

/** Collects index rows; a key seen both directly and indirectly is kept once, as direct. */
class IndexCollector {
  private agents = new Map<string, boolean>();
  private activities = new Map<string, boolean>();
  readonly definitions: { id: string; definition: ActivityDefinition }[] = [];

  actor(actor: Actor | undefined, direct: boolean): void {
    if (!actor) return;
    for (const k of actorKeys(actor)) this.agents.set(k, direct || (this.agents.get(k) ?? false));
  }

  activity(a: Activity, direct: boolean): void {
    this.activities.set(a.id, direct || (this.activities.get(a.id) ?? false));
    if (a.definition) this.definitions.push({ id: a.id, definition: a.definition });
  }

  object(o: StatementObject, direct: boolean): void {
    switch (o.objectType) {
      case undefined:
      case 'Activity':
        this.activity(o as Activity, direct);
        break;
      case 'Agent':
      case 'Group':
        this.actor(o, direct);
        break;
      case 'SubStatement':
        this.sub(o);
        break;
      default:
        break; // StatementRef: handled by refId, not indexed here
    }
  }

  context(c: Context | undefined): void {
    if (!c) return;
    this.actor(c.instructor, false);
    this.actor(c.team, false);
    const ca = c.contextActivities;
    if (ca) for (const list of [ca.parent, ca.grouping, ca.category, ca.other]) for (const a of list ?? []) this.activity(a, false);
  }

  sub(s: SubStatement): void {
    this.actor(s.actor, false);
    this.object(s.object, false);
    this.context(s.context);
  }

  result(): { agents: IndexedAgent[]; activities: IndexedActivity[] } {
    return {
      agents: [...this.agents].map(([key, direct]) => ({ key, direct })),
      activities: [...this.activities].map(([id, direct]) => ({ id, direct })),
    };
  }
}

/**
 * Prepares a validated statement for storage: assigns an id when absent, sets `authority` (the
 * LRS overrides whatever the client sent) and `version` (1.0.0 when absent).
 */
export function prepareStatement(input: Statement, authority: Actor): PreparedStatement {
  const statement = { ...input, id: input.id ?? randomUUID(), authority, version: input.version ?? '1.0.0' };
  const c = new IndexCollector();
  c.actor(statement.actor, true);
  c.object(statement.object, true);
  c.actor(statement.authority, false);
  c.context(statement.context);
  const ref = statement.object.objectType === 'StatementRef' ? statement.object.id : null;
  return {
    id: statement.id.toLowerCase() === statement.id ? statement.id : statement.id.toLowerCase(),
    statement,
    verb: statement.verb.id,
    registration: statement.context?.registration?.toLowerCase() ?? null,
    refId: ref?.toLowerCase() ?? null,
    voids: isVoiding(statement) && ref ? ref.toLowerCase() : null,
    ...c.result(),
    definitions: c.definitions,
    attachmentHashes: (statement.attachments ?? []).map((a) => a.sha2),
  };
}

/** Prepares a whole batch; two statements with one id reject the batch (spec 2.1.2.s2.b6). */
export function prepareBatch(statements: Statement[], authority: Actor): PreparedStatement[] {
  const seen = new Set<string>();
  return statements.map((s, i) => {
    const p = prepareStatement(s, authority);
    if (seen.has(p.id)) throw new LrsError('bad_request', `statement ${i} repeats the id ${p.id} of an earlier statement in the batch`);
    seen.add(p.id);
    return p;
  });
}

/** Sets the LRS-assigned time properties; returns the statement as the LRS will serve it. */
export function stamp(p: PreparedStatement, stored: string): Statement & { id: string; stored: string; timestamp: string } {
  return { ...p.statement, timestamp: p.statement.timestamp ?? stored, stored };
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => deepEqual(v, bb[i]));
  }
  const ak = Object.keys(a);
  const bo = b as Record<string, unknown>;
  if (ak.length !== Object.keys(bo).length) return false;
  return ak.every((k) => Object.hasOwn(bo, k) && deepEqual((a as Record<string, unknown>)[k], bo[k]));
}

/** Properties the LRS may assign, so they never make two statements differ (xAPI-Data 2.3.1). */
const LRS_ASSIGNED = ['id', 'authority', 'stored', 'timestamp', 'version'] as const;

/**
 * Statement comparison (xAPI-Data 2.3.1.s9): differences the immutability exceptions allow are
 * ignored — LRS-assigned properties (when the incoming statement leaves them to the LRS),
 * attachments, and the order of properties.
 */
export function sameStatement(incoming: Statement, stored: Statement): boolean {
  const strip = (s: Statement, keepGiven: Statement): Record<string, unknown> => {
    const o: Record<string, unknown> = { ...s };
    for (const k of LRS_ASSIGNED) if (k === 'authority' || k === 'stored' || keepGiven[k] === undefined) delete o[k];
    delete o.attachments;
    return o;
  };
  return deepEqual(strip(incoming, incoming), strip(stored, incoming));
}
