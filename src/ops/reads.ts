/**
 * Reading what the LRS keeps: statements (one, or a page of a query), the two views assembled from
 * them (the canonical Activity, an Agent's Person), documents, and the store's own verbs, activities
 * and agents as the console suggests them. What the xAPI GETs
 * (src/http/xapi/) and the console's pages (src/http/console/) share. The caller has already
 * checked the reader's scopes; the reads keep it to its store and, when its access says so, to
 * its own statements. Statement reads go to one view of the store (`readView`), so that the
 * Consistent-Through reported with them is true of every read of one answer or page.
 */
import { LrsError } from '../errors.ts';
import type { DocumentKind, DocumentStore, KeyKind, KeysStore, StatementReads, StatementStore, StoredDocument, StoredRow } from '../store/types.ts';
import { canonicalActivity } from '../xapi/activity.ts';
import { actorFromKey, actorKeys, ifiKey } from '../xapi/agents.ts';
import { type AttachmentBlob, attachmentHashes, attachmentsToServe } from '../xapi/attachments.ts';
import { parseDocumentParams, resourceName } from '../xapi/documents.ts';
import { activityIdsOf, CANONICAL_DEFINITIONS_MAX, canonicalStatement, forReader, idsStatement, needsConversion } from '../xapi/formats.ts';
import { type LanguagePreferences, languagePreferences, parseAcceptLanguage, pickLanguage } from '../xapi/languages.ts';
import { parseParams } from '../xapi/params.ts';
import { type Person, personOf } from '../xapi/person.ts';
import { moreUrl, parseStatementRequest, type StatementFormat } from '../xapi/query.ts';
import type { Activity, Actor, ActivityDefinition, Agent, Statement } from '../xapi/types.ts';
import type { XapiVersion } from '../xapi/versions.ts';

/** Who reads: its store, its agent, and whether it may read only statements of its own authority. */
export interface Reader {
  target: string;
  agent: Actor;
  /** `statements/read/mine` without `statements/read`, or LECTERN_LRS_RESTRICT_BY_AUTHORITY. */
  mineOnly: boolean;
}

/** The reads of one answer or page: a healthy read replica, else the store itself. */
export const readView = (store: Pick<StatementStore, 'readView'> & StatementReads): StatementReads => store.readView?.() ?? store;

/** The time up to which the view has every statement (the epoch when it cannot say). */
export const consistentThrough = (reads: Pick<StatementReads, 'consistentThrough'>, tenant: string): Promise<Date> => reads.consistentThrough(tenant).catch(() => new Date(0));

/** How statements are read and shaped for a reader. */
export interface StatementReadOptions {
  /** LECTERN_MAX_SEARCH_HITS: the largest page. */
  maxSearchHits: number;
  /** LECTERN_MAX_PAGE_BYTES: a page's statement JSON (and attachment data) at most. */
  maxPageBytes: number;
  /** LECTERN_XAPI_STRICT_VERSION: 2.0 statements converted for 1.0.3 readers. */
  strictVersion: boolean;
  /** The version the reader reads under. */
  version: XapiVersion;
  /** Accept-Language, for format=canonical. */
  languages?: string;
  /** The path `more` links point at. */
  basePath: string;
}

/** What a statements GET reads, shaped for its reader. */
export interface StatementsRead {
  /** One statement asked for by id (statementId, voidedStatementId): `jsons` holds it alone. */
  single: boolean;
  /** The statements' JSON texts in the format asked for; `exact` ones as stored, unless converted. */
  jsons: string[];
  /** The next page's relative URL under `basePath` (a StatementResult's `more`), '' on the last. */
  more: string;
  /** The newest `stored` among the statements (Last-Modified), epoch ms. */
  lastStoredMs?: number;
  /** With attachments=true: the data of the attachments served with the statements. */
  attachments?: AttachmentBlob[];
  /** What `reads` had all of, read after the statements. */
  through: Date;
}

/**
 * Reads one statement, or a page of a query, by the Statement resource's GET parameters
 * (Communication §2.1.3; 400 for bad ones, 404 for an id not stored or not the reader's to read).
 */
