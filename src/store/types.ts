/**
 * The one storage interface every backend implements. Everything is scoped by `tenant` (the
 * store key of the authenticated user: its `target`, '' for the default store). Backends write
 * SQL; nothing above this layer does.
 */
import type { ValidationIssue } from '../errors.ts';
import type { IndexedAgent, PreparedStatement } from '../xapi/statement.ts';
import type { StatementQuery } from '../xapi/query.ts';
import type { ActivityDefinition, Agent } from '../xapi/types.ts';
import type { AttachmentBlob } from '../xapi/attachments.ts';
import type { DocumentKey, DocumentPrecondition, DocumentWriteOptions, StoredDocument } from '../xapi/documents.ts';
import type { InsertOutcome } from '../xapi/insert.ts';

// These types belong to the xAPI layer; re-exported for the backends.
export type { AttachmentBlob } from '../xapi/attachments.ts';
export type { InsertOutcome } from '../xapi/insert.ts';
export type { DocumentKey, DocumentKind, DocumentPrecondition, DocumentWriteOptions, StoredDocument } from '../xapi/documents.ts';

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
  /**
   * Where to continue, when more matching statements exist: for queryStatements the id of the
   * last row (the `more` cursor: positions count every store's writes and never leave the
   * store), for scanStatements the last row's position.
   */
  next?: string;
}

/** A statement queued for a forwarding target, claimed by one process (see Outbox). */
export interface OutboxItem {
  id: string;
  /** Failed attempts so far. */
  attempts: number;
  tenant: string;
  /** The statement JSON as stored (what the LRS serves). */
  json: string;
}

/** One target's forwarding figures: what a metrics exporter, /heartbeat and the CLI show. */
export interface ForwardingStats {
  /** The target's url (never credentials). */
  target: string;
  /** Items waiting to be sent (including those being sent or waiting for a retry). */
  queued: number;
  /** Items delivered since the database was created (a counter). */
  delivered: number;
  /** Failed attempts that were scheduled for a retry (a counter). */
  retried: number;
  /** Dead letters now (`lectern forwarding retry` re-queues them). */
  dead: number;
  /** The error of the newest dead letter. */
  lastError?: string;
}

/** A dead letter as the admin API lists it: which statement of which store, for which target, and why. */
export interface DeadLetter {
  /** The outbox item's id (the paging cursor). */
  id: string;
  /** The target's url. */
  target: string;
  /** The store (tenant) of the statement. */
  store: string;
  statementId: string;
  attempts: number;
  lastError: string | null;
}

/** What became of claimed items; applied in one transaction, only to items the owner still holds. */
export interface OutboxSettlement {
  delivered?: string[];
  /** Back in the queue after `delayMs`, one attempt more. */
  retry?: { id: string; delayMs: number; error: string }[];
  /** Dead letters, one attempt more. */
  dead?: { id: string; error: string }[];
  /** Given back untried (shutdown). */
  release?: string[];
}

/**
 * The forwarding outbox. Rows are written by insertStatements, in its transaction, one per newly
 * stored statement and active target (StoreOptions.forwardTargets). Delivery workers claim rows
 * with a lease: a claimed row is not claimed again until its lease expires, so processes sharing
 * a database never send the same item at once, and the items of a process that died are sent
 * again once their lease runs out.
 */
