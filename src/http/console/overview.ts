/**
 * The console's Overview page (docs/console.md, "Overview"), for administrators: the figures of
 * the session's working store from src/ops/overview.ts (the admin API's GET /admin/api/overview),
 * and for the operator forwarding and every store. The chart of statements per day is SVG written
 * here on the server (no script, no library: thirty bars), its colours from console.css (the CSP
 * allows no inline style), with the same numbers in a table for keyboards, screen readers and
 * browsers without script.
 */
import type { FastifyInstance } from 'fastify';
import { activeTargets } from '../../forwarding/config.ts';
import { type Overview, storeOverview } from '../../ops/overview.ts';
import { verbDisplays } from '../../ops/reads.ts';
import { RESOURCE_SCOPES } from '../access.ts';
import { adminRoleOf, type ConsoleKit } from './admin.ts';
import { html, type Html, page, type PageContext, storeName } from './pages.ts';

export function registerConsoleOverview(app: FastifyInstance, kit: ConsoleKit): void {
  const { store, config, clock } = kit.deps;
  app.get('/console/overview', async (request, reply) => {
    const s = await kit.pageSession(request, reply);
    if (!s) return reply;
    const role = adminRoleOf(kit, reply, s, 'The Overview page');
    if (!role) return reply;
    // The working store is always in the role's reach (a store administrator's is its own).
    const o = await storeOverview(store, role, kit.workingStore(s), { clock, activeTargets: activeTargets(config.xapiForwardings) });
    // An administrator reads all of its store (ConsoleDoor.actor): the displays are its to read.
    const displays = await verbDisplays(
      store,
      kit.reader(s, RESOURCE_SCOPES.statements),
      o.topVerbs.map((v) => v.verb),
      request.headers['accept-language'],
    );
    return kit.sendPage(reply, 200, overviewPage(kit.ctx(s), o, displays));
  });
}

const when = (iso: string): string => iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
const count = (n: number): string => n.toLocaleString('en');

/** A duration in words, to the second: "2 h 5 min", "40 s". */
export function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} days ${h % 24} h`;
}

const figure = (label: string, value: Html | string, note?: Html | string): Html =>
  html`<div class="figure"><dt>${label}</dt><dd><span class="value">${value}</span>${note ? html`<span class="hint">${note}</span>` : ''}</dd></div>`;

/**
 * Counts as bars: the SVG is an image labelled by its summary; a disclosure below it holds the
 * same numbers as a table (closed by default: thirty rows).
 */
function barChart(id: string, points: { label: string; statements: number }[], summary: string, table: { caption: string; head: string }): Html {
  const W = 600;
  const H = 180;
  const top = 20;
  const bottom = 26;
  const max = Math.max(0, ...points.map((p) => p.statements));
  const slot = W / points.length;
  const bars = points.map((p, i) => {
    const h = p.statements ? Math.max(1, ((H - top - bottom) * p.statements) / max) : 0;
    return html`<rect class="bar" x="${(i * slot + 2).toFixed(1)}" y="${(H - bottom - h).toFixed(1)}" width="${(slot - 4).toFixed(1)}" height="${h.toFixed(1)}"><title>${p.label}: ${count(p.statements)}</title></rect>`;
  });
  return html`<figure class="chart">
