/**
 * The one storage interface every backend implements. Everything is scoped by `tenant` (the
 * store key of the authenticated user: its `target`, '' for the default store). Backends write
 * SQL; nothing above this layer does.
 */
import type { IndexedAgent, PreparedStatement } from '../xapi/statement.ts';
import type { StatementQuery } from '../xapi/query.ts';
import type { ActivityDefinition } from '../xapi/types.ts';

/** A statement as stored: the JSON the LRS serves, and its position in stored order. */
export interface StoredRow {
  /** The full statement JSON text (as received plus the LRS-set properties). */
  json: string;
  /** Epoch milliseconds of `stored`. */
  storedMs: number;
  /** Opaque, time-ordered position used by keyset paging (`more` links). */
  position: string;
}

export interface InsertOutcome {
  /** Ids in input order; each was inserted now or was already stored with the same content. */
  ids: string[];
  /** How many of them were new. */
  inserted: number;
}

export interface AttachmentBlob {
  sha2: string;
  contentType: string;
  content: Buffer;
}

export interface QueryPage {
  rows: StoredRow[];
  /** Position to continue after, when more matching statements exist. */
  next?: string;
}

export type DocumentKind = 'state' | 'activity_profile' | 'agent_profile';

/** Identifies one document. Unused parts are ''. */
export interface DocumentKey {
  kind: DocumentKind;
  activityId: string;
  /** IFI key of the agent (state, agent profile). */
  agent: string;
  registration: string;
  docId: string;
}

export interface StoredDocument {
  content: Buffer;
  contentType: string;
  /** Quoted SHA-1 of the content. */
  etag: string;
  updatedMs: number;
}

/** Preconditions checked in the same transaction as the write (by checkPrecondition in src/xapi/documents.ts). */
export interface DocumentPrecondition {
  ifMatch?: string[];
  ifNoneMatchAny?: boolean;
  /** If-None-Match entity tags other than `*`: 412 when the current ETag is one of them. */
  ifNoneMatch?: string[];
  /** Profile PUT with neither header (§3.1.s4.b13, §3.1.s3.b1): 409 when the document exists, 400 when it does not. */
  conflictIfExists?: boolean;
}

/** A stored document with its key (bulk export, erasure). */
export interface KeyedDocument extends StoredDocument {
  key: DocumentKey;
}

/** A stored statement's new JSON and agent index rows (pseudonymisation): id, position and `stored` stay. */
export interface StatementRewrite {
  id: string;
  json: string;
  agents: IndexedAgent[];
  authorityKey: string | null;
}

export interface Store {
  readonly backend: string;
  /** Creates or migrates the schema. */
  migrate(): Promise<void>;
  /** Runs a real query; throws when the database does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;

  /**
   * Stores a batch in one transaction: all or nothing. Rejects with LrsError 'conflict' when an id
   * is stored with different content (nothing from the batch is stored), 'bad_request' when a
   * statement voids a voiding statement. Applies voiding, keeps activity definitions and
   * attachments, all in the same transaction.
   */
  insertStatements(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[]): Promise<InsertOutcome>;
  /** One statement by id; `voided` selects voided ones only, otherwise voided ones are not found. */
  getStatement(tenant: string, id: string, voided: boolean): Promise<StoredRow | undefined>;
  queryStatements(tenant: string, query: StatementQuery): Promise<QueryPage>;
  /** Attachment contents by sha2 (those the store has). */
  getAttachments(tenant: string, sha2s: string[]): Promise<AttachmentBlob[]>;
  /** The instant up to which every acknowledged statement is visible to queries. */
  consistentThrough(tenant: string): Promise<Date>;

  /** The canonical definition the LRS keeps for an activity, if it has seen one. */
  getActivityDefinition(tenant: string, activityId: string): Promise<ActivityDefinition | undefined>;

  getDocument(tenant: string, key: DocumentKey): Promise<StoredDocument | undefined>;
  /**
   * Writes a document. `merge` combines a JSON document with the stored one (POST). Checks
   * `pre` and applies the write in one transaction; returns the new document.
   */
  putDocument(
    tenant: string,
    key: DocumentKey,
    doc: { content: Buffer; contentType: string },
    opts: { merge: boolean; pre: DocumentPrecondition },
  ): Promise<StoredDocument>;
  deleteDocument(tenant: string, key: DocumentKey, pre: DocumentPrecondition): Promise<void>;
  /**
   * Distinct ids of the documents matching `key` with docId ignored, updated after `sinceMs`, in id
   * order. For these two scope methods `registration: ''` matches every registration (§2.3.s4,
   * §2.3.s5: "Activity + Agent [+ registration if specified]").
   */
  listDocumentIds(tenant: string, key: Omit<DocumentKey, 'docId'>, sinceMs?: number): Promise<string[]>;
  /** Deletes every document matching `key` with docId ignored (state resource multi-delete); registration as above. */
  deleteDocuments(tenant: string, key: Omit<DocumentKey, 'docId'>): Promise<void>;

  // ----- data lifecycle (lectern export / import / erase) ------------------------------------

  /**
   * Every stored statement (voided ones included) in stored order after position `after`, at most
   * `limit`; `sinceMs` (exclusive) and `untilMs` (inclusive) bound `stored`. `next` as for queries.
   */
  scanStatements(tenant: string, opts: { after?: string; limit: number; sinceMs?: number; untilMs?: number }): Promise<QueryPage>;
  /** How many statements scanStatements would return from the start (for progress). */
  countStatements(tenant: string, opts: { sinceMs?: number; untilMs?: number }): Promise<number>;
  /** Ids of the statements whose StatementRef object targets one of `ids` (voiding ones included). */
  referringStatements(tenant: string, ids: string[]): Promise<string[]>;
  /**
   * Deletes statements by id in one transaction, with their agent/activity/attachment link rows
   * and the attachments no remaining statement of the tenant links; returns how many of each.
   */
  deleteStatements(tenant: string, ids: string[]): Promise<{ statements: number; attachments: number }>;
  /** Replaces statements' JSON and agent index rows in one transaction. */
  rewriteStatements(tenant: string, rows: StatementRewrite[]): Promise<void>;
  /** Documents of every kind in key order after `after`, at most `limit`, content included. */
  scanDocuments(tenant: string, opts: { after?: DocumentKey; limit: number }): Promise<KeyedDocument[]>;
  /** Moves documents to another agent key in one transaction, replacing what is there. */
  moveDocuments(tenant: string, keys: DocumentKey[], agentKey: string): Promise<void>;
}
