/**
 * The console's Statements pages (the list with its filters, its live tail and downloads, one
 * statement) and the Learner page. They read through the same use cases as the xAPI GETs
 * (src/ops/reads.ts), as the session's user, each page's statement reads on one view.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LrsError } from '../../errors.ts';
import { type Reader, readDocuments, readPerson, readStatements, type StatementsRead, type Suggestion, suggestKeys } from '../../ops/reads.ts';
import type { DocumentKind, StatementReads } from '../../store/types.ts';
import { RESOURCE_SCOPES } from '../access.ts';
import { errorPage } from './pages.ts';
import type { ConsoleDoor } from './kit.ts';
import type { Session } from './session.ts';
import {
  agentParam,
  agentText,
  DEFAULT_EXPORT_FIELDS,
  type DidYouMean,
  EXPORT_FIELDS,
  FILTERS,
  ifiOf,
  learnerPage,
  statementPage,
  statementRow,
  statementsPage,
  statementsUrl,
  type Filters,
} from './views.ts';

/** Most statements one download carries: narrow the query (since/until) for more. */
export const DOWNLOAD_MAX = 100_000;
/** How far back from the newest statement shown each poll of the live tail looks. */
const TAIL_OVERLAP_MS = 5000;
/** The header an xAPI statements answer carries, which the console's pages of statements carry too. */
const CONSISTENT_THROUGH = 'x-experience-api-consistent-through';
/** Where the console's `more` links point. */
const STATEMENTS_PAGE = '/console/statements';

export function registerStatementPages(app: FastifyInstance, door: ConsoleDoor): void {
  app.get('/console/statements', (request, reply) => statementsRoute(door, request, reply));
  app.get('/console/statements/tail', (request, reply) => tailRoute(door, request, reply));
  app.get('/console/statements/download', (request, reply) => downloadRoute(door, request, reply));
  app.get('/console/statements/:id', (request, reply) => statementRoute(door, request, reply));
  app.get('/console/learner', (request, reply) => learnerRoute(door, request, reply));
  app.get('/console/suggest', (request, reply) => suggestRoute(door, request, reply));
}

function filtersOf(query: Record<string, string>): Filters {
  const f: Filters = {};
  for (const k of FILTERS) {
    const v = query[k]?.trim();
    if (v) f[k] = k === 'agent' ? agentParam(v) : v;
  }
  return f;
}

/** A read's refusal as a page shows it: its status, and its detail as one line. */
type Refused = { ok: false; status: number; detail: string };

/** The refusal of a read (an LrsError); anything else goes on (a 500). */
function refused(err: unknown): Refused {
  if (!(err instanceof LrsError)) throw err;
  const detail = err.issues ? err.issues.map((i) => `${i.loc.slice(1).join('.')}: ${i.msg}`).join('; ') : err.message;
  return { ok: false, status: err.status, detail };
}

/** A page of statements (or one), parsed, with its `more` link and the Consistent-Through of the view that read it. */
type Page = { statements: Record<string, unknown>[]; more: string; through: string };

/** Reads statements by the Statement resource's parameters as the session's user, on `reads`. */
async function statementsOf(door: ConsoleDoor, s: Session, params: Record<string, string>, reads: StatementReads): Promise<{ ok: true; page: Page } | Refused> {
  try {
    const { config } = door.deps;
    const opts = {
      maxSearchHits: config.maxSearchHits,
      maxPageBytes: config.maxPageBytes,
      strictVersion: config.xapiStrictVersion,
      version: door.version,
      basePath: STATEMENTS_PAGE,
    };
    const read: StatementsRead = await readStatements(reads, door.reader(s, RESOURCE_SCOPES.statements), params, opts);
    const statements = read.jsons.map((j) => JSON.parse(j) as Record<string, unknown>);
    return { ok: true, page: { statements, more: read.more, through: read.through.toISOString() } };
  } catch (err) {
    return refused(err);
  }
}

/**
 * The ids among `statements` stored with violations (flagged in lists): one query for the page,
 * on the primary (a statement a replica shows is there too), in the store the session reads.
 */
function laxOf(door: ConsoleDoor, s: Session, statements: Record<string, unknown>[]): Promise<Set<string>> {
  return door.deps.store.statementsWithViolations(
    door.workingStore(s),
    statements.map((st) => String(st.id)),
  );
}

/** The parameters of the page a `more` link points at. */
const moreParams = (more: string): Record<string, string> => Object.fromEntries(new URLSearchParams(more.slice(more.indexOf('?') + 1)));

