/**
 * Erasure of one person from a store (GDPR art. 17): every statement in which they stand anywhere
 * (src/xapi/erasure.ts), the statements that void or otherwise target those (transitively), the
 * attachments no remaining statement links, and their State and Agent Profile documents. Or, with
 * a pseudonymization key, their replacement by a keyed pseudonym everywhere, the statements kept.
 * Interruptible between batches: what is done stays done, and a re-run finishes the rest.
 */
import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import type { DocumentKey, KeptRejection, RejectionStore, Store, StatementRewrite, StoredRow } from '../store/types.ts';
import { actorFromKey, actorKeys, ifiKey } from '../xapi/agents.ts';
import { mentionsPerson, personKey, pseudonymFor, pseudonymizeStatement } from '../xapi/erasure.ts';
import { indexRows } from '../xapi/statement.ts';
import type { Actor, Agent, Statement } from '../xapi/types.ts';
import type { OnProgress } from './progress.ts';

const PAGE = 1000;
const CHUNK = 500;
const DOCUMENT_PAGE = 500;

export interface ErasureRequest {
  tenant: string;
  /** The Agent (or identified Group). */
  person: Actor;
  /** Replace the person by a pseudonym keyed with this secret instead of erasing (LECTERN_PSEUDONYMIZE_KEY). */
  pseudonymizeKey?: string;
  /** Count what would be done; change nothing. */
  dryRun?: boolean;
  /** Also return the id of each statement and the key of each document concerned. */
  list?: boolean;
  /** Stops the work after the batch in hand (the report then says `complete: false`). */
  signal?: AbortSignal;
  /** `scan`: every statement of the store read (`found`: those concerned so far); `delete`: statements deleted. */
  onProgress?: OnProgress<'scan' | 'delete', { found?: number }>;
}

/** What was (or, dry, would be) done: counts only, never who or what the data was (it is audited). */
export interface ErasureReport {
  action: 'erase' | 'pseudonymize';
  dryRun: boolean;
  target: string;
  statements: number;
  /** Of `statements`: those that void or target an erased statement without naming the person. */
  referring?: number;
  attachments?: number;
  documents: number;
  /** Kept rejections (src/ops/rejections.ts) whose body or parameters mention the person: removed even under --pseudonymize. */
  rejections?: number;
  complete: boolean;
}

export interface Erasure {
  report: ErasureReport;
  /** With `list`: the statements concerned (erased: the person's, then those targeting them) and the documents. */
  listed: { statements: string[]; documents: DocumentKey[] };
}

/** The person's State and Agent Profile documents (the key compared as personKey does). */
async function documentsOf(store: Store, tenant: string, key: string): Promise<DocumentKey[]> {
  const out: DocumentKey[] = [];
  let after: DocumentKey | undefined;
  for (;;) {
    const page = await store.scanDocuments(tenant, { after, limit: DOCUMENT_PAGE });
    for (const d of page) if (d.key.kind !== 'activity_profile' && personKey(actorFromKey(d.key.agent)) === key) out.push(d.key);
    if (page.length < DOCUMENT_PAGE) return out;
    after = page[page.length - 1].key;
  }
}

/** A statement to be erased that declares attachments: where it stands, and the hashes it declares. */
interface Declaring {
  position: string;
  hashes: string[];
}

function declaringOf(row: StoredRow, s: Statement): Declaring | undefined {
  return s.attachments?.length ? { position: row.position, hashes: [...new Set(s.attachments.map((a) => a.sha2))] } : undefined;
}

/**
 * How many attachments deleteStatements would remove with the erased statements, as it decides:
 * the data of each hash they declare goes when every statement of the store that carried it is
 * erased. Held in memory: the erased statements' declarations only, never the store's.
 */
async function removableAttachments(store: Store, tenant: string, declaring: Declaring[]): Promise<number> {
  const carriedHere = new Map<string, number>();
  const hashes = new Set<string>();
  for (let i = 0; i < declaring.length; i += CHUNK) {
    const chunk = declaring.slice(i, i + CHUNK);
    const notCarried = await store.attachmentsNotCarried(
      tenant,
      chunk.map((d) => d.position),
    );
    for (const d of chunk) {
      const skip = new Set(notCarried.get(d.position));
      for (const h of d.hashes) {
        hashes.add(h);
        if (!skip.has(h)) carriedHere.set(h, (carriedHere.get(h) ?? 0) + 1);
      }
    }
  }
  const all = [...hashes];
  let n = 0;
  for (let i = 0; i < all.length; i += CHUNK) {
    const chunk = all.slice(i, i + CHUNK);
    const carried = await store.attachmentCarrierCounts(tenant, chunk);
    const gone = chunk.filter((h) => (carried.get(h) ?? 0) <= (carriedHere.get(h) ?? 0));
    if (gone.length) n += (await store.attachmentSizes(tenant, gone)).size;
  }
  return n;
}

