/**
 * The query parameters of every xAPI resource, declared once (xAPI-Communication §2): what each
 * method accepts, which are required, and of what kind. The server parses requests with
 * `parseParams` and the OpenAPI description (src/http/openapi.ts) is generated from the same
 * table, so the two cannot disagree.
 */
import { ValidationFailed, type ValidationIssue } from '../errors.ts';
import { surrogateMessage, unpairedSurrogate } from './json.ts';
import type { Actor } from './types.ts';
import { isIri, isUuid, parseTimestamp, timestampOutOfRange, validateAgentParam } from './validate.ts';

/**
 * - `iri`: an absolute IRI; `uuid`: lower-cased; `timestamp`: ISO 8601, to epoch ms;
 * - `agent`: an Agent (or, unless `agentOnly`, an identified Group) as JSON;
 * - `int`: a non-negative integer; `bool`: true/false; `enum`: one of `values`;
 * - `id`: a non-empty document id; `cursor`: a paging cursor this server issued (a statement id); `token`: opaque.
 */
export type ParamKind = 'iri' | 'uuid' | 'timestamp' | 'agent' | 'int' | 'bool' | 'enum' | 'id' | 'cursor' | 'token';

export interface ParamSpec {
  name: string;
  kind: ParamKind;
  /** Methods that must send it (HEAD follows GET). */
  requiredFor?: readonly Method[];
  /** Methods that accept it; every method of the resource when omitted. */
  methods?: readonly Method[];
  /** For `agent`: an Agent only, not a Group. */
  agentOnly?: boolean;
  values?: readonly string[];
  /** The value used when absent, as documented. */
  default?: string;
  description: string;
}

export type Method = 'GET' | 'HEAD' | 'PUT' | 'POST' | 'DELETE';

export interface ResourceSpec {
  path: string;
  name: string;
  methods: readonly Method[];
  params: readonly ParamSpec[];
}

const READ = ['GET', 'HEAD'] as const;
const WRITE = ['PUT', 'POST'] as const;
const ALL = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE'] as const;

const activityId = (what: string): ParamSpec => ({ name: 'activityId', kind: 'iri', requiredFor: ALL, description: `The Activity ${what}.` });
const agent = (what: string, agentOnly: boolean): ParamSpec => ({
  name: 'agent',
  kind: 'agent',
  requiredFor: ALL,
  agentOnly,
  description: `${what}, as JSON: an Agent${agentOnly ? ' (not a Group)' : ' or an identified Group'}, e.g. {"mbox":"mailto:ben@example.com"}.`,
});
const since: ParamSpec = {
  name: 'since',
  kind: 'timestamp',
  methods: READ,
  description: 'Without an id: only ids of documents stored or updated after this instant (exclusive).',
};

