/**
 * The Store members that run a shared program, written once for every backend: the document
 * resources, kept rejections, credentials, the admin API's figures and audit log, the console's
 * ended sessions and the keys dictionary's searches. A backend extends SharedStore (its connection
 * class does) and provides its dialect (./dialect.ts) and how it runs a program: alone
 * (runProgram) or in one transaction (runTransaction). Adding such a member is one method here, with its signature in ./types.ts,
 * and its SQL: in the shared program, or in each backend's dialect where the backends differ. The
 * admin changes take an optional audit entry, appended in the change's own transaction
 * (ChangeAudit, ./admin.ts).
 */
import * as admin from './admin.ts';
import * as credentials from './credentials.ts';
import type { StoreDialect } from './dialect.ts';
import * as docs from './documents.ts';
import * as keys from './keys.ts';
import * as overview from './overview.ts';
import type { Program, ProgramRunner } from './program.ts';
import * as rejections from './rejections.ts';
import * as sessions from './sessions.ts';
import type {
  AuditEntry,
  AuditFilter,
  AuditRecord,
  ChangeAudit,
  CredentialRow,
  DocumentKey,
  DocumentPrecondition,
  DocumentWriteOptions,
  KeptRejection,
  KeyedDocument,
  KeyMatch,
  KeyQuery,
  NewRejection,
  OverviewQuery,
  RejectionClaim,
  RejectionFilter,
  RejectionReason,
  Store,
  StoredDocument,
  StoreOverview,
  StoreSummary,
  StoreTotals,
} from './types.ts';

/** The members SharedStore writes. */
export type SharedMember =
  | 'getDocument'
  | 'putDocument'
  | 'deleteDocument'
  | 'listDocumentIds'
  | 'deleteDocuments'
  | 'scanDocuments'
  | 'moveDocuments'
  | 'keepRejections'
  | 'listRejections'
  | 'getRejection'
  | 'updateRejection'
  | 'deleteRejections'
  | 'clearRejections'
  | 'claimRejections'
  | 'renewRejectionClaim'
  | 'releaseRejections'
  | 'createCredential'
  | 'getCredential'
  | 'listCredentials'
  | 'revokeCredential'
  | 'rotateCredential'
  | 'credentialsVersion'
  | 'touchCredentials'
  | 'storeNames'
  | 'storeSummaries'
  | 'storeOverview'
  | 'storeTotals'
  | 'appendAudit'
  | 'listAudit'
  | 'endSession'
  | 'sessionEnded'
  | 'findKeys';

export abstract class SharedStore implements Pick<Store, SharedMember> {
  /** What differs in the backend's SQL. */
  protected abstract readonly dialect: StoreDialect;
  /** Runs a program alone: a read, or a write of one statement where runWrite says so. */
  protected abstract runProgram<T>(program: Program<T>): Promise<T>;
  /** Runs a program in one transaction: all of its writes or none. */
  protected abstract runTransaction<T>(program: Program<T>, begin?: string): Promise<T>;

  /**
   * A write of one statement: in a transaction of its own, unless the backend overrides it
   * (PostgreSQL: the statement commits alone, without BEGIN and COMMIT round trips).
   */
  protected runWrite<T>(program: Program<T>): Promise<T> {
    return this.runTransaction(program);
  }

  /** An admin change: `run` as it is, or with `audit`, in one transaction with its entry (ChangeAudit). */
  protected change<T>(program: Program<T>, audit: ChangeAudit | undefined, run: (p: Program<T>) => Promise<T>): Promise<T> {
    return audit ? this.runTransaction(admin.audited(program, audit)) : run(program);
  }

  /** The two as a runner (what the forwarding outbox runs its programs on). */
  protected readonly runner: ProgramRunner = { run: (p) => this.runProgram(p), transaction: (p, begin) => this.runTransaction(p, begin) };

  // ----- documents (./documents.ts) -----------------------------------------------------------

  getDocument(tenant: string, key: DocumentKey): Promise<StoredDocument | undefined> {
    return this.runProgram(docs.getDocument(this.dialect.documents, tenant, key));
  }

  putDocument(tenant: string, key: DocumentKey, doc: { content: Buffer; contentType: string }, opts: DocumentWriteOptions): Promise<StoredDocument> {
    return this.runTransaction(docs.putDocument(this.dialect.documents, tenant, key, doc, opts));
  }

  deleteDocument(tenant: string, key: DocumentKey, pre: DocumentPrecondition): Promise<void> {
    return this.runTransaction(docs.deleteDocument(this.dialect.documents, tenant, key, pre));
  }

  listDocumentIds(tenant: string, key: Omit<DocumentKey, 'docId'>, sinceMs?: number): Promise<string[]> {
    return this.runProgram(docs.listDocumentIds(tenant, key, sinceMs));
  }

  deleteDocuments(tenant: string, key: Omit<DocumentKey, 'docId'>): Promise<void> {
    return this.runWrite(docs.deleteDocuments(tenant, key));
  }

