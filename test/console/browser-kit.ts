/** What the console's browser tests share: Debian's Chromium, axe-core, and the phone-width check. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

const AXE = readFileSync(fileURLToPath(new URL('../../node_modules/axe-core/axe.min.js', import.meta.url)), 'utf8');

/** Headless Chromium from the system packages (playwright-core downloads no browser). */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** axe-core's serious and critical violations on the page as it is now (injected past the CSP, as a test tool). */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    const w = window as unknown as { axe: { run(ctx: Document, opts: unknown): Promise<{ violations: { id: string; impact?: string; nodes: { target: unknown }[] }[] }> } };
    return w.axe.run(document, { resultTypes: ['violations'] });
  });
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${JSON.stringify(v.nodes.map((n) => n.target))}`);
}

/** The page has content wider than the viewport (not usable at a phone's width). */
export const overflows = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);

/** The widths every console page is checked at: a phone's, and a laptop's. */
export const WIDTHS = [1280, 390] as const;

/**
 * Words shorter than this may never be cut by a line break; longer runs without a space or hyphen
 * (ids, IRIs, JSON) may break anywhere when their line is too narrow for them.
 */
export const LONG_WORD = 24;

/** What does not fit the width: the page wider than the viewport, with the deepest elements past its right edge. */
export async function widthProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const doc = document.documentElement;
    if (doc.scrollWidth <= doc.clientWidth) return [];
    // Content past the edge of a box that scrolls or clips it (a JSON viewer) does not widen the page.
    const clipped = (e: Element) => {
      for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) if (getComputedStyle(a).overflowX !== 'visible') return true;
      return false;
    };
    const past = [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > doc.clientWidth + 0.5 && !clipped(e));
    const deepest = past.filter((e) => !past.some((o) => o !== e && e.contains(o)));
    if (!deepest.length) {
      // Only text sticks out (after an element that fits): name the elements holding it.
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n && deepest.length < 5; n = walker.nextNode()) {
        const range = document.createRange();
        range.selectNodeContents(n);
        if (n.parentElement && !clipped(n.parentElement) && range.getBoundingClientRect().right > doc.clientWidth + 0.5) deepest.push(n.parentElement);
      }
    }
    const name = (e: Element) => `${e.tagName.toLowerCase()}${e.className && typeof e.className === 'string' ? `.${e.className.split(' ').join('.')}` : ''}`;
    return [
      `the page is ${doc.scrollWidth} px wide in ${doc.clientWidth}: ${deepest
        .slice(0, 5)
        .map((e) => `${name(e)} “${(e.textContent ?? '').trim().slice(0, 40)}”`)
        .join(', ')}`,
    ];
  });
}

/**
 * Words cut by a line break (the text of `/xAPI/statemen ts`): each word of the text under
 * `selector` (split at spaces and after hyphens, where lines may break) shorter than LONG_WORD
 * whose client rects lie on more than one line.
 */
export async function brokenWords(page: Page, selector = 'header, main'): Promise<string[]> {
  return page.evaluate(
    ({ selector, longest }) => {
      const out: string[] = [];
      for (const root of document.querySelectorAll(selector)) {
        const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const text = node.textContent ?? '';
          for (const m of text.matchAll(/[^\s-]+-?/g)) {
            const word = m[0].replace(/-$/, '');
            if (word.length < 2 || word.length >= longest) continue;
            const range = document.createRange();
            range.setStart(node, m.index);
            range.setEnd(node, m.index + word.length);
            const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0).sort((a, b) => a.top - b.top);
            let lines = rects.length ? 1 : 0;
            for (let i = 1; i < rects.length; i++) if (rects[i].top >= rects[i - 1].top + rects[i - 1].height / 2) lines++;
            if (lines > 1) out.push(`“${word}” cut across ${lines} lines in <${node.parentElement?.tagName.toLowerCase()}> “${text.trim().slice(0, 60)}”`);
          }
        }
      }
      return out;
    },
    { selector, longest: LONG_WORD },
  );
}

/**
 * Layout that reads wrong: a description list's term and its description apart (neither on one
 * row, the description after the term, nor the description right under it), and a card row's
 * label (a table's cell at a phone's width, its label drawn by td::before) taller than its cell,
 * so that it overlaps what follows.
 */
export async function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const visible = (r: DOMRect) => r.width > 0 && r.height > 0;
    for (const dt of document.querySelectorAll('dt')) {
      const dd = dt.nextElementSibling;
      if (!(dd instanceof HTMLElement) || dd.tagName !== 'DD') continue;
      const t = dt.getBoundingClientRect();
      const d = dd.getBoundingClientRect();
      if (!visible(t) || !visible(d)) continue;
      const beside = Math.abs(d.top - t.top) < 3 && d.left >= t.right - 1;
      const under = Math.abs(d.left - t.left) < 3 && d.top >= t.bottom - 1 && d.top - t.bottom < 12;
      if (!beside && !under) out.push(`“${dt.textContent?.trim()}” and its value “${dd.textContent?.trim().slice(0, 30)}” are apart`);
    }
    for (const td of document.querySelectorAll('td[data-label]')) {
      const label = getComputedStyle(td, '::before');
      if (label.content === 'none' || label.content === 'normal' || label.display === 'none') continue;
      const cell = td.getBoundingClientRect();
      if (!visible(cell)) continue;
      const height = parseFloat(label.height);
      const text = td.getAttribute('data-label') ?? '';
      if (height > cell.height + 1) out.push(`the label “${text}” (${height} px) overlaps past its cell (${cell.height} px)`);
      // A label on more lines than it has words: a word of it was cut.
      if (height > text.split(/\s+/).length * parseFloat(label.lineHeight) + 1) out.push(`a word of the label “${text}” is cut (${height} px high)`);
    }
    return out;
  });
}

/** Every check of a console page at its viewport's width: width, cut words, layout. */
export async function pageProblems(page: Page): Promise<string[]> {
  return [...(await widthProblems(page)), ...(await brokenWords(page)), ...(await layoutProblems(page))];
}