export interface Outbox {
  /** Claims up to `limit` due, unleased items of `target` for `leaseMs`, oldest due first. */
  claim(target: string, owner: string, limit: number, leaseMs: number): Promise<OutboxItem[]>;
  /** Extends the lease of items `owner` still holds. */
  renew(owner: string, ids: string[], leaseMs: number): Promise<void>;
  settle(target: string, owner: string, settlement: OutboxSettlement): Promise<void>;
  /** Dead letters (of one target, or all) back into the queue, due now, attempts reset; returns how many. With `audit`, its entry in the same transaction (ChangeAudit). */
  requeueDead(target?: string, audit?: ChangeAudit): Promise<number>;
  /** Figures of every target that has items or counters. */
  stats(): Promise<ForwardingStats[]>;
  /** Dead letters (of one target, or all) in id order, after the item `after`, at most `limit`. */
  deadLetters(opts: { target?: string; after?: number; limit: number }): Promise<DeadLetter[]>;
  /**
   * Per target with queued items: the `stored` time (epoch ms) of its oldest queued statement,
   * what its lag is measured from (the queued items are read, not the statements).
   */
  oldestQueued(): Promise<{ target: string; storedMs: number }[]>;
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

/** Opening, checking and closing a backend. */
/** A database server that could not be reached at start-up, after every retry the options allow. */
export class StoreUnreachableError extends Error {
  override name = 'StoreUnreachableError';
}

/** A database server that cannot be used as configured (unknown host, refused credentials or TLS): start-up does not retry it. */
export class StoreRefusedError extends Error {
  override name = 'StoreRefusedError';
}

export interface StoreLifecycle {
  readonly backend: string;
  /** Creates or migrates the schema. */
  migrate(): Promise<void>;
  /** Runs a real query; throws when the database does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
  /** Connection pool figures, for backends that keep a pool (for /metrics). */
  poolStats?(): PoolStats;
  /** Each read replica's state, for backends configured with some (/heartbeat, /metrics). */
  replicas?(): ReplicaStatus[];
}

/** Where a read replica stands, as its process last checked (see docs/scaling.md, "Read replicas"). */
export interface ReplicaStatus {
  /** Its place in LECTERN_POSTGRES_READ_URLS, from 1. */
  replica: number;
  /** host:port/database: no user, no password. */
  server: string;
  /** `up`: read from; the others are not (`starting`: not checked yet). */
  state: 'starting' | 'up' | 'lagging' | 'down' | 'promoted';
  /** How far behind the primary it was (ms), when known. */
  lagMs: number | null;
  /** Reads it failed (each then answered by the primary). */
  fallbacks: number;
}

/** The forwarding outbox and its wake-up (src/forwarding/ delivers it). */
export interface ForwardingStore {
  readonly outbox: Outbox;
  /** Calls `listener` after a commit that queued forwarding items (this process's writes only). */
  onOutboxWrite(listener: () => void): void;
}

/** Statements: the write (all or nothing per request) and the reads of the Statement and Agents resources. */
export interface StatementStore {
  /**
   * Stores a batch in one transaction: all or nothing. Rejects with LrsError 'conflict' when an id
   * is stored with different content (nothing from the batch is stored), 'bad_request' when a
   * statement voids a voiding statement. Applies voiding, keeps activity definitions and
   * attachments, all in the same transaction. The decisions are planInsert's (src/xapi/insert.ts):
   * a backend reads the rows of rowsToRead and writes the plan.
   */
  insertStatements(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[]): Promise<InsertOutcome>;
  /**
   * One statement by id; `voided` selects voided ones only, otherwise voided ones are not found.
   * With `authority` (an IFI key), only a statement of that authority is found.
   */
  getStatement(tenant: string, id: string, voided: boolean, authority?: string): Promise<StoredRow | undefined>;
  /**
   * One page of a statement query. `query.after` is a statement id (the `more` cursor): a
   * ValidationFailed (unknownCursor) when it is not a statement of the tenant (of the filter's
   * authority under `mine`).
   */
  queryStatements(tenant: string, query: StatementQuery): Promise<QueryPage>;
  /**
   * Attachment contents by sha2 (those the store has). With `carrier` (an authority's IFI key):
   * only data a statement of that authority carried (its request sent the data, not only the
   * hash), for a reader restricted to its own statements.
   */
  getAttachments(tenant: string, sha2s: string[], carrier?: string): Promise<AttachmentBlob[]>;
  /** The bytes of the attachment data getAttachments would return for these hashes, by sha2, without reading the data. */
  attachmentSizes(tenant: string, sha2s: string[], carrier?: string): Promise<Map<string, number>>;
  /**
   * For the statements at these positions: the attachment hashes each declares whose data the
   * store has but that its request did not carry (`lectern export` records them, so that an import
   * does not make such a statement a carrier).
   */
  attachmentsNotCarried(tenant: string, positions: string[]): Promise<Map<string, string[]>>;
  /** For each of these hashes, how many statements of the tenant carried its data (a declaration by hash counts none). */
  attachmentCarrierCounts(tenant: string, sha2s: string[]): Promise<Map<string, number>>;
  /** The instant up to which every acknowledged statement is visible to queries. */
  consistentThrough(tenant: string): Promise<Date>;