async function statementsRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await door.pageSession(request, reply);
  if (!s) return reply;
  const query = door.queryOf(request);
  const filters = filtersOf(query);
  const q: Record<string, string> = { ...filters, ...(query.search_after && { search_after: query.search_after }) };
  const r = await statementsOf(door, s, q, door.readView());
  if (!r.ok) {
    const didYouMean = await didYouMeanOf(door, s, filters, request.headers['accept-language']);
    return door.sendPage(reply, r.status, statementsPage(door.ctx(s), { filters, statements: [], more: '', error: r.detail, ...(didYouMean && { didYouMean }) }));
  }
  const { statements, through } = r.page;
  const first = !query.search_after;
  const tailSince = first ? ((statements[0]?.stored as string | undefined) ?? new Date(door.now()).toISOString()) : undefined;
  const { more, back } = pagesOf(filters, query, r.page.more);
  reply.header(CONSISTENT_THROUGH, through);
  const lax = await laxOf(door, s, statements);
  return door.sendPage(reply, 200, statementsPage(door.ctx(s), { filters, statements, more, tailSince, through, lax, ...(back && { back }) }));
}

/** Pages before this one whose cursors a page's URL keeps (`back`): going back further reaches the first page only. */
export const BACK_PAGES_MAX = 20;
/** `back`'s first entry when older cursors were dropped. */
const CUT = '-';
const CURSOR = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Keyset paging has no cursor backwards, so each page's URL carries the cursors of the pages
 * before it (`back`, comma-separated, at most BACK_PAGES_MAX): the next link adds this page's,
 * the previous link drops the last. Past the first page, the first page is a link too; when
 * older cursors were dropped (or the chain is not one this console wrote), the previous page of
 * the oldest one kept is not known, and only the first page is offered.
 */
function pagesOf(filters: Filters, query: Record<string, string>, more: string): { more: string; back?: { previous?: string; first: string } } {
  const current = query.search_after;
  const trail = (query.back ?? '').split(',').filter(Boolean);
  const known = trail.every((c, i) => CURSOR.test(c) || (c === CUT && i === 0));
  const kept = known ? trail : [CUT];
  const page = (after: string | undefined, chain: string[]) => statementsUrl(filters, after ? { search_after: after, ...(chain.length && { back: chain.join(',') }) } : {});
  let next = more;
  if (more && current) {
    const chain = [...kept, current];
    const cut = chain.length > BACK_PAGES_MAX;
    next = `${more}&${new URLSearchParams({ back: (cut ? [CUT, ...chain.slice(chain.length - BACK_PAGES_MAX + 1).filter((c) => c !== CUT)] : chain).join(',') })}`;
  }
  if (!current) return { more: next };
  const first = statementsUrl(filters);
  const last = kept.at(-1);
  if (last === undefined) return { more: next, back: { previous: first, first } };
  if (last === CUT) return { more: next, back: { first } };
  return { more: next, back: { previous: page(last, kept.slice(0, -1)), first } };
}

/** Suggestions as a filter field takes them: an agent as the Agent filter reads it. */
const offered = (found: Suggestion[]): { value: string; name?: string }[] =>
  found.map((x) => ({ value: x.agent ? agentText(x.agent) : x.value, ...(x.name !== undefined && { name: x.name }) }));

/** The store's own verbs, activities or agents containing `q` (JSON), as the filter fields' datalists offer them. */
async function suggestRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await door.jsonSession(request, reply);
  if (!s) return reply;
  const { kind = '', q = '' } = door.queryOf(request);
  try {
    const found = await suggestKeys(door.deps.store, door.reader(s, RESOURCE_SCOPES.statements), { kind, text: q.trim(), languages: request.headers['accept-language'] });
    return door.sendJson(reply, 200, { suggestions: offered(found) });
  } catch (err) {
    const r = refused(err);
    return door.sendJson(reply, r.status, { detail: r.detail });
  }
}

/** Text that names no IRI (no scheme): a part of one typed, e.g. `passed`. */
const notAnIri = (text: string): boolean => !/^[a-z][a-z0-9+.-]*:/i.test(text);

/**
 * For a refused query, the first filter whose text cannot be what it names (a verb or activity
 * with no scheme, an agent neither an address nor JSON), with the store's own keys containing it;
 * none when suggestions cannot be read (a reader restricted to its own statements).
 */
async function didYouMeanOf(door: ConsoleDoor, s: Session, filters: Filters, languages: string | undefined): Promise<DidYouMean | undefined> {
  const typed = (['verb', 'activity'] as const).find((k) => filters[k] && notAnIri(filters[k]));
  const filter = typed ?? (filters.agent && !filters.agent.startsWith('{') ? 'agent' : undefined);
  if (!filter) return undefined;
  const text = filters[filter]!;
  try {
    const found = await suggestKeys(door.deps.store, door.reader(s, RESOURCE_SCOPES.statements), { kind: filter, text, languages });
    return { filter, text, suggestions: offered(found) };
  } catch (err) {
    refused(err);
    return undefined;
  }
}

