/** The console's Statements, Statement and Learner pages (./pages.ts has the frame and the escaping). */
import type { ValidationIssue } from '../../errors.ts';
import { documentUrl } from './document-views.ts';
import { jsonView } from './json-view.ts';
import { html, page, storeName, type Html, type PageContext } from './pages.ts';

/** The Statement resource's filters, as the console's query string carries them (the xAPI names). */
export const FILTERS = ['agent', 'verb', 'activity', 'registration', 'since', 'until', 'related_activities', 'related_agents', 'ascending', 'limit'] as const;
export type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** Fields a download may carry, each a path into the statement. */
export const EXPORT_FIELDS = [
  'id',
  'stored',
  'timestamp',
  'actor',
  'verb',
  'object',
  'registration',
  'result.success',
  'result.completion',
  'result.score.scaled',
  'result.duration',
  'authority',
] as const;
export const DEFAULT_EXPORT_FIELDS = ['id', 'stored', 'timestamp', 'actor', 'verb', 'object'];

/** The `agent` filter as typed: an email address, a mailto: or http(s) IRI, or Agent JSON. */
export function agentParam(text: string): string {
  const t = text.trim();
  if (t.startsWith('{')) return t;
  if (/^mailto:/i.test(t)) return JSON.stringify({ mbox: t });
  if (/^https?:\/\//i.test(t)) return JSON.stringify({ openid: t });
  if (t.includes('@')) return JSON.stringify({ mbox: `mailto:${t}` });
  return t;
}

const VOIDED_VERB = 'http://adlnet.gov/expapi/verbs/voided';

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** The first of a language map's values, preferring English. */
function langValue(map: unknown): string | undefined {
  const m = obj(map);
  const key = Object.keys(m).find((k) => k.toLowerCase().startsWith('en')) ?? Object.keys(m)[0];
  return key === undefined ? undefined : str(m[key]);
}

/** An agent's inverse functional identifier alone: what the agent filter matches on. */
export function ifiOf(agent: unknown): Json | undefined {
  const a = obj(agent);
  for (const k of ['mbox', 'mbox_sha1sum', 'openid'] as const) if (typeof a[k] === 'string') return { [k]: a[k] };
  const acc = obj(a.account);
  if (typeof acc.homePage === 'string' && typeof acc.name === 'string') return { account: { homePage: acc.homePage, name: acc.name } };
  return undefined;
}

export function agentLabel(agent: unknown): string {
  const a = obj(agent);
  const ifi = ifiOf(a);
  const id = ifi ? (str(ifi.mbox)?.replace(/^mailto:/, '') ?? str(ifi.openid) ?? str(ifi.mbox_sha1sum) ?? str(obj(ifi.account).name)) : undefined;
  return str(a.name) ?? id ?? (a.objectType === 'Group' ? 'anonymous group' : 'agent');
}

export const verbLabel = (verb: unknown): string => {
  const v = obj(verb);
  const id = str(v.id) ?? '';
  return langValue(v.display) ?? id.slice(id.search(/[^/#]*$/)) ?? id;
};

/** The console's statements URL with these filters. */
export function statementsUrl(filters: Filters, extra: Record<string, string> = {}): string {
  const qs = new URLSearchParams();
  for (const k of FILTERS) if (filters[k]) qs.set(k, filters[k]);
  for (const [k, v] of Object.entries(extra)) qs.set(k, v);
  const s = qs.toString();
  return s ? `/console/statements?${s}` : '/console/statements';
}

function objectCell(statement: Json): Html {
  const o = obj(statement.object);
  const type = str(o.objectType) ?? 'Activity';
  if (type === 'Activity') {
    const id = str(o.id) ?? '';
    const name = langValue(obj(o.definition).name);
    return html`<a href="${statementsUrl({ activity: id })}" title="Statements about ${id}">${name ?? id}</a>`;
  }
  if (type === 'StatementRef') return html`statement <a href="/console/statements/${str(o.id) ?? ''}">${(str(o.id) ?? '').slice(0, 8)}…</a>`;
  if (type === 'Agent' || type === 'Group') {
    const ifi = ifiOf(o);
    const label = agentLabel(o);
    return ifi ? html`<a href="${statementsUrl({ agent: JSON.stringify(ifi), related_agents: 'true' })}">${label}</a>` : html`${label}`;
  }
  return html`${type}`;
}

/** A statement's object as people read it: an activity's name (or IRI), an agent's name (or identifier), what else it is. */
function objectLabel(object: unknown): string {
  const o = obj(object);
  const type = str(o.objectType) ?? 'Activity';
  if (type === 'Activity') return langValue(obj(o.definition).name) ?? str(o.id) ?? 'an activity';
  if (type === 'Agent' || type === 'Group') return agentLabel(o);
  return type === 'StatementRef' ? 'a statement' : type;
}

/** One statement as a table row; `lax`: it was stored with violations (flagged, its page lists them). */
export function statementRow(statement: Json, lax = false): Html {
  const id = str(statement.id) ?? '';
  const stored = str(statement.stored) ?? '';
  const verb = obj(statement.verb);
  const verbId = str(verb.id) ?? '';
  const actorIfi = ifiOf(statement.actor);
  const actor = agentLabel(statement.actor);
  const voids = verbId === VOIDED_VERB ? str(obj(statement.object).id) : undefined;
  return html`<tr data-id="${id}" data-stored="${stored}">
<td data-label="Stored"><time datetime="${stored}">${stored
    .replace('T', ' ')
    .replace(/\.\d+/, '')
    .replace(/Z|[+-]\d\d:\d\d$/, ' UTC')}</time></td>
<td data-label="Actor">${actorIfi ? html`<a href="${statementsUrl({ agent: JSON.stringify(actorIfi) })}" title="Statements of this actor">${actor}</a>` : actor}</td>
<td data-label="Verb"><a href="${statementsUrl({ verb: verbId })}" title="Statements with the verb ${verbId}">${verbLabel(verb)}</a>${voids ? html` <span class="badge voiding">voids a statement</span>` : ''}</td>
<td data-label="Object">${objectCell(statement)}</td>
<td data-label="Statement"><a href="/console/statements/${id}" aria-label="Statement ${id}"><code class="token">${id.slice(0, 8)}</code></a>${lax ? html` <span class="badge lax" title="Stored under lax validation: it broke rules that strict validation refuses (listed on its page)">stored lax</span>` : ''}</td>
</tr>`;
}

/** Statements as a table; `lax`: the ids of those stored with violations. */
export function statementsTable(statements: Json[], caption: string, lax: ReadonlySet<string> = new Set()): Html {
  return html`<table class="statements">
<caption>${caption}</caption>
<thead><tr><th scope="col">Stored</th><th scope="col">Actor</th><th scope="col">Verb</th><th scope="col">Object</th><th scope="col">Statement</th></tr></thead>
<tbody id="rows">${statements.map((st) => statementRow(st, lax.has(str(st.id) ?? '')))}</tbody>
</table>${statements.length ? '' : html`<p class="empty" id="empty">No statements match.</p>`}`;
}

const field = (name: string, label: string, value: string | undefined, hint: string, type = 'text', suggest?: SuggestKind): Html =>
  html`<div class="field"><label for="f-${name}">${label}</label><input id="f-${name}" name="${name}" type="${type}" value="${value ?? ''}" aria-describedby="h-${name}"${
    suggest ? html` list="s-${name}" data-suggest="${suggest}" autocomplete="off"` : ''
  }><small id="h-${name}" class="hint">${hint}</small>${suggest ? html`<datalist id="s-${name}"></datalist>` : ''}</div>`;

/** The kinds of the store's own keys a filter field is offered as the operator types (console.js fills its datalist from /console/suggest). */
export type SuggestKind = 'verb' | 'activity' | 'agent';

/** What the Agent filter takes for an agent's identifier: its email address, its OpenID, or it as JSON (agentParam reads each back). */
export function agentText(agent: object): string {
  const ifi = agent as Json;
  const mbox = str(ifi.mbox);
  if (mbox && Object.keys(ifi).length === 1) return /^mailto:[^@]+@/i.test(mbox) ? mbox.slice('mailto:'.length) : mbox;
  const openid = str(ifi.openid);
  if (openid && Object.keys(ifi).length === 1 && /^https?:\/\//i.test(openid)) return openid;
  return JSON.stringify(ifi);
}

/** A filter's text that cannot be what it names (an IRI, an agent), with the store's own keys that contain it: "did you mean …". */
export interface DidYouMean {
  filter: 'verb' | 'activity' | 'agent';
  text: string;
  suggestions: { value: string; name?: string }[];
}

function didYouMean(filters: Filters, d: DidYouMean): Html {
  const what = d.filter === 'agent' ? 'agents' : `${d.filter === 'verb' ? 'verbs' : 'activities'}`;
  if (!d.suggestions.length) return html`<p class="hint" id="did-you-mean">No ${what} of this store contain “${d.text}”.</p>`;
  return html`<div class="card" id="did-you-mean"><p>Did you mean one of this store’s ${what} containing “${d.text}”?</p>
<ul class="links">${d.suggestions.map(
    (x) => html`<li><a href="${statementsUrl({ ...filters, [d.filter]: x.value })}">${x.name ?? x.value}</a>${x.name ? html` <code class="iri">${x.value}</code>` : ''}</li>`,
  )}</ul></div>`;
}
const check = (name: string, label: string, value: string | undefined): Html =>
  html`<div class="check"><input id="f-${name}" name="${name}" type="checkbox" value="true"${value === 'true' ? html` checked` : ''}><label for="f-${name}">${label}</label></div>`;

export interface StatementsView {
  filters: Filters;
  statements: Json[];
  /** The next page's console URL, or ''. */
  more: string;
  /** When this page is the query's first: where the live tail starts (the newest statement's `stored`, or now). */
  tailSince?: string;
  /** The Consistent-Through of the server that read the page (a read replica's, or the primary's). */
  through?: string;
  /** The ids of the statements shown that were stored with violations. */
  lax?: ReadonlySet<string>;
  error?: string;
  /** The store's own keys containing a filter's text that is no IRI (or agent). */
  didYouMean?: DidYouMean;
  /** Past the first page: the previous page (when the chain of pages kept in the URL knows it) and the first. */
  back?: { previous?: string; first: string };
}

function paging(v: StatementsView): Html {
  if (!v.more && !v.back) return html``;
  const previous = v.back?.previous;
  return html`<nav class="paging" aria-label="Pages">${previous ? html`<a href="${previous}" rel="prev" id="previous">Previous page</a>` : ''}${
    v.back && v.back.first !== previous ? html`<a href="${v.back.first}" id="first">First page</a>` : ''
  }${v.more ? html`<a href="${v.more}" rel="next" id="more">Next page</a>` : ''}</nav>`;
}

export function statementsPage(ctx: PageContext, v: StatementsView): string {
  const f = v.filters;
  const hidden = (k: string) => (f[k as keyof Filters] ? html`<input type="hidden" name="${k}" value="${f[k as keyof Filters]!}">` : '');
  const filtered = FILTERS.some((k) => f[k]);
  const main = html`<h1>Statements</h1>
<p class="context">In the ${storeName(ctx.session!.store)}.</p>
<form method="get" action="/console/statements" class="card filters" aria-label="Filters">
  <div class="grid">
  ${field('agent', 'Agent', f.agent, 'An email address, or an Agent as JSON, e.g. {"account":{"homePage":"…","name":"…"}}; type part of one for this store’s agents', 'text', 'agent')}
  ${field('verb', 'Verb', f.verb, 'The verb’s IRI; type part of it (e.g. passed) for this store’s verbs', 'text', 'verb')}
  ${field('activity', 'Activity', f.activity, 'The activity’s IRI; type part of it for this store’s activities', 'text', 'activity')}
  ${field('registration', 'Registration', f.registration, 'A UUID')}
  ${field('since', 'Stored after', f.since, 'ISO 8601, e.g. 2026-01-31T08:00:00Z')}
  ${field('until', 'Stored until', f.until, 'ISO 8601, inclusive')}
  ${field('limit', 'Per page', f.limit, 'At most the server’s page size', 'number')}
  </div>
  <fieldset class="checks"><legend>Options</legend>
  ${check('related_agents', 'Agent anywhere in the statement (related agents)', f.related_agents)}
  ${check('related_activities', 'Activity anywhere in the statement (related activities)', f.related_activities)}
  ${check('ascending', 'Oldest first', f.ascending)}
  </fieldset>
  <div class="actions"><button type="submit" class="primary">Apply filters</button>${filtered ? html` <a href="/console/statements">Clear filters</a>` : ''}</div>
</form>
${v.error ? html`<p class="error" role="alert">${v.error}</p>` : ''}
${v.didYouMean ? didYouMean(f, v.didYouMean) : ''}
<section aria-labelledby="results-title">
<h2 id="results-title">Results</h2>
${
  v.tailSince !== undefined && f.ascending !== 'true' && !f.until
    ? html`<div class="tail"><button type="button" id="tail" aria-pressed="false" data-since="${v.tailSince}" data-url="${statementsUrl(f).replace('/console/statements', '/console/statements/tail')}">Live tail</button>
<span id="tail-status" role="status" aria-live="polite"></span></div>`
    : ''
}
${statementsTable(v.statements, filtered ? 'Statements matching the filters' : 'Latest statements', v.lax)}
${v.through ? html`<p class="context">Complete through <time id="consistent-through" datetime="${v.through}">${v.through}</time>: a statement stored later may not be shown yet.</p>` : ''}
${paging(v)}
</section>
<section aria-labelledby="download-title" class="card">
<h2 id="download-title">Download this query</h2>
<form method="get" action="/console/statements/download">
  ${FILTERS.map(hidden)}
  <fieldset class="checks"><legend>Format</legend>
  <div class="check"><input type="radio" id="fmt-csv" name="format" value="csv" checked><label for="fmt-csv">CSV</label></div>
  <div class="check"><input type="radio" id="fmt-ndjson" name="format" value="ndjson"><label for="fmt-ndjson">NDJSON (whole statements)</label></div>
  </fieldset>
  <fieldset class="checks fields"><legend>CSV fields</legend>
  ${EXPORT_FIELDS.map((name) => html`<div class="check"><input type="checkbox" id="x-${name}" name="fields" value="${name}"${DEFAULT_EXPORT_FIELDS.includes(name) ? html` checked` : ''}><label for="x-${name}">${name}</label></div>`)}
  </fieldset>
  <button type="submit">Download</button>
</form>
</section>`;
  return page(ctx, 'Statements', 'statements', main);
}

/** The rules a statement stored under lax validation broke, each where and what. */
function violationsSection(violations: readonly ValidationIssue[]): Html {
  return html`<section aria-labelledby="violations-title" class="card">
<h2 id="violations-title">Stored under lax validation</h2>
<p>It broke ${violations.length === 1 ? 'this rule' : `these ${violations.length} rules`} when it was stored; strict validation would have refused it (<code>lectern violations</code> lists them too):</p>
<ul class="reasons" id="violations">${violations.map(
    (v) => html`<li><code class="token">${v.type}</code>${v.loc.length ? html` at <code>${v.loc.join('.')}</code>` : ''}: ${v.msg}</li>`,
  )}</ul>
</section>`;
}

/** One statement's page; `violations`: the rules it broke when stored under lax validation (none: []). */
export function statementPage(ctx: PageContext, statement: Json, voided: boolean, violations: readonly ValidationIssue[] = []): string {
  const id = str(statement.id) ?? '';
  const ifi = ifiOf(statement.actor);
  const main = html`<h1>Statement <code>${id}</code></h1>
${voided ? html`<p class="badge voided" role="note">Voided: a later statement voids this one; queries no longer return it.</p>` : ''}
<p class="context">${agentLabel(statement.actor)} · ${verbLabel(statement.verb)} · ${objectLabel(statement.object)} · stored ${str(statement.stored) ?? ''}</p>
<ul class="links">
${ifi ? html`<li><a href="${statementsUrl({ agent: JSON.stringify(ifi) })}">Statements of this actor</a></li><li><a href="/console/learner?agent=${encodeURIComponent(JSON.stringify(ifi))}">This learner</a></li>` : ''}
<li><a href="/console/statements">All statements</a></li>
</ul>
${violations.length ? violationsSection(violations) : ''}
${jsonView(statement, 'The statement', 'statement-json')}`;
  return page(ctx, `Statement ${id.slice(0, 8)}`, 'statements', main);
}

export interface LearnerView {
  agentText: string;
  agent?: Json;
  person?: Json;
  statements: Json[];
  more: string;
  /** Agent profile ids, or why they cannot be listed. */
  profiles: string[] | string;
  /** State ids per activity seen in the statements shown. */
  states: { activityId: string; ids: string[] }[] | string;
  /** The ids of the statements shown that were stored with violations. */
  lax?: ReadonlySet<string>;
  /** Activity profile ids per activity seen in the statements shown. */
  activityProfiles: { activityId: string; ids: string[] }[] | string;
  error?: string;
}

/** Document ids per activity (by its name in the statements shown, when they carry one), each a link to its page; or why they cannot be listed. */
function perActivity(found: { activityId: string; ids: string[] }[] | string, names: ReadonlyMap<string, string>, link: (activityId: string, id: string) => string): Html {
  if (typeof found === 'string') return html`<p class="empty">${found}</p>`;
  if (!found.length) return html`<p class="empty">None.</p>`;
  const activity = (id: string) => {
    const name = names.get(id);
    return name === undefined ? html`<code>${id}</code>` : html`${name} <code class="iri">${id}</code>`;
  };
  return html`<dl class="states">${found.map(
    (s) =>
      html`<dt>${activity(s.activityId)}</dt><dd>${s.ids.length ? html`<ul class="documents">${s.ids.map((id) => html`<li><a href="${link(s.activityId, id)}">${id}</a></li>`)}</ul>` : 'none'}</dd>`,
  )}</dl>`;
}

export function learnerPage(ctx: PageContext, v: LearnerView): string {
  const agent = JSON.stringify(ifiOf(v.agent) ?? v.agent ?? {});
  const names = new Map<string, string>();
  for (const st of v.statements) {
    const o = obj(st.object);
    const name = langValue(obj(o.definition).name);
    if (typeof o.id === 'string' && name !== undefined && !names.has(o.id)) names.set(o.id, name);
  }
  const list = (items: string[], empty: string) =>
    items.length
      ? html`<ul class="documents">${items.map((id) => html`<li><a href="${documentUrl('agent-profile', { agent, profileId: id })}">${id}</a></li>`)}</ul>`
      : html`<p class="empty">${empty}</p>`;
  const person = obj(v.person);
  const personRows = (['name', 'mbox', 'mbox_sha1sum', 'openid'] as const).filter((k) => Array.isArray(person[k]) && (person[k] as unknown[]).length);
  const accounts = Array.isArray(person.account) ? (person.account as Json[]) : [];
  const main = html`<h1>Learner</h1>
<p class="context">One agent’s statements, documents and Person object, in the ${storeName(ctx.session!.store)}. Read-only.</p>
<form method="get" action="/console/learner" class="card filters" aria-label="Find a learner">
  ${field('agent', 'Agent', v.agentText, 'An email address, or an Agent as JSON; type part of one for this store’s agents', 'text', 'agent')}
  <div class="actions"><button type="submit" class="primary">Show</button></div>
</form>
${v.error ? html`<p class="error" role="alert">${v.error}</p>` : ''}
${
  v.agent
    ? html`<section aria-labelledby="person-title" class="card">
<h2 id="person-title">Person</h2>
<dl class="person">${personRows.map((k) => html`<dt>${k}</dt><dd>${(person[k] as string[]).join(', ')}</dd>`)}${accounts.map((a) => html`<dt>account</dt><dd>${str(a.name) ?? ''} at ${str(a.homePage) ?? ''}</dd>`)}</dl>
</section>
<section aria-labelledby="learner-statements-title">
<h2 id="learner-statements-title">Statements</h2>
${statementsTable(v.statements, `Statements of ${agentLabel(v.agent)} (as actor or anywhere in the statement)`, v.lax)}
${v.more ? html`<p class="paging"><a href="${v.more}" rel="next">More of this learner’s statements</a></p>` : ''}
</section>
<section aria-labelledby="documents-title" class="card">
<h2 id="documents-title">Documents</h2>
<h3>Agent profiles</h3>
${typeof v.profiles === 'string' ? html`<p class="empty">${v.profiles}</p>` : list(v.profiles, 'None.')}
<h3>State, per activity in the statements above</h3>
${perActivity(v.states, names, (activityId, stateId) => documentUrl('state', { activityId, agent, stateId }))}
<h3>Activity profiles, per activity in the statements above</h3>
${perActivity(v.activityProfiles, names, (activityId, profileId) => documentUrl('activity-profile', { activityId, profileId }))}
</section>
${
  ctx.session!.role
    ? html`<section aria-labelledby="erase-title" class="card">
<h2 id="erase-title">Erase or pseudonymize</h2>
<p>First a dry run: it counts what would change (statements, documents, kept rejections) and changes nothing; then you confirm.</p>
<form method="post" action="/console/learner/erase">
<input type="hidden" name="csrf" value="${ctx.session!.csrf}"><input type="hidden" name="agent" value="${JSON.stringify(ifiOf(v.agent) ?? v.agent)}">
<fieldset class="checks"><legend>What to do</legend>
<div class="check"><input type="radio" id="mode-erase" name="mode" value="erase" checked><label for="mode-erase">Erase: delete the person’s statements and documents</label></div>
<div class="check"><input type="radio" id="mode-pseudonymize" name="mode" value="pseudonymize"><label for="mode-pseudonymize">Pseudonymize: replace the person by a pseudonym (needs LECTERN_PSEUDONYMIZE_KEY)</label></div>
</fieldset>
<button type="submit">Dry run</button>
</form>
</section>`
    : ''
}`
    : ''
}`;
  return page(ctx, 'Learner', 'learner', main);
}