  /**
   * The newest `limit` statements (JSON, voided ones too) in which an agent with IFI key
   * `agentKey` appears in any role, fewer where their JSON would go past `maxBytes` (at least
   * one; as a statement page): the Agents resource reads the names it was given there.
   */
  statementsWithAgent(tenant: string, agentKey: string, limit: number, maxBytes: number): Promise<string[]>;

  /**
   * The canonical definitions the LRS keeps for these activities (those it has seen one for), by
   * id: DEFINITIONS_PER_QUERY ids per query (src/store/sql.ts), one query after the other.
   */
  getActivityDefinitions(tenant: string, activityIds: string[]): Promise<Map<string, ActivityDefinition>>;

  /**
   * The reads of one request, all from one server (a read replica where the backend has a
   * healthy one), so that their consistentThrough is true of every answer they gave. Without it
   * (or when it returns the store) the store answers them.
   */
  readView?(): StatementReads;
}

/** The reads a GET of the Statement, Activities or Agents resource makes (see StatementStore.readView). */
export type StatementReads = Pick<
  StatementStore,
  'getStatement' | 'queryStatements' | 'getAttachments' | 'attachmentSizes' | 'consistentThrough' | 'statementsWithAgent' | 'getActivityDefinitions'
>;

/** State, Activity Profile and Agent Profile documents. */
export interface DocumentStore {
  getDocument(tenant: string, key: DocumentKey): Promise<StoredDocument | undefined>;
  /**
   * Writes a document. `merge` combines a JSON document with the stored one (POST). Checks
   * `pre` and `maxSize` (the merged document included) and applies the write in one
   * transaction; returns the new document.
   */
  putDocument(tenant: string, key: DocumentKey, doc: { content: Buffer; contentType: string }, opts: DocumentWriteOptions): Promise<StoredDocument>;
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

/** Bulk reads and maintenance writes of the data lifecycle (lectern export / import / erase). */
export interface MaintenanceStore {
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
  /**
   * Runs `fn` unless the background job `job` already runs (PostgreSQL: in any process, by a
   * session advisory lock; SQLite: in this process); undefined when it was not run.
   */
  exclusively<T>(job: string, fn: () => Promise<T>): Promise<T | undefined>;
}

/** One reason a write was refused: a ValidationIssue and, where known, the xAPI requirement it broke. */
export interface RejectionReason {
  loc: (string | number)[];
  msg: string;
  type: string;
  /** The section of the xAPI specification, e.g. `xAPI-Data §2.4.3`. */
  requirement?: string;
}

/** A refused write as the HTTP layer saw it (src/ops/rejections.ts keeps it). */
export interface NewRejection {
  tenant: string;
  atMs: number;
  /** The credential's username. */
  username: string;
  method: string;
  /** The resource path, e.g. `/xAPI/statements`. */
  path: string;
  /** The query parameters (statementId, a document's parameters). */
  query: Record<string, string>;
  status: number;
  reasons: RejectionReason[];
  /** content-type, and a document write's if-match and if-none-match, as sent. */
  headers: Record<string, string>;
  /** X-Experience-API-Version as sent. */
  version: string;
  /** The body up to LECTERN_REJECTIONS_MAX_BODY (a multipart request's JSON part only); undefined when none was read. */
  body?: Buffer;
  /** The body's size as received (more than body.length when cut). */
  bodyBytes: number;
  /** What replay needs of the credential as it was: its agent (JSON), what it may do, its validation mode. */
  writer: string;
}

/** A kept rejection. */
export interface KeptRejection extends NewRejection {
  id: string;
}

export interface RejectionFilter {
  /** One store; every store when undefined. */
  tenant?: string;
  /** Kept at or after this instant. */
  sinceMs?: number;
  /** A reason type, or its prefix up to a dot (`value_error` finds `value_error.iri`). */
  reason?: string;
  /** Ids greater than this (paging, in id order). */
  afterId?: string;
  limit: number;
}

/**
 * Rejected writes (400, 409, 413 on statements and documents), kept per store for the operator to
 * read and replay (src/ops/rejections.ts). Bounded: each keep trims its stores to `max`, each
 * credential to its fair share, oldest first, and drops those older than `keepSinceMs`.
 */
export interface RejectionStore {
  /** Inserts in one transaction, drops rows older than `keepSinceMs`, then trims every store written to `max` rows (fairly between its credentials). */
  keepRejections(items: NewRejection[], bounds: { max: number; keepSinceMs: number }): Promise<void>;
  /** Oldest first. */
  listRejections(filter: RejectionFilter): Promise<KeptRejection[]>;
  getRejection(id: string): Promise<KeptRejection | undefined>;
  /** A replay refused again: its new status, reasons and time. */
  updateRejection(id: string, change: { status: number; reasons: RejectionReason[]; atMs: number }): Promise<void>;
  /** Deletes by id; returns how many. With `audit`, its entry in the same transaction (ChangeAudit). */
  deleteRejections(ids: string[], audit?: ChangeAudit): Promise<number>;
  /** Deletes every rejection of one store, or of all; returns how many. With `audit`, its entry in the same transaction (ChangeAudit). */
  clearRejections(tenant?: string, audit?: ChangeAudit): Promise<number>;
  /**
   * Claims for the replay `claim.token`, until `claim.untilMs`, those of `ids` that no other replay
   * holds (unclaimed, or claimed until before `claim.nowMs`: a replay killed mid-way holds its rows
   * no longer than that), in one transaction; returns the ids claimed.
   */
  claimRejections(ids: string[], claim: RejectionClaim): Promise<string[]>;
  /** Holds the replay's claims until `untilMs`. */
  renewRejectionClaim(token: string, untilMs: number): Promise<number>;
  /** Ends the replay's claims on the rows it still holds; returns how many. With `audit`, its entry in the same transaction (ChangeAudit). */
  releaseRejections(token: string, audit?: ChangeAudit): Promise<number>;
}

/** A replay's hold on kept rejections: who (a random token), until when, and the instant older holds have expired by. */
export interface RejectionClaim {
  token: string;
  untilMs: number;
  nowMs: number;
}

/** A credential as stored (src/ops/credentials.ts makes them, src/auth/database.ts checks them). */
export interface CredentialRow {
  /** The Basic user name, unique. */
  key: string;
  /** base64url SHA-256 of the secret (never the secret). */
  secretHash: string;
  /** After a rotation with a grace: the secret before it, valid until `previousUntilMs`. */
  previousHash?: string;
  previousUntilMs?: number;
  label: string;
  scopes: string[];
  /** The store (tenant) it works in: '' for the default store. */
  target: string;
  agent: Agent;
  /** Undefined: the server's default. */
  validation?: 'strict' | 'lax';
  createdMs: number;
  expiresMs?: number;
  /** Coarse: written at most once a minute per key and process. */
  lastUsedMs?: number;
  revokedMs?: number;
}

/**
 * Credentials (key and secret pairs) kept in the database. Every create, revoke and rotation bumps
 * one change counter in its transaction, so that each process sees a change by reading the counter
 * alone (src/auth/database.ts).
 */
export interface CredentialStore {
  /**
   * Adds a credential and bumps the counter, in one transaction (with `audit`, its entry too:
   * ChangeAudit); LrsError 'conflict' when the key exists (nothing written).
   */
  createCredential(row: CredentialRow, audit?: ChangeAudit): Promise<void>;
  /** One credential by key (revoked ones too). */
  getCredential(key: string): Promise<CredentialRow | undefined>;
  /** Every credential (of one target), in key order. */
  listCredentials(target?: string): Promise<CredentialRow[]>;
  /**
   * Marks it revoked (a second revoke keeps the first time) and bumps the counter (with `audit`,
   * its entry in the same transaction: ChangeAudit); false when the key is unknown (no entry).
   */
  revokeCredential(key: string, atMs: number, audit?: ChangeAudit): Promise<boolean>;
  /**
   * Replaces the secret of a credential not revoked and bumps the counter (with `audit`, its entry
   * in the same transaction: ChangeAudit); with `previousUntilMs`, the current secret stays valid
   * until then (instead of any earlier previous one). False when the key is unknown or revoked
   * (no entry).
   */
  rotateCredential(key: string, secretHash: string, previousUntilMs?: number, audit?: ChangeAudit): Promise<boolean>;
  /** The change counter. */
  credentialsVersion(): Promise<number>;
  /** Raises each key's last use to the instant given (never lowers it); leaves the counter alone. */
  touchCredentials(uses: { key: string; atMs: number }[]): Promise<void>;
}

/**
 * The console sessions signed out before their expiry (./sessions.ts): every process refuses an
 * ended session's cookie, a copy of it included.
 */
export interface SessionStore {
  /** Records the session `id` as ended until `expiresMs` (its own expiry); rows past theirs at `nowMs` are deleted. */
  endSession(id: string, expiresMs: number, nowMs: number): Promise<void>;
  /** Whether the session `id` was ended (the primary's answer: a sign-out is seen at once). */
  sessionEnded(id: string): Promise<boolean>;
}

/** The rules statements stored under lax validation broke (docs/validation.md). */
export interface ViolationStore {
  /** What the statement `id` (voided or not) broke when it was stored: [] for none; undefined when no such statement is stored. */
  statementViolations(tenant: string, id: string): Promise<ValidationIssue[] | undefined>;
  /**
   * For the statements of the tenant at these positions (a page of a scan or a query): what each
   * that was stored with violations broke, by position (`lectern export` writes them beside the
   * statements, so that a restore takes them back).
   */
  violationsAt(tenant: string, positions: string[]): Promise<Map<string, ValidationIssue[]>>;
  /** Which of `ids` (a page of statements) were stored with violations: one query, whatever their number. */
  statementsWithViolations(tenant: string, ids: readonly string[]): Promise<Set<string>>;
}

/** One store (tenant) as the admin API lists it. */
export interface StoreSummary {
  /** The store key ('' for the default store). */
  target: string;
  /** Statements kept, voided ones included. */
  statements: number;
  documents: number;
  /** Epoch milliseconds of the newest statement's `stored`; null when it has none. */
  lastStoredMs: number | null;
}

/**
 * What an audit entry's actor names: a credentials-file user, a database credential's key, an
 * OpenID Connect token's subject, or the OS user the CLI ran as; `unknown` for entries recorded
 * before kinds were (migration 23 on SQLite, 24 on PostgreSQL).
 */
export type ActorKind = 'file-user' | 'database-key' | 'token-subject' | 'os-user' | 'unknown';

/** An admin action to record: who, from where, what, in which store; never a secret. */
export interface AuditRecord {
  timeMs: number;
  /** The user name, credential key or token subject that acted (or the OS user, from the CLI). */
  actor: string;
  /** Which of those `actor` is. */
  actorKind: ActorKind;
  /** `operator`, or `store` (an administrator of `target`); the CLI acts as an operator. */
  role: string;
  /** `http` (the admin API) or `cli`. */
  via: string;
  /** The client's address (behind trusted proxies, the one they forward), or the CLI's host. */
  client: string;
  /** What was done, e.g. `forwarding.retry`, `erase`. */
  action: string;
  /** The store acted on; null for the server as a whole (forwarding). */
  target: string | null;
  /** What was asked and what came of it: counts, keys, urls. */
  details: Record<string, unknown>;
}

/**
 * An admin change's audit entry, written in the change's own transaction: the `audit` argument of
 * createCredential, revokeCredential, rotateCredential, clearRejections, deleteRejections,
 * releaseRejections and Outbox.requeueDead. The change and its entry are stored together or not at all; a change
 * refused (it throws: a key that exists) or that changed nothing (false: an unknown or revoked
 * key) leaves no entry.
 */
export interface ChangeAudit extends AuditRecord {
  /** The property of `details` that records what the change came to (its count: `cleared`, `requeued`…); none when left out. */
  outcome?: string;
}

/** An audit entry as listed: its id (the paging cursor) and time as ISO 8601. */
export interface AuditEntry extends Omit<AuditRecord, 'timeMs'> {
  id: string;
  time: string;
}

export interface AuditFilter {
  target?: string;
  action?: string;
  actor?: string;
  sinceMs?: number;
  untilMs?: number;
  /** Only entries older than this id (the next page). */
  before?: number;
  limit: number;
}

/**
 * A store's figures for the console's Overview (./overview.ts), from the counts maintained as
 * statements are written (migration 16 on SQLite, 17 on PostgreSQL), not from the statements.
 */
export interface StoreOverview {
  /** Statements kept (voided ones included): the sum of the maintained counts. */
  statements: number;
  /** Statements per UTC day of `stored` from `sinceDay` on (days since 1970-01-01), days with none left out. */
  days: { day: number; statements: number }[];
  /** The verbs of the most statements since `sinceDay`, most first. */
  topVerbs: { verb: string; statements: number }[];
  /** Statements since `sinceDay` of every verb not in `topVerbs` (those beyond it, and a day's "other" row). */
  otherVerbs: number;
  /** Statements stored per minute (epoch minutes) from `sinceMinute` on, by every process; minutes with none left out. */
  minutes: { minute: number; statements: number }[];
  /** Epoch milliseconds of the newest statement's `stored`; null when it has none. */
  lastStoredMs: number | null;
  /** Kept rejections of the store since `rejectionsSinceMs`. */
  rejections: number;
}

export interface OverviewQuery {
  sinceDay: number;
  sinceMinute: number;
  topVerbs: number;
  rejectionsSinceMs: number;
}

/** One store's line in the operator's compact view of every store. */
export interface StoreTotals {
  target: string;
  statements: number;
  /** Statements since `sinceDay`. */
  recent: number;
}

/** The admin API's reads and its audit log (./admin.ts). */
export interface AdminStore {
  /** Every store with its figures (the default store always), or only `only` (zeros when empty). */
  storeSummaries(only?: string): Promise<StoreSummary[]>;
  /** One store's Overview figures (zeros when it holds nothing). */
  storeOverview(tenant: string, query: OverviewQuery): Promise<StoreOverview>;
  /** Every store with statements: its total and those since `sinceDay`, from the maintained counts. */
  storeTotals(sinceDay: number): Promise<StoreTotals[]>;
  /** Every store's key, the default store ('') always (cheap: nothing counted). */
  storeNames(): Promise<string[]>;
  appendAudit(record: AuditRecord): Promise<AuditEntry>;
  /** Newest first. */
  listAudit(filter: AuditFilter): Promise<AuditEntry[]>;
}

/** Which of a store's keys: its verbs, its activities, or its agents (./keys.ts). */
export type KeyKind = 'verb' | 'activity' | 'agent';

/** A search of a store's keys dictionary: those of a kind containing `contains`, or among `keys`. */
export interface KeyQuery {
  kind: KeyKind;
  /** Text the key contains, ignoring case ('' matches every key of the kind). */
  contains?: string;
  /** Exactly these keys (those of the kind the store has). */
  keys?: string[];
  /** At most this many, by key (at most KEYS_MAX). */
  limit: number;
}

/** A key of a store, with the name it goes by when one is known. */
export interface KeyMatch {
  /** The verb's or activity's IRI, or the agent's key (src/xapi/agents.ts, ifiKey). */
  key: string;
  /** A verb's display or an activity's name (a language map). */
  display?: Record<string, string>;
  /** An agent's name. */
  name?: string;
}

/** The store's keys dictionary searched (./keys.ts): what the console suggests and the names it shows. */
export interface KeysStore {
  findKeys(tenant: string, query: KeyQuery): Promise<KeyMatch[]>;
}

/** Everything a backend implements; callers may depend on just the part they use. */
export type Store = StoreLifecycle &
  ForwardingStore &
  StatementStore &
  DocumentStore &
  MaintenanceStore &
  CredentialStore &
  RejectionStore &
  ViolationStore &
  AdminStore &
  SessionStore &
  KeysStore;
