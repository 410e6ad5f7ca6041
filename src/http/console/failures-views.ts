/** The console's Rejections and Forwarding pages (./pages.ts has the frame and the escaping). */
import type { TargetStatus } from '../../ops/forwarding.ts';
import type { ConfiguredTarget } from '../../ops/admin/forwarding.ts';
import type { Replayed } from '../../ops/admin/rejections.ts';
import type { DeadLetter, KeptRejection, RejectionReason } from '../../store/types.ts';
import { html, page, storeName, type Html, type PageContext } from './pages.ts';

/** Rejections one page lists (and groups): a form of that many checkboxes stays within a form's field limit. */
export const REJECTIONS_SHOWN = 50;

const when = (ms: number): string =>
  new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');
const csrfField = (ctx: PageContext): Html => html`<input type="hidden" name="csrf" value="${ctx.session!.csrf}">`;

function reasonList(reasons: RejectionReason[]): Html {
  return html`<ul class="reasons">${reasons.map(
    (r) =>
      html`<li><code class="token">${r.type}</code>${r.loc.length ? html` at <code>${r.loc.join('.')}</code>` : ''}: ${r.msg}${r.requirement ? html` <span class="hint">(${r.requirement})</span>` : ''}</li>`,
  )}</ul>`;
}

/** The replay forms' options: lax validation, and the override of the writer check (src/ops/admin/rejections.ts). */
const replayOptions = (id: string): Html =>
  html`<div class="check"><input type="checkbox" id="${id}" name="validation" value="lax"><label for="${id}">Replay as lax (accept what lax validation accepts, whatever the credential’s mode)</label></div>
<div class="check"><input type="checkbox" id="${id}-override" name="overrideWriter" aria-describedby="${id}-override-hint"><label for="${id}-override">Replay even where the writer no longer holds the grant it wrote with</label>
<small id="${id}-override-hint" class="hint">A revoked, expired, changed or removed credential, or a token’s subject: without this, such rejections are skipped. Recorded in the audit.</small></div>`;

export function rejectionsPage(ctx: PageContext, v: { rows: KeptRejection[]; reason?: string; keepDays: number }): string {
  const groups = new Map<string, number>();
  for (const r of v.rows) for (const type of new Set(r.reasons.map((x) => x.type))) groups.set(type, (groups.get(type) ?? 0) + 1);
  const full = v.rows.length === REJECTIONS_SHOWN;
  const main = html`<h1>Rejections</h1>
<p class="context">Writes this LRS refused (400, 409, 413) in the ${storeName(ctx.session!.store)}, kept ${v.keepDays} days for reading and replay${v.reason ? html`; reason <code>${v.reason}</code> only (<a href="/console/rejections">all reasons</a>)` : ''}.</p>
<section aria-labelledby="reasons-title" class="card">
<h2 id="reasons-title">Reasons by type</h2>
${
  groups.size
    ? html`<table class="list"><caption>Rejections per reason type${full ? ` (of the ${REJECTIONS_SHOWN} oldest shown)` : ''}</caption>
<thead><tr><th scope="col">Reason</th><th scope="col">Rejections</th></tr></thead>
<tbody>${[...groups].sort((a, b) => b[1] - a[1]).map(([type, n]) => html`<tr><td data-label="Reason"><a href="/console/rejections?reason=${encodeURIComponent(type)}">${type}</a></td><td data-label="Rejections">${n}</td></tr>`)}</tbody></table>`
    : html`<p class="empty">No rejection kept.</p>`
}
</section>
${
  v.rows.length
    ? html`<form method="post" action="/console/rejections/replay" aria-labelledby="kept-title">
${csrfField(ctx)}
<h2 id="kept-title">Kept rejections</h2>
<table class="list rejections"><caption>Oldest first${full ? `; the first ${REJECTIONS_SHOWN}` : ''}</caption>
<thead><tr><th scope="col">Select</th><th scope="col">Rejection</th><th scope="col">When</th><th scope="col">Request</th><th scope="col">By</th><th scope="col">First reason</th></tr></thead>
<tbody>${v.rows.map(
        (r) => html`<tr data-id="${r.id}"><td data-label="Select"><input type="checkbox" id="sel-${r.id}" name="id.${r.id}" aria-label="Select rejection ${r.id}"></td>
<td data-label="Rejection"><a href="/console/rejections/${r.id}">#${r.id}</a></td><td data-label="When">${when(r.atMs)}</td>
<td data-label="Request"><code class="token">${r.method}</code> <code class="token">${r.path}</code> → ${r.status}</td><td data-label="By">${r.username}</td>
<td data-label="First reason">${r.reasons[0] ? html`<code class="token">${r.reasons[0].type}</code>: ${r.reasons[0].msg}` : ''}</td></tr>`,
      )}</tbody></table>
${replayOptions('lax-selected')}
<div class="actions"><button type="submit" class="primary">Replay selected</button> <button type="submit" name="all" value="on">Replay all of this store’s</button></div>
</form>
<form method="post" action="/console/rejections/clear" class="card">
${csrfField(ctx)}
<p>Clearing removes every kept rejection of the ${storeName(ctx.session!.store)} without replaying it.</p>
<button type="submit" class="danger">Clear this store’s rejections</button>
</form>`
    : ''
}`;
  return page(ctx, 'Rejections', 'rejections', main);
}

