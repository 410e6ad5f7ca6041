/**
 * The one storage interface every backend implements. Everything is scoped by `tenant` (the
 * store key of the authenticated user: its `target`, '' for the default store). Backends write
 * SQL; nothing above this layer does.
 */
import type { PreparedStatement } from '../xapi/statement.ts';
import type { StatementQuery } from '../xapi/query.ts';
import type { ActivityDefinition } from '../xapi/types.ts';
import type { AttachmentBlob } from '../xapi/attachments.ts';
import type { DocumentKey, DocumentPrecondition, StoredDocument } from '../xapi/documents.ts';
import type { InsertOutcome } from '../xapi/insert.ts';

// These types belong to the xAPI layer; re-exported for the backends.
export type { AttachmentBlob } from '../xapi/attachments.ts';
export type { InsertOutcome } from '../xapi/insert.ts';
export type { DocumentKey, DocumentKind, DocumentPrecondition, StoredDocument } from '../xapi/documents.ts';

/** A statement as stored: the JSON the LRS serves, and its position in stored order. */
export interface StoredRow {
  /** The full statement JSON text (as received plus the LRS-set properties). */
  json: string;
  /** Epoch milliseconds of `stored`. */
  storedMs: number;
  /** Opaque, time-ordered position used by keyset paging (`more` links). */
  position: string;
}

export interface QueryPage {
  rows: StoredRow[];
  /** Position to continue after, when more matching statements exist. */
  next?: string;
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
   * attachments, all in the same transaction. The decisions are planInsert's (src/xapi/insert.ts):
   * a backend reads the rows of rowsToRead and writes the plan.
   */
  insertStatements(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[]): Promise<InsertOutcome>;
  /** One statement by id; `voided` selects voided ones only, otherwise voided ones are not found. */
  getStatement(tenant: string, id: string, voided: boolean): Promise<StoredRow | undefined>;
  queryStatements(tenant: string, query: StatementQuery): Promise<QueryPage>;
  /** Attachment contents by sha2 (those the store has). */
  getAttachments(tenant: string, sha2s: string[]): Promise<AttachmentBlob[]>;
  /** The instant up to which every acknowledged statement is visible to queries. */
  consistentThrough(tenant: string): Promise<Date>;

  /**
   * The newest `limit` statements (JSON, voided ones too) in which an agent with IFI key
   * `agentKey` appears in any role: the Agents resource reads the names it was given there.
   */
  statementsWithAgent(tenant: string, agentKey: string, limit: number): Promise<string[]>;

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