/**
 * What names a person in a kept body: `texts`, lists whose strings must all appear (an account:
 * its home page and name), lower-cased, an mbox's SHA-1 among them (a body may carry it as
 * `mbox_sha1sum`); `sha1`, the person's `mbox_sha1sum`, which a body may carry as the plain mbox
 * it is the hash of (xAPI: the SHA-1 of the mailto IRI).
 */
interface Needles {
  texts: string[][];
  sha1: Set<string>;
}

const sha1Hex = (text: string): string => createHash('sha1').update(text).digest('hex');

/** An mbox as written and with personKey's case rules (scheme and domain lower-cased): one person either way. */
const mboxForms = (mbox: string): string[] => [...new Set([mbox, personKey({ mbox })!.slice('mbox:'.length)])];

function needlesOf(person: Actor): Needles {
  const p = person as Agent;
  const texts: string[][] = [];
  const sha1 = new Set<string>();
  if (p.mbox) texts.push([p.mbox.toLowerCase()], ...mboxForms(p.mbox).map((form) => [sha1Hex(form)]));
  if (p.mbox_sha1sum) {
    texts.push([p.mbox_sha1sum.toLowerCase()]);
    sha1.add(p.mbox_sha1sum.toLowerCase());
  }
  if (p.openid) texts.push([p.openid.toLowerCase()]);
  if (p.account) texts.push([p.account.homePage.toLowerCase(), p.account.name.toLowerCase()]);
  return { texts, sha1 };
}