<svg viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${id}-summary" focusable="false">
<line class="axis" x1="0" y1="${H - bottom}" x2="${W}" y2="${H - bottom}"></line>
${bars}
<text class="label top" x="0" y="2">${count(max)}</text>
<text class="label" x="0" y="${H - 6}">${points[0].label}</text>
<text class="label end" x="${W}" y="${H - 6}">${points[points.length - 1].label}</text>
</svg>
<figcaption id="${id}-summary">${summary}</figcaption>
</figure>
<details class="numbers"><summary>${table.caption} as a table</summary>
<table class="counts"><caption>${table.caption}, oldest first</caption>
<thead><tr><th scope="col">${table.head}</th><th scope="col">Statements</th></tr></thead>
<tbody>${points.map((p) => html`<tr><td>${p.label}</td><td>${count(p.statements)}</td></tr>`)}</tbody></table>
</details>`;
}

function dayChart(days: Overview['days']): Html {
  const total = days.reduce((n, d) => n + d.statements, 0);
  const busiest = days.reduce((a, b) => (b.statements > a.statements ? b : a), days[0]);
  const summary = total
    ? `Statements per day over the last ${days.length} days: ${count(total)} in all; the most on ${busiest.date} (${count(busiest.statements)}); ${count(days[days.length - 1].statements)} today.`
    : `No statements in the last ${days.length} days.`;
  return barChart(
    'days',
    days.map((d) => ({ label: d.date, statements: d.statements })),
    summary,
    { caption: 'Statements per UTC day', head: 'Day' },
  );
}

function minuteChart(minutes: Overview['ingest']['minutes']): Html {
  const total = minutes.reduce((n, m) => n + m.statements, 0);
  const summary = `Statements stored per minute over the last ${minutes.length} minutes, by every server process: ${count(total)} in all; ${count(minutes[minutes.length - 1].statements)} this minute so far.`;
  return barChart(
    'minutes',
    minutes.map((m) => ({ label: m.minute.slice(11, 16), statements: m.statements })),
    summary,
    { caption: 'Statements per minute (UTC)', head: 'Minute' },
  );
}

/** A top verb: its display name as the link to its statements, its IRI beside it (the IRI alone when it has no display). */
const verbCell = (verb: string, display: string | undefined): Html => {
  const href = `/console/statements?verb=${encodeURIComponent(verb)}`;
  return display === undefined ? html`<a href="${href}">${verb}</a>` : html`<a href="${href}">${display}</a> <code class="iri">${verb}</code>`;
};

/** `displays`: the top verbs' display names (from the newest statement of each), shown beside their IRIs. */
export function overviewPage(ctx: PageContext, o: Overview, displays: ReadonlyMap<string, string> = new Map()): string {
  const last30 = o.days.reduce((n, d) => n + d.statements, 0);
  const lastMinute = o.ingest.minutes[o.ingest.minutes.length - 1];
  const f = o.forwarding;
  const main = html`<h1>Overview</h1>
<p class="context">The ${storeName(o.target)}, as of ${when(o.now)}. Counted as statements are written: voided statements count until they are erased or pruned.</p>
<dl class="figures">
${figure('Statements', count(o.statements), `${count(last30)} in the last ${o.days.length} days`)}
${figure('Ingest now', html`${count(o.ingest.perMinute)} <abbr title="statements per minute">/min</abbr>`, `mean of the last 5 minutes, every server process; ${count(lastMinute.statements)} this minute so far`)}
${figure('Last statement', o.lastStored ? when(o.lastStored) : 'none yet')}
${figure('Rejections, last 24 h', count(o.rejectionsLastDay), html`refused writes kept: <a href="/console/rejections">Rejections</a>`)}
${
  f
    ? [
        figure('Forwarding lag', f.lagMs === null ? 'none' : duration(f.lagMs), `${count(f.queued)} queued, every store`),
        figure(
          'Dead letters',
          count(f.dead),
          html`${f.targets.length ? `${f.targets.length} target${f.targets.length === 1 ? '' : 's'}` : 'no forwarding target'}: <a href="/console/forwarding">Forwarding</a>`,
        ),
      ]
    : ''
}
</dl>
<section aria-labelledby="days-title" class="card">
<h2 id="days-title">Statements per day</h2>
${dayChart(o.days)}
</section>
<section aria-labelledby="verbs-title" class="card">
<h2 id="verbs-title">Top verbs</h2>
${
  o.topVerbs.length || o.otherVerbs
    ? html`<table class="counts"><caption>The verbs of the most statements in the last ${o.days.length} days</caption>
<thead><tr><th scope="col">Verb</th><th scope="col">Statements</th></tr></thead>
<tbody>${o.topVerbs.map(
        (v) => html`<tr><td>${verbCell(v.verb, displays.get(v.verb))}</td><td>${count(v.statements)}</td></tr>`,
      )}${o.otherVerbs ? html`<tr><td>Other verbs</td><td>${count(o.otherVerbs)}</td></tr>` : ''}</tbody></table>`
    : html`<p class="empty">No statements in the last ${o.days.length} days.</p>`
}
</section>
<section aria-labelledby="ingest-title" class="card">
<h2 id="ingest-title">Ingest, last ${o.ingest.minutes.length} minutes</h2>
${minuteChart(o.ingest.minutes)}
</section>
${
  o.stores
    ? html`<section aria-labelledby="stores-title" class="card">
<h2 id="stores-title">Every store</h2>
${
  o.stores.length
    ? html`<table class="counts"><caption>Stores with statements (<a href="/console/stores">switch store</a>)</caption>
<thead><tr><th scope="col">Store</th><th scope="col">Statements</th><th scope="col">Last ${o.days.length} days</th></tr></thead>
<tbody>${o.stores.map(
        (s) => html`<tr><td>${s.target === '' ? html`<em>default</em>` : s.target}</td><td>${count(s.statements)}</td><td>${count(s.recent)}</td></tr>`,
      )}</tbody></table>`
    : html`<p class="empty">No store holds statements yet.</p>`
}
</section>`
    : ''
}`;
  return page(ctx, 'Overview', 'overview', main);
}
