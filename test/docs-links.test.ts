/**
 * Every relative link in README.md and docs/*.md leads somewhere: its file exists, and its
 * `#anchor` names a heading of that file under GitHub's slug rules (lower case, punctuation
 * dropped, each space a '-', a repeated heading suffixed -1, -2, …). Links in code are not links.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The page's lines with fenced code blocks blanked (line numbers kept). */
function unfenced(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      return '';
    }
    if (marker !== undefined) {
      fence = marker;
      return '';
    }
    return line;
  });
}

/** GitHub's anchor for a heading's text: what it renders (code, link and emphasis text), lower-cased, punctuation dropped, spaces to '-'. */
function slug(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/(\*\*|\*)(\S(?:.*?\S)?)\1/g, '$2')
    .replace(/(?<![\p{L}\p{N}])(__|_)(\S(?:.*?\S)?)\1(?![\p{L}\p{N}])/gu, '$2')
    .replace(/<[^>]+>/g, '');
  return rendered
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page's headings, in GitHub's way of making repeated ones unique. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of unfenced(text)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

interface Link {
  page: string;
  line: number;
  target: string;
}

function links(page: string): Link[] {
  const out: Link[] = [];
  unfenced(readFileSync(join(ROOT, page), 'utf8')).forEach((line, i) => {
    const text = line.replace(/(`+)[^`]*?\1/g, '');
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ page, line: i + 1, target: m[1]! });
    const ref = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(text)?.[1];
    if (ref !== undefined) out.push({ page, line: i + 1, target: ref });
  });
  return out;
}

/** Why a link does not resolve, or undefined when it does (absolute URLs are not checked). */
function broken({ page, target }: Link): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) return undefined;
  const hash = target.indexOf('#');
  const path = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), path);
  if (!file.startsWith(ROOT)) return `${path} leaves the repository`;
  if (!existsSync(file)) return `${relative(ROOT, file)} does not exist`;
  if (anchor === undefined || anchor === '') return undefined;
  if (!statSync(file).isFile() || !file.endsWith('.md')) return `#${anchor} on ${relative(ROOT, file)}, which is not a Markdown page`;
  if (!anchors(readFileSync(file, 'utf8')).has(anchor)) return `${relative(ROOT, file)} has no heading #${anchor}`;
  return undefined;
}

test('slug follows GitHub: lower case, punctuation dropped, spaces to -, code and link text kept', () => {
  assert.equal(slug('What `npm run bench` measures'), 'what-npm-run-bench-measures');
  assert.equal(slug('The machine, and how much to trust the figures'), 'the-machine-and-how-much-to-trust-the-figures');
  assert.equal(slug('Queries at 100k and 1M'), 'queries-at-100k-and-1m');
  assert.equal(slug('Export & import: `lectern export`'), 'export--import-lectern-export');
  assert.equal(slug('Behind a [TLS](https://example.org) proxy'), 'behind-a-tls-proxy');
  assert.equal(slug('**Bold** and _snake_case_'), 'bold-and-snake_case');
  assert.equal(slug('Über 1.5× – fast'), 'über-15--fast');
  assert.deepEqual([...anchors('# A\n## A\n```\n# A\n```\n### A\n')], ['a', 'a-1', 'a-2']);
});

test('the check finds a missing file, a missing heading and a bad same-page anchor, and passes what resolves', () => {
  assert.match(broken({ page: 'README.md', line: 1, target: 'docs/no-such-page.md' }) ?? '', /does not exist/);
  assert.match(broken({ page: 'docs/operations.md', line: 1, target: 'performance.md#no-such-heading' }) ?? '', /has no heading/);
  assert.match(broken({ page: 'docs/performance.md', line: 1, target: '#session-10' }) ?? '', /has no heading/);
  assert.equal(broken({ page: 'docs/operations.md', line: 1, target: 'performance.md#memory' }), undefined);
  assert.equal(broken({ page: 'docs/performance.md', line: 1, target: '#where-the-time-goes' }), undefined);
  assert.equal(broken({ page: 'README.md', line: 1, target: 'https://example.org/x#y' }), undefined);
});

test('every relative link in README.md and docs/*.md resolves to a file, and every #anchor to one of its headings', () => {
  assert.ok(PAGES.length > 5, 'the docs pages were found');
  const all = PAGES.flatMap(links);
  assert.ok(
    all.some((l) => !/^[a-z]+:/i.test(l.target)),
    'relative links were found',
  );
  const bad = all.flatMap((l) => {
    const why = broken(l);
    return why === undefined ? [] : [`${l.page}:${l.line}: (${l.target}) ${why}`];
  });
  assert.deepEqual(bad, []);
});