export function rejectionPage(ctx: PageContext, r: KeptRejection): string {
  const text = r.body?.toString('utf8');
  let shown = text ?? '';
  try {
    if (text !== undefined) shown = JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    // Not JSON (or cut): shown as received.
  }
  const cut = r.body !== undefined && r.body.length < r.bodyBytes;
  const main = html`<h1>Rejection #${r.id}</h1>
<p class="context"><code>${r.method} ${r.path}</code> → ${r.status}, ${when(r.atMs)}, by ${r.username}${Object.keys(r.query).length ? html`, with <code>${new URLSearchParams(r.query).toString()}</code>` : ''}.</p>
<section aria-labelledby="why-title"><h2 id="why-title">Reasons</h2>${reasonList(r.reasons)}</section>
<section aria-labelledby="body-title"><h2 id="body-title">Body</h2>
${r.body === undefined ? html`<p class="empty">Not kept (${r.bodyBytes} bytes, not read).</p>` : html`${cut ? html`<p class="badge" role="note">Cut: ${r.body.length} of ${r.bodyBytes} bytes kept; it cannot be replayed.</p>` : ''}<pre class="json" tabindex="0" aria-label="The body as received"><code>${shown}</code></pre>`}
</section>
<form method="post" action="/console/rejections/replay" class="card">
${csrfField(ctx)}<input type="hidden" name="id.${r.id}" value="on">
${replayOptions('lax-one')}
<button type="submit" class="primary">Replay this one</button>
</form>
<p><a href="/console/rejections">All rejections</a></p>`;
  return page(ctx, `Rejection ${r.id}`, 'rejections', main);
}

export function replayedPage(ctx: PageContext, v: Replayed & { validation?: string; overrideWriter: boolean }): string {
  const skipped = `${v.skipped ? `; ${v.skipped} skipped: their writer no longer holds the grant it wrote with` : ''}${v.claimed ? `; ${v.claimed} left to another replay under way` : ''}`;
  const main = html`<h1>Replayed</h1>
<p role="status" class="context" id="replay-summary">${v.replayed} replayed${v.validation ? ' as lax' : ''}${v.overrideWriter ? ', whatever their writer' : ''}: ${v.stored} stored, ${v.refused} refused again, ${v.notReplayable} not replayable${skipped}.</p>
${
  v.results.length
    ? html`<table class="list"><caption>What became of each</caption><thead><tr><th scope="col">Rejection</th><th scope="col">Outcome</th><th scope="col">Reasons</th></tr></thead>
<tbody>${v.results.map(
        (r) =>
          html`<tr><td data-label="Rejection">${r.outcome === 'stored' ? html`#${r.id}` : html`<a href="/console/rejections/${r.id}">#${r.id}</a>`}</td><td data-label="Outcome">${r.outcome.replace('_', ' ')}${r.status ? ` (${r.status})` : ''}</td><td data-label="Reasons">${r.writer ? html`<p class="hint">${r.outcome === 'skipped' ? 'Skipped' : 'Replayed by the override'}: ${r.writer}.</p>` : ''}${r.reasons ? reasonList(r.reasons) : ''}</td></tr>`,
      )}</tbody></table>`
    : ''
}
<p><a href="/console/rejections">Back to Rejections</a> · <a href="/console/statements">Statements</a></p>`;
  return page(ctx, 'Replayed', 'rejections', main);
}

/** A lag as people read it: seconds, minutes, hours or days. */
export function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} days`;
}

/**
 * The targets as the server's settings configure them (never a password), where that comes from
 * and how to change it: settings of the server, which the console shows and does not change.
 */
function configuredSection(targets: ConfiguredTarget[]): Html {
  return html`<section aria-labelledby="configured-title" class="card">
