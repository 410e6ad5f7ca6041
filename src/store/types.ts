/**
 * The one storage interface every backend implements. Everything is scoped by `tenant` (the
 * store key of the authenticated user: its `target`, '' for the default store). Backends write
 * SQL; nothing above this layer does.
 */
import type { PreparedStatement } from '../xapi/statement.ts';
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

/** A connection pool's state. */
export interface PoolStats {
  /** Connections open (busy and idle). */
  total: number;
  idle: number;
  /** Requests waiting for a free connection. */
  waiting: number;
  max: number;
}

export interface Store {
  readonly backend: string;
  /** Creates or migrates the schema. */
  migrate(): Promise<void>;
  /** Runs a real query; throws when the database does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
  /** Connection pool figures, for backends that keep a pool (for /metrics). */
  poolStats?(): PoolStats;

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
}