/** A mailto IRI in JSON or other text: up to a character an unquoted address cannot hold. */
const MAILTO = /mailto:[^\s"'<>\\,;()[\]{}]+/gi;

/**
 * Whether a rejection's body or parameters name the person (its text, and its JSON re-serialised
 * without escapes): one of their identifiers, or an mbox whose SHA-1 is theirs (the body's own
 * case kept for the hash).
 */
function mentions(r: KeptRejection, needles: Needles): boolean {
  const body = r.body?.toString('utf8') ?? '';
  let parsed = '';
  try {
    parsed = JSON.stringify(JSON.parse(body));
  } catch {
    // A cut or non-JSON body: its text is searched as it is.
  }
  const text = `${body}\n${parsed}\n${JSON.stringify(r.query)}\n${Object.values(r.query).join('\n')}`;
  const hay = text.toLowerCase();
  if (needles.texts.some((all) => all.every((n) => hay.includes(n)))) return true;
  for (const [mbox] of needles.sha1.size ? text.matchAll(MAILTO) : []) {
    if (mboxForms(mbox).some((form) => needles.sha1.has(sha1Hex(form)))) return true;
  }
  return false;
}

/**
 * Removes (or, dry, counts) the kept rejections (src/ops/rejections.ts) of a store whose body or
 * parameters mention the person: they hold learners' data too. Returns how many.
 */
async function eraseRejectionsOf(store: RejectionStore, tenant: string, person: Actor, dryRun: boolean): Promise<number> {
  const needles = needlesOf(person);
  if (!needles.texts.length) return 0;
  const found: string[] = [];
  for (let afterId: string | undefined; ; ) {
    const page = await store.listRejections({ tenant, afterId, limit: 500 });
    for (const r of page) if (mentions(r, needles)) found.push(r.id);
    if (page.length < 500) break;
    afterId = page[page.length - 1].id;
  }
  return dryRun || !found.length ? found.length : store.deleteRejections(found);
}

export async function erasePerson(store: Store, req: ErasureRequest): Promise<Erasure> {
  const key = personKey(req.person)!;
  const { tenant, signal, onProgress } = req;
  const dryRun = req.dryRun === true;
  const pseudonym = req.pseudonymizeKey === undefined ? undefined : pseudonymFor(key, req.pseudonymizeKey);
  const report: ErasureReport = { action: pseudonym ? 'pseudonymize' : 'erase', dryRun, target: tenant, statements: 0, documents: 0, complete: false };
  const listed: Erasure['listed'] = { statements: [], documents: [] };
  const ids: string[] = [];
  onProgress?.({ type: 'start', phase: 'scan', total: await store.countStatements(tenant, {}) });
  // One pass over the store in stored order: the person may stand where no index reaches
  // (SubStatement context, xAPI 2.0 context agents), so every statement is looked at.
  let after: string | undefined;
  let scanned = 0;
  // A dry erasure counts the attachment data the real one would remove (removableAttachments).
  const declaring: Declaring[] | undefined = dryRun && !pseudonym ? [] : undefined;
  for (;;) {
    if (signal?.aborted) break;
    const page = await store.scanStatements(tenant, { after, limit: PAGE });
    const rewrites: StatementRewrite[] = [];
    for (const row of page.rows) {
      const s = JSON.parse(row.json) as Statement & { id: string };
      if (!mentionsPerson(s, key)) continue;
      report.statements++;
      if (!pseudonym) {
        ids.push(s.id);
        const d = declaring ? declaringOf(row, s) : undefined;
        if (d) declaring?.push(d);
        continue;
      }
      if (req.list) listed.statements.push(s.id);
      const next = pseudonymizeStatement(s, key, pseudonym);
      rewrites.push({ id: s.id, json: JSON.stringify(next), agents: indexRows(next).agents, authorityKey: next.authority ? (actorKeys(next.authority)[0] ?? null) : null });
    }
    if (rewrites.length && !dryRun) await store.rewriteStatements(tenant, rewrites);
    scanned += page.rows.length;
    onProgress?.({ type: 'advance', phase: 'scan', done: scanned, found: report.statements });
    if (!page.next) break;
    after = page.next;
  }
  onProgress?.({ type: 'end', phase: 'scan' });
  if (!signal?.aborted && !pseudonym) {
    // Statements voiding or targeting erased ones, layer by layer; deleted referrers first, so an
    // interrupted run leaves nothing that a re-run would no longer find.
    const layers: string[][] = [ids];
    const seen = new Set(ids);
    for (let layer = ids; layer.length; ) {
      const next: string[] = [];
      for (let i = 0; i < layer.length; i += CHUNK) {
        for (const id of await store.referringStatements(tenant, layer.slice(i, i + CHUNK))) {
          if (seen.has(id)) continue;
          seen.add(id);
          next.push(id);
          if (!declaring) continue;
          const row = (await store.getStatement(tenant, id, false)) ?? (await store.getStatement(tenant, id, true));
          const d = row && declaringOf(row, JSON.parse(row.json) as Statement);
          if (d) declaring.push(d);
        }
      }
      if (next.length) layers.push(next);
      layer = next;
    }
    if (req.list) listed.statements.push(...seen);
    report.referring = seen.size - ids.length;
    report.statements = seen.size;
    report.attachments = declaring ? await removableAttachments(store, tenant, declaring) : 0;
    if (!dryRun) {
      onProgress?.({ type: 'start', phase: 'delete', total: seen.size });
      let deleted = 0;
      outer: for (const layer of layers.reverse()) {
        for (let i = 0; i < layer.length; i += CHUNK) {
          if (signal?.aborted) break outer;
          const r = await store.deleteStatements(tenant, layer.slice(i, i + CHUNK));
          deleted += r.statements;
          report.attachments += r.attachments;
          onProgress?.({ type: 'advance', phase: 'delete', done: deleted });
        }
      }
      onProgress?.({ type: 'end', phase: 'delete' });
      report.statements = deleted;
    }
  }
  if (!signal?.aborted) {
    const docs = await documentsOf(store, tenant, key);
    report.documents = docs.length;
    if (req.list) listed.documents = docs;
    if (!dryRun && docs.length) {
      if (pseudonym) await store.moveDocuments(tenant, docs, ifiKey(pseudonym)!);
      else for (const d of docs) await store.deleteDocument(tenant, d, {});
    }
    // A refused write is not data the LRS serves: it goes, whatever becomes of the statements.
    report.rejections = await eraseRejectionsOf(store, tenant, req.person, dryRun);
    report.complete = true;
  }
  return { report, listed };
}

/** What an erasure's audit records: its start (what was begun), then its end (the report, or that it failed). */
export type ErasureAudit =
  | { phase: 'start'; action: ErasureReport['action']; target: string; dryRun: false }
  | ({ phase: 'end' } & ErasureReport)
  | { phase: 'end'; action: ErasureReport['action']; target: string; failed: true };

/**
 * Appends an audit line of an erasure that changes the store: what, when, by whom (the operator,
 * not the person erased, and what kind of name that is), how many. Never the person or any
 * statement content.
 */
export function auditErasure(file: string, what: ErasureAudit, by: { command: string; user: string; userKind: string; host: string; time: Date }): void {
  const audit = { time: by.time.toISOString(), command: by.command, user: by.user, userKind: by.userKind, host: by.host, ...what };
  appendFileSync(file, `${JSON.stringify(audit)}\n`);
}