/** Every xAPI resource with query parameters, in the order the specification lists them. */
export const RESOURCES = {
  statements: {
    path: '/xAPI/statements',
    name: 'Statements',
    methods: ['GET', 'HEAD', 'PUT', 'POST'],
    params: [
      {
        name: 'statementId',
        kind: 'uuid',
        methods: ['GET', 'HEAD', 'PUT'],
        requiredFor: ['PUT'],
        description: 'PUT: the id to store the statement under. GET: the one statement with this id (not a voided one).',
      },
      { name: 'voidedStatementId', kind: 'uuid', methods: READ, description: 'The one voided statement with this id.' },
      { name: 'agent', kind: 'agent', methods: READ, description: 'Statements whose actor or object is this Agent or identified Group (JSON); with related_agents, in any role.' },
      { name: 'verb', kind: 'iri', methods: READ, description: 'Statements with this verb id.' },
      { name: 'activity', kind: 'iri', methods: READ, description: 'Statements whose object is this Activity; with related_activities, in any role.' },
      { name: 'registration', kind: 'uuid', methods: READ, description: 'Statements with this context registration.' },
      { name: 'related_activities', kind: 'bool', methods: READ, default: 'false', description: 'Match `activity` in the context and sub-statements too.' },
      { name: 'related_agents', kind: 'bool', methods: READ, default: 'false', description: 'Match `agent` in the context, authority and sub-statements too.' },
      { name: 'since', kind: 'timestamp', methods: READ, description: 'Statements stored after this instant (exclusive).' },
      { name: 'until', kind: 'timestamp', methods: READ, description: 'Statements stored at or before this instant (inclusive).' },
      {
        name: 'limit',
        kind: 'int',
        methods: READ,
        default: '100',
        description: 'Page size; 0 or above the server maximum (LECTERN_RUNSERVER_MAX_SEARCH_HITS_COUNT) gives the maximum.',
      },
      {
        name: 'format',
        kind: 'enum',
        methods: READ,
        values: ['ids', 'exact', 'canonical'],
        default: 'exact',
        description: "ids: identifiers only for agents, activities and verbs; exact: as stored; canonical: the LRS's definitions, one language per language map (Accept-Language).",
      },
      { name: 'attachments', kind: 'bool', methods: READ, default: 'false', description: "true: a multipart/mixed response with the attachments' data after the JSON." },
      { name: 'ascending', kind: 'bool', methods: READ, default: 'false', description: 'Oldest first.' },
      { name: 'mine', kind: 'bool', methods: READ, default: 'false', description: "Ralph's extension: only statements whose authority is the requesting user's agent." },
      { name: 'search_after', kind: 'cursor', methods: READ, description: 'Paging cursor, as written in the `more` link of the previous page (opaque to clients).' },
      { name: 'pit_id', kind: 'token', methods: READ, description: "Ralph's point-in-time id, accepted for compatibility: paging here needs none." },
    ],
  },
  state: {
    path: '/xAPI/activities/state',
    name: 'State',
    methods: ALL,
    params: [
      activityId('the state belongs to'),
      agent('The Agent the state belongs to', false),
      { name: 'registration', kind: 'uuid', description: 'The registration the state belongs to; without it, GET/DELETE of many documents cover every registration.' },
      { name: 'stateId', kind: 'id', requiredFor: WRITE, description: 'The document id. Without it, GET lists the ids and DELETE removes every matching document.' },
      since,
    ],
  },
  activityProfile: {
    path: '/xAPI/activities/profile',
    name: 'Activity Profile',
    methods: ALL,
    params: [
      activityId('the profile is about'),
      { name: 'profileId', kind: 'id', requiredFor: ['PUT', 'POST', 'DELETE'], description: 'The document id. Without it, GET lists the ids.' },
      since,
    ],
  },
  agentProfile: {
    path: '/xAPI/agents/profile',
    name: 'Agent Profile',
    methods: ALL,
    params: [
      agent('The Agent the profile is about', true),
      { name: 'profileId', kind: 'id', requiredFor: ['PUT', 'POST', 'DELETE'], description: 'The document id. Without it, GET lists the ids.' },
      since,
    ],
  },
  activities: { path: '/xAPI/activities', name: 'Activities', methods: READ, params: [activityId('to describe')] },
  agents: { path: '/xAPI/agents', name: 'Agents', methods: READ, params: [agent('The Agent to describe', true)] },
  about: { path: '/xAPI/about', name: 'About', methods: READ, params: [] },
} satisfies Record<string, ResourceSpec>;

export type ResourceName = keyof typeof RESOURCES;

/** A parsed value by kind: agents as Actor objects, timestamps and ints as numbers. */
export type ParamValue = string | number | boolean | Actor;

/** Whether `spec` applies to `method` (HEAD is a GET). */
export const acceptedBy = (spec: ParamSpec, method: string): boolean => !spec.methods || spec.methods.includes(method as Method);
export const requiredBy = (spec: ParamSpec, method: string): boolean => !!spec.requiredFor?.includes(method as Method);

/** A trailing ` hh`, ` hhmm` or ` hh:mm`: a `+hh:mm` offset whose `+` was not percent-encoded. */
const OFFSET_AS_SPACE = / (\d\d(?::?\d\d)?)$/;

