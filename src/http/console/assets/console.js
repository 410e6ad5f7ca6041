// The operator console's one script (docs/console.md): the pages work without it; it adds the
// live tail of the Statements page, copy buttons, the filters' suggestions and the JSON trees'
// tools. Type-checked by ./tsconfig.json (JSDoc, checkJs).

/** Milliseconds between two polls of the live tail. */
const TAIL_EVERY = 2000;

/**
 * The CSRF token of the session, which every change the script sends carries in X-CSRF-Token.
 * @returns {string}
 */
export function csrfToken() {
  return document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';
}

/**
 * Starts and stops polling for statements stored after the newest one shown, adding them on top.
 * @param {HTMLButtonElement} button
 */
function liveTail(button) {
  const status = /** @type {HTMLElement} */ (document.getElementById('tail-status'));
  const rows = /** @type {HTMLTableSectionElement} */ (document.getElementById('rows'));
  let after = button.dataset.since ?? '';
  const base = button.dataset.url ?? '';
  /** @type {number | undefined} */
  let timer;
  let added = 0;

  const stop = (/** @type {string} */ why) => {
    clearTimeout(timer);
    timer = undefined;
    button.setAttribute('aria-pressed', 'false');
    button.textContent = 'Live tail';
    status.textContent = why;
  };
  const poll = async () => {
    let res;
    try {
      res = await fetch(`${base}${base.includes('?') ? '&' : '?'}after=${encodeURIComponent(after)}`, { headers: { accept: 'application/json' } });
    } catch {
      timer = window.setTimeout(poll, TAIL_EVERY * 2);
      return;
    }
    if (timer === undefined) return;
    if (res.status === 401) return stop('Your session has ended: sign in again.');
    if (!res.ok) return stop(`The live tail stopped (${res.status}).`);
    const data = /** @type {{ rows: string[]; after: string; more: boolean }} */ (await res.json());
    const fresh = [];
    for (const row of data.rows) {
      const t = document.createElement('template');
      t.innerHTML = row;
      const tr = t.content.firstElementChild;
      if (!(tr instanceof HTMLTableRowElement) || rows.querySelector(`tr[data-id="${CSS.escape(tr.dataset.id ?? '')}"]`)) continue;
      tr.classList.add('new');
      fresh.push(tr);
    }
    // Oldest first from the server: each goes on top of the one before.
    for (const tr of fresh) rows.prepend(tr);
    if (fresh.length) {
      document.getElementById('empty')?.remove();
      added += fresh.length;
      status.textContent = `${added} new statement${added === 1 ? '' : 's'} since the tail started.`;
    }
    after = data.after;
    timer = window.setTimeout(poll, data.more ? 0 : TAIL_EVERY);
  };

  button.addEventListener('click', () => {
    if (timer !== undefined) return stop('Live tail stopped.');
    button.setAttribute('aria-pressed', 'true');
    button.textContent = 'Stop live tail';
    status.textContent = 'Watching for new statements…';
    timer = window.setTimeout(poll, 0);
  });
}

const tail = document.getElementById('tail');
if (tail instanceof HTMLButtonElement) liveTail(tail);

/**
 * "Copy" buttons (data-copy: the id of the element whose text they copy, e.g. a new secret):
 * the clipboard when the browser allows it, else the text selected for Ctrl+C.
 * @param {HTMLButtonElement} button
 */
function copyButton(button) {
  const id = button.dataset.copy ?? '';
  const source = document.getElementById(id);
  const status = document.querySelector(`[data-copy-status="${CSS.escape(id)}"]`);
  if (!source) return;
  button.addEventListener('click', async () => {
    const text = source.textContent ?? '';
    try {
      await navigator.clipboard.writeText(text);
      if (status) status.textContent = 'Copied.';
    } catch {
      const range = document.createRange();
      range.selectNodeContents(source);
      window.getSelection()?.removeAllRanges();
      window.getSelection()?.addRange(range);
      if (status) status.textContent = 'Selected: press Ctrl+C (or ⌘C) to copy.';
    }
  });
}