/** The live tail: statements stored after `after` matching the filters, oldest first, as table rows. */
async function tailRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await door.jsonSession(request, reply);
  if (!s) return reply;
  const query = door.queryOf(request);
  const filters = filtersOf(query);
  const after = query.after ?? '';
  if (!after || Number.isNaN(Date.parse(after))) return door.sendJson(reply, 400, { detail: 'after must be a timestamp' });
  // A few seconds back from the newest shown: a statement committed after a later-stored one
  // (another process, a slower transaction) still shows; the page skips those it has.
  const from = new Date(Date.parse(after) - TAIL_OVERLAP_MS).toISOString();
  const since = filters.since && Date.parse(filters.since) > Date.parse(from) ? filters.since : from;
  const r = await statementsOf(door, s, { ...filters, since, ascending: 'true', limit: '100' }, door.readView());
  if (!r.ok) return door.sendJson(reply, r.status, { detail: r.detail });
  reply.header(CONSISTENT_THROUGH, r.page.through);
  const rows = r.page.statements;
  const last = rows.at(-1)?.stored as string | undefined;
  const newest = last && Date.parse(last) > Date.parse(after) ? last : after;
  // More at once than a page: ask again at once, from the newest, while that moves on.
  const lax = await laxOf(door, s, rows);
  return door.sendJson(reply, 200, { rows: rows.map((st) => statementRow(st, lax.has(String(st.id))).text), after: newest, more: r.page.more !== '' && newest !== after });
}

/** A CSV cell: quoted when needed; text that a spreadsheet would run as a formula is prefixed with '. */
function csvCell(v: unknown): string {
  if (v === undefined || v === null) return '';
  let s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** A download field's value: actor and authority by their identifier, verb and object by id. */
function fieldValue(statement: Record<string, unknown>, name: string): unknown {
  if (name === 'actor' || name === 'authority') {
    const ifi = ifiOf(statement[name]);
    if (!ifi) return statement[name];
    const acc = ifi.account as { homePage: string; name: string } | undefined;
    return acc ? `${acc.homePage}#${acc.name}` : Object.values(ifi)[0];
  }
  if (name === 'verb' || name === 'object') return (statement[name] as { id?: unknown } | undefined)?.id;
  let v: unknown = name === 'registration' ? statement.context : statement;
  for (const part of name.split('.')) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[part] : undefined;
  return v;
}

async function downloadRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await door.jsonSession(request, reply);
  if (!s) return reply;
  const raw = request.url.slice(request.url.indexOf('?') + 1);
  const params = new URLSearchParams(request.url.includes('?') ? raw : '');
  const format = params.get('format') ?? 'csv';
  if (format !== 'csv' && format !== 'ndjson') return door.sendJson(reply, 400, { detail: 'format must be csv or ndjson' });
  const fields = params.getAll('fields');
  const chosen = fields.length ? fields : DEFAULT_EXPORT_FIELDS;
  const unknown = chosen.filter((f) => !(EXPORT_FIELDS as readonly string[]).includes(f));
  if (unknown.length) return door.sendJson(reply, 400, { detail: `unknown fields: ${unknown.join(', ')} (known: ${EXPORT_FIELDS.join(', ')})` });
  const filters = filtersOf(Object.fromEntries(FILTERS.flatMap((k) => (params.has(k) ? [[k, params.get(k)!]] : []))));
  // The first page is read before answering, so a bad filter is a 400 rather than a cut download.
  // Every page from one server, whose Consistent-Through (in the header) is true of them all.
  const reads = door.readView();
  const first = await statementsOf(door, s, { ...filters, limit: '0' }, reads);
  if (!first.ok) return door.sendJson(reply, first.status, { detail: first.detail });
  let stopped = false;
  request.raw.once('close', () => (stopped = true));
  async function* lines(): AsyncGenerator<string> {
    if (format === 'csv') yield `${chosen.map(csvCell).join(',')}\r\n`;
    let page = first.ok ? first.page : undefined;
    let sent = 0;
    while (page && !stopped) {
      let out = '';
      for (const st of page.statements) {
        if (sent++ >= DOWNLOAD_MAX) return;
        out += format === 'csv' ? `${chosen.map((f) => csvCell(fieldValue(st, f))).join(',')}\r\n` : `${JSON.stringify(st)}\n`;
      }
      if (out) yield out;
      if (!page.more) return;
      const next = await statementsOf(door, s!, moreParams(page.more), reads);
      page = next.ok ? next.page : undefined;
    }
  }
  const stamp = new Date(door.now()).toISOString().slice(0, 19).replaceAll(':', '-');
  return reply
    .headers({
      'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
      'content-disposition': `attachment; filename="statements-${stamp}.${format}"`,
      [CONSISTENT_THROUGH]: first.page.through,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    })
    .send(Readable.from(lines()));
}

