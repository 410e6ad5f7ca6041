/**
 * A JSON value shown as a tree that opens and closes without script: nested `<details>` written
 * on the server, each value with its path (`context.contextActivities.parent[0].id`) in
 * `data-path`, which console.js copies with a button it adds to each; it also adds "Expand all"
 * and "Collapse all". A value too large for a tree is shown as text.
 */
import { html, type Html } from './pages.ts';

/** The most values a tree shows: beyond, the value is shown as indented text. */
export const TREE_MAX_VALUES = 2000;
/** Up to this many values, every level starts open; beyond, only the first. */
const OPEN_MAX_VALUES = 200;

/** The values in `v` (itself included), counting no further than `max`. */
function countValues(v: unknown, max: number): number {
  let n = 0;
  const stack: unknown[] = [v];
  while (stack.length && n <= max) {
    const x = stack.pop();
    n++;
    if (x && typeof x === 'object') stack.push(...(Array.isArray(x) ? x : Object.values(x)));
  }
  return n;
}

/** A member's path: `.name` when it is an identifier, `["…"]` otherwise (an extension's IRI); `[i]` for an array's item. */
const step = (parent: string, key: string | number): string =>
  typeof key === 'number' ? `${parent}[${key}]` : /^[A-Za-z_$][\w$]*$/.test(key) ? (parent ? `${parent}.${key}` : key) : `${parent}[${JSON.stringify(key)}]`;

function leaf(v: unknown): Html {
  if (typeof v === 'string') return html`<span class="json-string">${JSON.stringify(v)}</span>`;
  if (v === null) return html`<span class="json-null">null</span>`;
  return html`<span class="json-${typeof v}">${String(v)}</span>`;
}

function node(key: string | number, v: unknown, path: string, depth: number, open: boolean): Html {
  const label = typeof key === 'number' ? html`<span class="json-index">${key}</span>` : html`<span class="json-key">${key}</span>`;
  if (!v || typeof v !== 'object') return html`<li class="json-node" data-path="${path}"><span class="json-line">${label}: ${leaf(v)}</span></li>`;
  const entries: [string | number, unknown][] = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
  const size = Array.isArray(v) ? `[${entries.length}]` : `{${entries.length}}`;
  return html`<li class="json-node" data-path="${path}"><details${open || depth === 0 ? html` open` : ''}><summary>${label} <span class="json-size">${size}</span></summary>${members(entries, path, depth + 1, open)}</details></li>`;
}

const members = (entries: [string | number, unknown][], path: string, depth: number, open: boolean): Html =>
  entries.length ? html`<ul class="json-tree">${entries.map(([k, x]) => node(k, x, step(path, k), depth, open))}</ul>` : html`<span class="json-empty">empty</span>`;

/**
 * `value` as a tree labelled `label`, with its text (`textId`: what "Copy JSON" copies) in a
 * disclosure under it; only the text when it holds more than TREE_MAX_VALUES values.
 */
export function jsonView(value: unknown, label: string, textId: string): Html {
  const text = JSON.stringify(value, null, 2);
  const values = countValues(value, TREE_MAX_VALUES);
  const asText = html`<pre class="json" tabindex="0" aria-label="${label} as JSON text" id="${textId}"><code>${text}</code></pre>`;
  if (values > TREE_MAX_VALUES || !value || typeof value !== 'object') {
    return html`<div class="json-view">${values > TREE_MAX_VALUES ? html`<p class="hint">More than ${TREE_MAX_VALUES.toLocaleString('en')} values: shown as text.</p>` : ''}${asText}</div>`;
  }
  const entries: [string | number, unknown][] = Array.isArray(value) ? value.map((x, i) => [i, x]) : Object.entries(value);
  return html`<div class="json-view" data-json-view>
<div class="json-tools" hidden><button type="button" data-json="expand">Expand all</button> <button type="button" data-json="collapse">Collapse all</button> <button type="button" data-copy="${textId}">Copy JSON</button>
<span role="status" aria-live="polite" class="json-status" data-copy-status="${textId}"></span></div>
<div class="json-root" role="group" aria-label="${label}">${members(entries, '', 0, values <= OPEN_MAX_VALUES)}</div>
<details class="json-text"><summary>As JSON text</summary>${asText}</details>
</div>`;
}