for (const b of document.querySelectorAll('button[data-copy]')) if (b instanceof HTMLButtonElement) copyButton(b);

/** Milliseconds of typing pause before suggestions are asked for. */
const SUGGEST_AFTER = 150;

/**
 * A filter field's suggestions (data-suggest: verb, activity or agent): the store's own keys
 * containing what is typed, from /console/suggest, as the options of the field's datalist (the
 * value the filter takes, the name beside it).
 * @param {HTMLInputElement} input
 */
function suggestions(input) {
  const list = document.getElementById(input.getAttribute('list') ?? '');
  if (!(list instanceof HTMLDataListElement)) return;
  /** @type {number | undefined} */
  let timer;
  /** @type {string | undefined} */
  let asked;
  const ask = async () => {
    const q = input.value.trim();
    if (q === asked) return;
    asked = q;
    let res;
    try {
      res = await fetch(`/console/suggest?kind=${encodeURIComponent(input.dataset.suggest ?? '')}&q=${encodeURIComponent(q)}`, { headers: { accept: 'application/json' } });
    } catch {
      asked = undefined;
      return;
    }
    // A refusal (a session ended, a reader without suggestions) leaves the field as it is.
    if (!res.ok || q !== input.value.trim()) return;
    const data = /** @type {{ suggestions: { value: string; name?: string }[] }} */ (await res.json());
    list.replaceChildren(
      ...data.suggestions.map((s) => {
        const option = document.createElement('option');
        option.value = s.value;
        if (s.name) option.label = s.name;
        return option;
      }),
    );
  };
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = window.setTimeout(ask, SUGGEST_AFTER);
  });
  input.addEventListener('focus', () => void ask(), { once: true });
}

for (const i of document.querySelectorAll('input[data-suggest]')) if (i instanceof HTMLInputElement) suggestions(i);

/**
 * A JSON tree written by the server (data-json-view): its tools shown ("Expand all", "Collapse
 * all", "Copy JSON"), and a "Copy path" button on each value, which copies its path (data-path)
 * and says so in the tree's status line (or, where the browser refuses the clipboard, shows it
 * selected for Ctrl+C).
 * @param {HTMLElement} view
 */
function jsonTree(view) {
  const tools = view.querySelector('.json-tools');
  const status = view.querySelector('.json-status');
  if (!(tools instanceof HTMLElement) || !(status instanceof HTMLElement)) return;
  tools.hidden = false;
  for (const b of tools.querySelectorAll('button[data-json]')) {
    if (!(b instanceof HTMLButtonElement)) continue;
    b.addEventListener('click', () => {
      for (const d of view.querySelectorAll('.json-root details')) if (d instanceof HTMLDetailsElement) d.open = b.dataset.json === 'expand';
    });
  }
  for (const li of view.querySelectorAll('li.json-node')) {
    if (!(li instanceof HTMLElement)) continue;
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy-path';
    button.textContent = 'Copy path';
    button.setAttribute('aria-label', `Copy path ${li.dataset.path ?? ''}`);
    li.prepend(button);
  }
  view.addEventListener('click', async (event) => {
    const button = event.target instanceof Element ? event.target.closest('button.copy-path') : null;
    const path = button?.parentElement?.dataset.path;
    if (path === undefined) return;
    try {
      await navigator.clipboard.writeText(path);
      status.textContent = `Copied the path ${path}`;
    } catch {
      const code = document.createElement('code');
      code.textContent = path;
      status.replaceChildren('Path: ', code, ' (selected: press Ctrl+C or ⌘C to copy)');
      const range = document.createRange();
      range.selectNodeContents(code);
      window.getSelection()?.removeAllRanges();
      window.getSelection()?.addRange(range);
    }
  });
}

for (const v of document.querySelectorAll('[data-json-view]')) if (v instanceof HTMLElement) jsonTree(v);