export async function readStatements(reads: StatementReads, reader: Reader, params: Record<string, string>, opts: StatementReadOptions): Promise<StatementsRead> {
  const own = Object.assign(Object.create(null) as Record<string, string>, params);
  const parsed = parseStatementRequest(own, { maxLimit: opts.maxSearchHits, maxBytes: opts.maxPageBytes, mineAgent: reader.agent, onlyMine: reader.mineOnly });
  if (parsed.kind === 'single') {
    // Another authority's statement, for a reader restricted to its own, is as absent as a missing one.
    const row = await reads.getStatement(reader.target, parsed.id, parsed.voided, parsed.authority);
    if (!row) throw new LrsError('not_found', `no ${parsed.voided ? 'voided ' : ''}statement with id ${parsed.id}`);
    const shaped = await shape(reads, reader, [row], parsed, opts);
    return { single: true, ...shaped, more: '', lastStoredMs: row.storedMs, through: await consistentThrough(reads, reader.target) };
  }
  const page = await reads.queryStatements(reader.target, parsed.query);
  const more = page.next ? moreUrl(opts.basePath, parsed.params, page.next) : '';
  const shaped = await shape(reads, reader, page.rows, parsed.query, opts);
  const lastStoredMs = page.rows.length ? Math.max(...page.rows.map((r) => r.storedMs)) : undefined;
  return { single: false, ...shaped, more, lastStoredMs, through: await consistentThrough(reads, reader.target) };
}

/** Longest run of a page's rewriting before the event loop is given back (see mapInTurns). */
const TURN_MS = 20;

/**
 * `items.map(fn)`, giving the event loop back whenever a turn has run for TURN_MS: a statement
 * may be megabytes (tens of thousands of context activities), and a page of them parsed and
 * rewritten at once would hold every other request meanwhile (docs/security.md, "Input and resources").
 */
async function mapInTurns<T, R>(items: readonly T[], fn: (item: T) => R): Promise<R[]> {
  const out: R[] = [];
  let turn = performance.now();
  for (const item of items) {
    out.push(fn(item));
    if (performance.now() - turn > TURN_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      turn = performance.now();
    }
  }
  return out;
}

/**
 * mapInTurns for work done in steps (`fn` returns a generator that yields after each step): the
 * event loop is given back after every step as well, so one large item does not hold it.
 */
async function mapInSteps<T, R>(items: readonly T[], fn: (item: T) => Generator<void, R, void>): Promise<R[]> {
  const out: R[] = [];
  let turn = performance.now();
  const giveBack = async () => {
    await new Promise((resolve) => setImmediate(resolve));
    turn = performance.now();
  };
  for (const item of items) {
    const steps = fn(item);
    let r = steps.next();
    for (; !r.done; r = steps.next()) await giveBack();
    out.push(r.value);
    if (performance.now() - turn > TURN_MS) await giveBack();
  }
  return out;
}

/**
 * The statements of `rows` as the reader gets them: the stored JSON texts as they are for `exact`
 * (no parse/serialise round trip on the hot path), rewritten for `ids`/`canonical`; with
 * `attachments`, the data of every attachment of the statements that fits in the page.
 */
async function shape(
  reads: StatementReads,
  reader: Reader,
  rows: StoredRow[],
  asked: { format: StatementFormat; attachments: boolean },
  opts: StatementReadOptions,
): Promise<{ jsons: string[]; attachments?: AttachmentBlob[] }> {
  const stored = rows.map((r) => r.json);
  // A 1.0.3 reader of 2.0 statements under LECTERN_XAPI_STRICT_VERSION gets them converted.
  const convert = opts.strictVersion && stored.some((j) => needsConversion(j, opts.version));
  if (asked.format === 'exact' && !asked.attachments && !convert) return { jsons: stored };
  const statements = await mapInTurns(stored, (j) => forReader(JSON.parse(j) as Statement, opts.version, opts.strictVersion));
  const jsons = await formatted(reads, reader, statements, asked.format, opts.languages);
  if (!asked.attachments) return { jsons };
  const room = opts.maxPageBytes - rows.reduce((n, r) => n + Buffer.byteLength(r.json, 'utf8'), 0);
  return { jsons, attachments: await attachmentData(reads, reader, statements, room) };
}

