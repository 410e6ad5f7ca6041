/** The xAPI 1.0.3 data model as TypeScript types. Validation (validate.ts) guarantees these shapes. */

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

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

export interface Context {
  registration?: string;
  instructor?: Actor;
  team?: Group;
  contextActivities?: ContextActivities;
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

/** A statement after the LRS has filled in id, stored, timestamp, authority and version. */
export interface StoredStatement extends Statement {
  id: string;
  stored: string;
  timestamp: string;
  authority: Actor;
  version: string;
}

export const VOIDED_VERB = 'http://adlnet.gov/expapi/verbs/voided';
export const SIGNATURE_USAGE_TYPE = 'http://adlnet.gov/expapi/attachments/signature';
export const XAPI_VERSION = '1.0.3';
export const SUPPORTED_VERSIONS = ['1.0.3', '1.0.2', '1.0.1', '1.0.0'] as const;