<h2 id="configured-title">Configured targets</h2>
<p>From <code>LECTERN_XAPI_FORWARDINGS</code>, read when this server started: set in its environment or the <code>.env</code> file in its working directory
(the environment wins; under the systemd unit of <code>deploy/</code>, <code>/etc/lectern/lectern.env</code>). The batch size is <code>LECTERN_XAPI_FORWARDING_BATCH_SIZE</code>, every target’s.</p>
<p>To add, change or stop a target, edit that setting and restart the server (<code>systemctl restart lectern</code>): targets are settings of the server, changed there and not from the console. <code>lectern forwarding status</code> shows them from the command line.</p>
${
  targets.length
    ? html`<table class="list configured"><caption>As configured, in their order</caption>
<thead><tr><th scope="col">Target</th><th scope="col">Active</th><th scope="col">Batch size</th><th scope="col">Retries</th><th scope="col">Timeout</th><th scope="col">Authentication</th></tr></thead>
<tbody>${targets.map(
        (t) =>
          html`<tr><td data-label="Target"><code>${t.url}</code></td><td data-label="Active">${t.active ? 'yes' : 'no'}</td><td data-label="Batch size">${t.batchSize}</td><td data-label="Retries">${t.maxRetries}</td><td data-label="Timeout">${t.timeoutSeconds} s</td><td data-label="Authentication">${t.auth.username ? html`HTTP Basic as <code>${t.auth.username}</code>` : 'HTTP Basic, no username'}</td></tr>`,
      )}</tbody></table>`
    : html`<p class="empty">None: <code>LECTERN_XAPI_FORWARDINGS</code> is empty.</p>`
}
</section>`;
}

export function forwardingPage(
  ctx: PageContext,
  v: { targets: TargetStatus[]; lags: Map<string, number>; deadLetters: DeadLetter[]; configured: ConfiguredTarget[]; retried?: string },
): string {
  const csrf = csrfField(ctx);
  const main = html`<h1>Forwarding</h1>
<p class="context">Statements forwarded to other LRSs (LECTERN_XAPI_FORWARDINGS), every store’s. Lag: how long the oldest statement still queued for a target has waited since it was stored.</p>
${v.retried !== undefined ? html`<p role="status" class="badge" id="retried">${v.retried} dead letter${v.retried === '1' ? '' : 's'} back in the queue.</p>` : ''}
${
  v.targets.length
    ? html`<table class="list targets"><caption>Per target</caption>
<thead><tr><th scope="col">Target</th><th scope="col">Queued</th><th scope="col">Delivered</th><th scope="col">Retried</th><th scope="col">Dead</th><th scope="col">Lag</th><th scope="col">Last error</th><th scope="col">Retry</th></tr></thead>
<tbody>${v.targets.map(
        (
          t,
        ) => html`<tr><td data-label="Target"><code>${t.target}</code>${t.active ? '' : html` <span class="badge">not active</span>`}</td><td data-label="Queued">${t.queued}</td><td data-label="Delivered">${t.delivered}</td>
<td data-label="Retried">${t.retried}</td><td data-label="Dead">${t.dead}</td><td data-label="Lag" title="How long the oldest queued statement has waited">${v.lags.has(t.target) ? duration(v.lags.get(t.target)!) : 'none'}</td><td data-label="Last error">${t.lastError ?? ''}</td>
<td data-label="Retry">${t.dead ? html`<form method="post" action="/console/forwarding/retry" class="inline">${csrf}<input type="hidden" name="url" value="${t.target}"><button type="submit" aria-label="Retry dead letters of ${t.target}">Retry dead letters</button></form>` : ''}</td></tr>`,
      )}</tbody></table>`
    : html`<p class="empty">No forwarding target.</p>`
}
${configuredSection(v.configured)}
<section aria-labelledby="dead-title">
<h2 id="dead-title">Dead letters</h2>
${
  v.deadLetters.length
    ? html`<table class="list dead"><caption>Oldest first</caption>
<thead><tr><th scope="col">Statement</th><th scope="col">Store</th><th scope="col">Target</th><th scope="col">Attempts</th><th scope="col">Error</th></tr></thead>
<tbody>${v.deadLetters.map(
        (d) =>
          html`<tr><td data-label="Statement"><code>${d.statementId}</code></td><td data-label="Store">${d.store === '' ? 'default' : d.store}</td><td data-label="Target"><code>${d.target}</code></td><td data-label="Attempts">${d.attempts}</td><td data-label="Error">${d.lastError ?? ''}</td></tr>`,
      )}</tbody></table>
<form method="post" action="/console/forwarding/retry">${csrf}<button type="submit" class="primary">Retry every dead letter</button></form>`
    : html`<p class="empty">No dead letter.</p>`
}
</section>`;
  return page(ctx, 'Forwarding', 'forwarding', main);
}