/** Parses one value of `spec`'s kind; reports and returns undefined when it is not one. */
export function parseParamValue(spec: ParamSpec, raw: string, issues: ValidationIssue[]): ParamValue | undefined {
  const loc = ['query', spec.name];
  const bad = (msg: string, type: string) => {
    issues.push({ loc, msg, type });
    return undefined;
  };
  switch (spec.kind) {
    case 'iri':
      return isIri(raw) ? raw : bad('must be an absolute IRI', 'value_error.iri');
    case 'uuid':
      return isUuid(raw) ? raw.toLowerCase() : bad('must be a UUID', 'value_error.uuid');
    case 'timestamp': {
      // An offset's "+" sent unencoded arrives as a space (form decoding): no timestamp has a space there.
      const fixed = OFFSET_AS_SPACE.test(raw) ? raw.replace(OFFSET_AS_SPACE, '+$1') : raw;
      const t = parseTimestamp(raw) ?? parseTimestamp(fixed);
      if (t !== undefined) return t;
      if (timestampOutOfRange(raw) || timestampOutOfRange(fixed))
        return bad('the instant it denotes is outside years 0000-9999 once converted to UTC', 'value_error.datetime_range');
      return bad('must be an ISO 8601 timestamp', 'value_error.datetime');
    }
    case 'int':
      return /^\d+$/.test(raw) ? Number(raw) : bad('must be a non-negative integer', 'type_error.integer');
    case 'bool':
      return raw === 'true' ? true : raw === 'false' ? false : bad('must be true or false', 'type_error.bool');
    case 'enum':
      return spec.values?.includes(raw) ? raw : bad(`must be one of ${spec.values?.join(', ')}`, 'value_error.enum');
    case 'id':
      return raw === '' ? bad('must not be empty', 'value_error.empty') : raw;
    case 'cursor':
      return isUuid(raw) ? raw.toLowerCase() : bad('not a cursor this server issued', 'value_error.cursor');
    case 'token':
      return raw;
    case 'agent': {
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch {
        return bad(`must be an Agent as JSON${spec.agentOnly ? '' : ' (or an identified Group)'}`, 'value_error.json');
      }
      const lone = unpairedSurrogate(raw, value);
      if (lone) {
        issues.push({ loc: [...loc, ...lone.path], msg: surrogateMessage(lone), type: 'value_error.surrogate' });
        return undefined;
      }
      const before = issues.length;
      const actor = validateAgentParam(value, loc, issues);
      if (issues.length !== before || !actor) return undefined;
      if (spec.agentOnly && actor.objectType === 'Group') {
        issues.push({ loc: [...loc, 'objectType'], msg: "must be an Agent, not a Group (use the Group's identifier in an Agent object)", type: 'value_error.not_allowed' });
        return undefined;
      }
      return actor;
    }
  }
}

/**
 * Checks a request's parameters against the table: no unknown ones (names are case-sensitive;
 * a miscased one is told so), none meant for another method, every required one present, each
 * well-formed. Returns the parsed values by name; throws ValidationFailed listing every problem.
 */
export function parseParams(resource: ResourceName, method: string, params: Record<string, string>): Record<string, ParamValue> {
  const specs: readonly ParamSpec[] = RESOURCES[resource].params;
  const issues: ValidationIssue[] = [];
  for (const name of Object.keys(params)) {
    const spec = specs.find((s) => s.name === name);
    if (spec && acceptedBy(spec, method)) continue;
    if (spec) {
      issues.push({ loc: ['query', name], msg: `only ${spec.methods!.join('/')} take ${name}, not ${method}`, type: 'value_error.extra' });
      continue;
    }
    const near = specs.find((s) => s.name.toLowerCase() === name.toLowerCase());
    issues.push({
      loc: ['query', name],
      msg: near ? `unknown parameter (parameter names are case-sensitive: did you mean ${near.name}?)` : 'unknown parameter',
      type: 'value_error.extra',
    });
  }
  const out: Record<string, ParamValue> = {};
  for (const spec of specs) {
    if (!acceptedBy(spec, method)) continue;
    const raw = params[spec.name];
    if (raw === undefined) {
      if (requiredBy(spec, method)) issues.push({ loc: ['query', spec.name], msg: 'field required', type: 'value_error.missing' });
      continue;
    }
    const value = parseParamValue(spec, raw, issues);
    if (value !== undefined) out[spec.name] = value;
  }
  if (issues.length) throw new ValidationFailed(issues);
  return out;
}