/** One statement, or the voided one of that id. */
async function statementRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await door.pageSession(request, reply);
  if (!s) return reply;
  const { id } = request.params as { id: string };
  let voided = false;
  const reads = door.readView();
  let r = await statementsOf(door, s, { statementId: id }, reads);
  if (!r.ok && r.status === 404) {
    const v = await statementsOf(door, s, { voidedStatementId: id }, reads);
    if (v.ok) [r, voided] = [v, true];
  }
  if (!r.ok) return door.sendPage(reply, r.status, errorPage(door.ctx(s), r.status === 404 ? 'No such statement' : 'Statement', r.detail));
  reply.header(CONSISTENT_THROUGH, r.page.through);
  const shown = r.page.statements[0];
  const violations = (await door.deps.store.statementViolations(door.workingStore(s), String(shown.id))) ?? [];
  return door.sendPage(reply, 200, statementPage(door.ctx(s), shown, voided, violations));
}

/** The document ids of an agent (its profiles), of an activity (its profiles) or of an activity and agent (its states), or why they cannot be read. */
async function documentIds(door: ConsoleDoor, s: Session, kind: DocumentKind, params: Record<string, string>): Promise<string[] | string> {
  try {
    const reader: Reader = door.reader(s, kind === 'state' ? RESOURCE_SCOPES.state : RESOURCE_SCOPES.profile);
    const read = await readDocuments(door.deps.store, reader.target, kind, params);
    return 'ids' in read ? read.ids : [];
  } catch (err) {
    return refused(err).detail;
  }
}

/** An agent's Person, statements, profiles and (per activity of its statements shown) states. */
async function learnerRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await door.pageSession(request, reply);
  if (!s) return reply;
  const agentText = (door.queryOf(request).agent ?? '').trim();
  const empty = { agentText, statements: [], more: '', profiles: [], states: [], activityProfiles: [] };
  if (!agentText) return door.sendPage(reply, 200, learnerPage(door.ctx(s), empty));
  const agent = agentParam(agentText);
  const reads = door.readView();
  let person: Record<string, unknown>;
  try {
    person = { ...(await readPerson(reads, door.reader(s, RESOURCE_SCOPES.views), { agent }, door.deps.config.maxPageBytes)) };
  } catch (err) {
    const r = refused(err);
    return door.sendPage(reply, r.status === 403 ? 403 : 400, learnerPage(door.ctx(s), { ...empty, error: r.detail }));
  }
  const r = await statementsOf(door, s, { agent, related_agents: 'true' }, reads);
  if (r.ok) reply.header(CONSISTENT_THROUGH, r.page.through);
  const statements = r.ok ? r.page.statements : [];
  const profiles = await documentIds(door, s, 'agent_profile', { agent });
  // State documents are kept per activity: those of the activities in the statements shown.
  const objects = statements.map((st) => st.object as { objectType?: string; id?: string } | undefined);
  const activities = [...new Set(objects.filter((o) => o && (o.objectType ?? 'Activity') === 'Activity' && o.id).map((o) => o!.id!))].slice(0, 20);
  const states = await perActivity(door, s, 'state', activities, agent);
  const activityProfiles = await perActivity(door, s, 'activity_profile', activities);
  const more = r.ok ? r.page.more : '';
  const lax = await laxOf(door, s, statements);
  const view = { agentText, agent: JSON.parse(agent) as Record<string, unknown>, person, statements, more, profiles, states, activityProfiles, lax };
  return door.sendPage(reply, 200, learnerPage(door.ctx(s), { ...view, ...(!r.ok && { error: r.detail }) }));
}

/** The ids of each activity's documents of `kind` (with `agent`: the agent's states in it), or why they cannot be read. */
async function perActivity(
  door: ConsoleDoor,
  s: Session,
  kind: 'state' | 'activity_profile',
  activities: string[],
  agent?: string,
): Promise<{ activityId: string; ids: string[] }[] | string> {
  const out: { activityId: string; ids: string[] }[] = [];
  for (const activityId of activities) {
    const ids = await documentIds(door, s, kind, agent === undefined ? { activityId } : { activityId, agent });
    if (typeof ids === 'string') return ids;
    out.push({ activityId, ids });
  }
  return out;
}
