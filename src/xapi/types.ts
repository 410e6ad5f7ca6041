/**
 * The xAPI data model (1.0.3, and what 2.0 adds: contextAgents/contextGroups) as TypeScript types.
 * Validation (validate.ts) guarantees these shapes for the request's version.
 */

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };

export type LanguageMap = Record<string, string>;
export type Extensions = Record<string, JsonValue>;

export interface Account {
  homePage: string;
  name: string;
}

export interface Agent {
  objectType?: 'Agent';
  name?: string;
  mbox?: string;
  mbox_sha1sum?: string;
  openid?: string;
  account?: Account;
}

export interface Group {
  objectType: 'Group';
  name?: string;
  mbox?: string;
  mbox_sha1sum?: string;
  openid?: string;
  account?: Account;
  member?: Agent[];
}

export type Actor = Agent | Group;

export interface Verb {
  id: string;
  display?: LanguageMap;
}

export interface InteractionComponent {
  id: string;
  description?: LanguageMap;
}

export interface ActivityDefinition {
  name?: LanguageMap;
  description?: LanguageMap;
  type?: string;
  moreInfo?: string;
  extensions?: Extensions;
  interactionType?: string;
  correctResponsesPattern?: string[];
  choices?: InteractionComponent[];
  scale?: InteractionComponent[];
  source?: InteractionComponent[];
  target?: InteractionComponent[];
  steps?: InteractionComponent[];
}

export interface Activity {
  objectType?: 'Activity';
  id: string;
  definition?: ActivityDefinition;
}

export interface StatementRef {
  objectType: 'StatementRef';
  id: string;
}

export interface SubStatement {
  objectType: 'SubStatement';
  actor: Actor;
  verb: Verb;
  object: Activity | Agent | Group | StatementRef;
  result?: Result;
  context?: Context;
  timestamp?: string;
  attachments?: Attachment[];
}

export type StatementObject = Activity | Agent | Group | StatementRef | SubStatement;

export interface Score {
  scaled?: number;
  raw?: number;
  min?: number;
  max?: number;
}

export interface Result {
  score?: Score;
  success?: boolean;
  completion?: boolean;
  response?: string;
  duration?: string;
  extensions?: Extensions;
}

export interface ContextActivities {
  parent?: Activity[];
  grouping?: Activity[];
  category?: Activity[];
  other?: Activity[];
}

/** 2.0: an Agent the statement relates to beyond its actor, with why (relevantTypes). */
export interface ContextAgent {
  objectType: 'contextAgent';
  agent: Agent;
  relevantTypes?: string[];
}

/** 2.0: a Group the statement relates to, with why (relevantTypes). */
export interface ContextGroup {
  objectType: 'contextGroup';
  group: Group;
  relevantTypes?: string[];
}

export interface Context {
  registration?: string;
  instructor?: Actor;
  team?: Group;
  contextActivities?: ContextActivities;
  contextAgents?: ContextAgent[];
  contextGroups?: ContextGroup[];
  revision?: string;
  platform?: string;
  language?: string;
  statement?: StatementRef;
  extensions?: Extensions;
}

export interface Attachment {
  usageType: string;
  display: LanguageMap;
  description?: LanguageMap;
  contentType: string;
  length: number;
  sha2: string;
  fileUrl?: string;
}

export interface Statement {
  id?: string;
  actor: Actor;
  verb: Verb;
  object: StatementObject;
  result?: Result;
  context?: Context;
  timestamp?: string;
  stored?: string;
  authority?: Actor;
  version?: string;
  attachments?: Attachment[];
}

export const VOIDED_VERB = 'http://adlnet.gov/expapi/verbs/voided';
export const SIGNATURE_USAGE_TYPE = 'http://adlnet.gov/expapi/attachments/signature';
