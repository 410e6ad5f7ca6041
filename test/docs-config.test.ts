/** docs/configuration.md documents exactly the settings of src/config.ts: name, default and text. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { SETTINGS } from '../src/config.ts';
import { PAGE, renderSettings, settingRows, updatePage } from '../scripts/docs-config.ts';

const cells = (row: string): string[] =>
  row
    .split(/(?<!\\)\|/)
    .slice(1, -1)
    .map((c) => c.trim());

/** The page's setting rows by variable name; a name documented twice fails here. */
function pageRows(page: string): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of page.split('\n')) {
    const name = /^\| `(LECTERN_[A-Z0-9_]+)` \|/.exec(line)?.[1];
    if (name === undefined) continue;
    assert.ok(!rows.has(name), `docs/configuration.md has two rows for ${name}`);
    rows.set(name, line);
  }
  return rows;
}

test('docs/configuration.md has a row for every setting, with its default and its help text, and no other', () => {
  const page = pageRows(readFileSync(PAGE, 'utf8'));
  const expected = settingRows();
  for (const [name, row] of expected) {
    const got = page.get(name);
    assert.ok(got !== undefined, `docs/configuration.md lacks a row for ${name} (run npm run docs:config)`);
    const [, wantDefault, wantText] = cells(row);
    const [, gotDefault, gotText] = cells(got);
    assert.equal(gotDefault, wantDefault, `docs/configuration.md: the default of ${name} differs from src/config.ts (run npm run docs:config)`);
    assert.equal(gotText, wantText, `docs/configuration.md: the text of ${name} differs from its help in src/config.ts (run npm run docs:config)`);
    assert.equal(got, row, `docs/configuration.md: the row of ${name} differs from src/config.ts (run npm run docs:config)`);
  }
  for (const name of page.keys()) assert.ok(expected.has(name), `docs/configuration.md documents ${name}, which src/config.ts does not define`);
});

test('docs/configuration.md: the generated tables are as npm run docs:config writes them', () => {
  const page = readFileSync(PAGE, 'utf8');
  assert.equal(page, updatePage(page), 'docs/configuration.md: its settings part is not what npm run docs:config writes (sections or order)');
});

test('the generator: every setting once, a changed help text changes its row, defaults shown as on the page', () => {
  const rendered = renderSettings();
  for (const s of Object.values(SETTINGS)) {
    assert.equal(rendered.split('\n').filter((l) => l.startsWith(`| \`${s.name}\` |`)).length, 1, s.name);
    assert.ok(rendered.includes(s.default === '' ? `| \`${s.name}\` | (empty) |` : `| \`${s.name}\` | \`${s.default}\` |`), s.name);
  }
  const page = pageRows(rendered);
  const row = page.get('LECTERN_RUNSERVER_PORT');
  assert.ok(row !== undefined);
  const edited = rendered.replace(row, row.replace('TCP port', 'UDP port'));
  assert.notEqual(pageRows(edited).get('LECTERN_RUNSERVER_PORT'), settingRows().get('LECTERN_RUNSERVER_PORT'));
});