/** The statements in `format`, as JSON texts. */
async function formatted(reads: StatementReads, reader: Reader, statements: Statement[], format: StatementFormat, languages: string | undefined): Promise<string[]> {
  if (format === 'exact') return mapInTurns(statements, (s) => JSON.stringify(s));
  if (format === 'ids') return mapInTurns(statements, (s) => JSON.stringify(idsStatement(s)));
  // The canonical definitions are assembled from every statement of the store: a reader
  // restricted to its own statements gets each statement's own definitions (language-filtered).
  // Others get them for the page's first CANONICAL_DEFINITIONS_MAX activities, read in chunks.
  const definitions = reader.mineOnly
    ? new Map<string, ActivityDefinition>()
    : await reads.getActivityDefinitions(reader.target, activityIdsOf(statements, CANONICAL_DEFINITIONS_MAX));
  const preferences = languagePreferences(parseAcceptLanguage(languages));
  return mapInSteps(statements, function* (s) {
    return JSON.stringify(yield* canonicalStatement(s, definitions, preferences));
  });
}

/**
 * The attachment data served with `statements`: none for those with a fileUrl and no data
 * received, nor for those whose data only statements this reader may not read carried (a
 * declaration by hash gives nothing). Their sizes first: what is read is what fits in `room`.
 */
async function attachmentData(reads: StatementReads, reader: Reader, statements: Statement[], room: number): Promise<AttachmentBlob[]> {
  const hashes = [...new Set(statements.flatMap(attachmentHashes))];
  const carrier = reader.mineOnly ? (actorKeys(reader.agent)[0] ?? '') : undefined;
  const sizes = hashes.length ? await reads.attachmentSizes(reader.target, hashes, carrier) : new Map<string, number>();
  const served = attachmentsToServe(statements, sizes, room);
  return served.length ? reads.getAttachments(reader.target, served, carrier) : [];
}

/**
 * Both views are assembled from every statement of the store: a reader restricted to its own
 * statements (LECTERN_LRS_RESTRICT_BY_AUTHORITY; with scopes alone such a user lacks
 * `statements/read` and never gets here) would read other authorities' definitions and names.
 */
function everyStatementReadable(reader: Reader, resource: string): void {
  if (reader.mineOnly) {
    throw new LrsError('forbidden', `${resource} is assembled from every statement of the store, and LECTERN_LRS_RESTRICT_BY_AUTHORITY lets this user read only its own`);
  }
}

/** The Activities resource (§2.5): the canonical definition, or a bare Activity when none is known (§2.5.s2.b1). */
export async function readActivity(reads: StatementReads, reader: Reader, params: Record<string, string>, method = 'GET'): Promise<Activity> {
  const id = parseParams('activities', method, params).activityId as string;
  everyStatementReadable(reader, 'the Activities resource');
  const definition = (await reads.getActivityDefinitions(reader.target, [id])).get(id);
  return canonicalActivity(id, definition);
}

/**
 * Statements read for the names of an agent: enough for every name a real agent goes by; fewer
 * when they hold more than a statement page may (each is parsed whole).
 */
const PERSON_STATEMENTS = 200;

/** The Agents resource (§2.4): a Person object for an Agent (not a Group, §2.4.s2), known or not (§2.4.s3.b3). */
export async function readPerson(reads: StatementReads, reader: Reader, params: Record<string, string>, maxPageBytes: number, method = 'GET'): Promise<Person> {
  const agent = parseParams('agents', method, params).agent as Agent;
  everyStatementReadable(reader, 'the Agents resource');
  const key = ifiKey(agent);
  const seen = key === undefined ? [] : await reads.statementsWithAgent(reader.target, key, PERSON_STATEMENTS, maxPageBytes);
  return personOf(
    agent,
    seen.map((j) => JSON.parse(j) as Statement),
  );
}

/**
 * A State, Activity Profile or Agent Profile document by its parameters (§2.3, §2.6, §2.7), or,
 * without its id, the ids of the documents they select (404 for a document not stored).
 */