  scanDocuments(tenant: string, opts: { after?: DocumentKey; limit: number }): Promise<KeyedDocument[]> {
    return this.runProgram(docs.scanDocuments(this.dialect.documents, tenant, opts));
  }

  async moveDocuments(tenant: string, keys: DocumentKey[], agentKey: string): Promise<void> {
    if (keys.length) await this.runTransaction(docs.moveDocuments(this.dialect.documents, tenant, keys, agentKey));
  }

  // ----- kept rejections (./rejections.ts) ----------------------------------------------------

  keepRejections(items: NewRejection[], bounds: { max: number; keepSinceMs: number }): Promise<void> {
    return this.runTransaction(rejections.keepRejections(items, bounds));
  }

  listRejections(filter: RejectionFilter): Promise<KeptRejection[]> {
    return this.runProgram(rejections.listRejections(filter));
  }

  getRejection(id: string): Promise<KeptRejection | undefined> {
    return this.runProgram(rejections.getRejection(id));
  }

  updateRejection(id: string, change: { status: number; reasons: RejectionReason[]; atMs: number }): Promise<void> {
    return this.runWrite(rejections.updateRejection(id, change));
  }

  deleteRejections(ids: string[], audit?: ChangeAudit): Promise<number> {
    return this.change(rejections.deleteRejections(ids), audit, (p) => this.runTransaction(p));
  }

  clearRejections(tenant?: string, audit?: ChangeAudit): Promise<number> {
    return this.change(rejections.clearRejections(tenant), audit, (p) => this.runWrite(p));
  }

  claimRejections(ids: string[], claim: RejectionClaim): Promise<string[]> {
    return this.runTransaction(rejections.claimRejections(ids, claim));
  }

  renewRejectionClaim(token: string, untilMs: number): Promise<number> {
    return this.runWrite(rejections.renewRejectionClaim(token, untilMs));
  }

  releaseRejections(token: string, audit?: ChangeAudit): Promise<number> {
    return this.change(rejections.releaseRejections(token), audit, (p) => this.runWrite(p));
  }

  // ----- credentials (./credentials.ts) -------------------------------------------------------

  createCredential(row: CredentialRow, audit?: ChangeAudit): Promise<void> {
    return this.change(credentials.createCredential(row), audit, (p) => this.runTransaction(p));
  }

  getCredential(key: string): Promise<CredentialRow | undefined> {
    return this.runProgram(credentials.getCredential(key));
  }

  listCredentials(target?: string): Promise<CredentialRow[]> {
    return this.runProgram(credentials.listCredentials(target));
  }

  revokeCredential(key: string, atMs: number, audit?: ChangeAudit): Promise<boolean> {
    return this.change(credentials.revokeCredential(key, atMs), audit, (p) => this.runTransaction(p));
  }

  rotateCredential(key: string, secretHash: string, previousUntilMs?: number, audit?: ChangeAudit): Promise<boolean> {
    return this.change(credentials.rotateCredential(key, secretHash, previousUntilMs), audit, (p) => this.runTransaction(p));
  }

  credentialsVersion(): Promise<number> {
    return this.runProgram(credentials.credentialsVersion());
  }

  async touchCredentials(uses: { key: string; atMs: number }[]): Promise<void> {
    if (uses.length) await this.runTransaction(credentials.touchCredentials(uses));
  }

  // ----- the admin API (./admin.ts, ./overview.ts) --------------------------------------------

  storeNames(): Promise<string[]> {
    return this.runProgram(admin.storeNames());
  }

  storeSummaries(only?: string): Promise<StoreSummary[]> {
    return this.runProgram(admin.storeSummaries(only));
  }

  storeOverview(tenant: string, query: OverviewQuery): Promise<StoreOverview> {
    return this.runProgram(overview.storeOverview(tenant, query));
  }

  storeTotals(sinceDay: number): Promise<StoreTotals[]> {
    return this.runProgram(overview.storeTotals(sinceDay));
  }

  appendAudit(record: AuditRecord): Promise<AuditEntry> {
    return this.runWrite(admin.appendAudit(record));
  }

  listAudit(filter: AuditFilter): Promise<AuditEntry[]> {
    return this.runProgram(admin.listAudit(filter));
  }

  // ----- the console's ended sessions (./sessions.ts) -----------------------------------------

  endSession(id: string, expiresMs: number, nowMs: number): Promise<void> {
    return this.runTransaction(sessions.endSession(id, expiresMs, nowMs));
  }

  sessionEnded(id: string): Promise<boolean> {
    return this.runProgram(sessions.sessionEnded(id));
  }

  // ----- the keys dictionary (./keys.ts) ------------------------------------------------------

  findKeys(tenant: string, query: KeyQuery): Promise<KeyMatch[]> {
    return keys.findKeys((p) => this.runProgram(p), this.dialect.keys, tenant, query);
  }
}