export async function readDocuments(
  store: Pick<DocumentStore, 'getDocument' | 'listDocumentIds'>,
  tenant: string,
  kind: DocumentKind,
  params: Record<string, string>,
  method = 'GET',
): Promise<{ ids: string[] } | { document: StoredDocument }> {
  const target = parseDocumentParams(kind, method, Object.assign(Object.create(null) as Record<string, string>, params));
  if (target.docId === undefined) return { ids: await store.listDocumentIds(tenant, target.scope, target.since) };
  const document = await store.getDocument(tenant, { ...target.scope, docId: target.docId });
  if (!document) throw new LrsError('not_found', `no ${resourceName(kind)} document with that ${kind === 'state' ? 'stateId' : 'profileId'} here`);
  return { document };
}

/** The kinds of keys suggested. */
export const KEY_KINDS: readonly KeyKind[] = ['verb', 'activity', 'agent'];
/** The longest text suggestions are asked for. */
export const SUGGEST_TEXT_MAX = 200;
/** Suggestions one answer carries at most. */
export const SUGGESTIONS_MAX = 20;

/** One of the store's verbs, activities or agents, as suggested for a filter. */
export interface Suggestion {
  /** The verb's or activity's IRI; an agent's identifier alone, as Agent JSON. */
  value: string;
  /** An agent's identifier alone. */
  agent?: Agent;
  /** The name it goes by (a verb's display, an activity's name, in the reader's language; an agent's name), when known. */
  name?: string;
}

/** The reader's preferred languages (Accept-Language), English when it says none. */
const preferences = (languages: string | undefined): LanguagePreferences => languagePreferences(parseAcceptLanguage(languages || 'en'));

const oneName = (map: Record<string, string> | undefined, prefs: LanguagePreferences): string | undefined => (map ? Object.values(pickLanguage(map, prefs))[0] : undefined);

/**
 * The store's verbs, activities or agents whose IRI or identifier contains `text` (ignoring
 * case), by it, at most SUGGESTIONS_MAX: a search of the store's keys dictionary, never of its
 * statements. Drawn from every statement of the store, like the two views: a reader restricted
 * to its own statements is refused.
 */
export async function suggestKeys(store: Pick<KeysStore, 'findKeys'>, reader: Reader, input: { kind: string; text: string; languages?: string }): Promise<Suggestion[]> {
  const kind = KEY_KINDS.find((k) => k === input.kind);
  if (!kind) throw new LrsError('bad_request', `kind: one of ${KEY_KINDS.join(', ')}`);
  if (input.text.length > SUGGEST_TEXT_MAX) throw new LrsError('bad_request', `q: at most ${SUGGEST_TEXT_MAX} characters`);
  everyStatementReadable(reader, 'Suggestions');
  const found = await store.findKeys(reader.target, { kind, contains: input.text, limit: SUGGESTIONS_MAX });
  const prefs = preferences(input.languages);
  return found.flatMap((k): Suggestion[] => {
    const name = k.name ?? oneName(k.display, prefs);
    const named = name === undefined ? {} : { name };
    if (kind !== 'agent') return [{ value: k.key, ...named }];
    const agent = actorFromKey(k.key);
    if (!agent) return [];
    const { objectType: _, ...ifi } = agent;
    return [{ value: JSON.stringify(ifi), agent: ifi, ...named }];
  });
}

/** The displays of `verbs` the store has (from the newest statement of each), in the reader's language. */
export async function verbDisplays(store: Pick<KeysStore, 'findKeys'>, reader: Reader, verbs: string[], languages?: string): Promise<Map<string, string>> {
  everyStatementReadable(reader, 'Verb displays');
  const prefs = preferences(languages);
  const out = new Map<string, string>();
  for (let i = 0; i < verbs.length; i += SUGGESTIONS_MAX) {
    for (const k of await store.findKeys(reader.target, { kind: 'verb', keys: verbs.slice(i, i + SUGGESTIONS_MAX), limit: SUGGESTIONS_MAX })) {
      const name = oneName(k.display, prefs);
      if (name !== undefined) out.set(k.key, name);
    }
  }
  return out;
}
