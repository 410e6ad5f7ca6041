/** The credentials file writer: one entry added or replaced, every other byte left as it was. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type CredentialEntry, parseCredentials, upsertCredentialText } from '../../src/auth/credentials.ts';

const HASH = '$2b$04$abcdefghijklmnopqrstuu5mYq1eWxbq4E4a8m9cfY2nYQ6JxGhS2';
const entry = (username: string, extra: Partial<CredentialEntry> = {}): CredentialEntry => ({
  username,
  hash: HASH,
  scopes: ['all'],
  agent: { objectType: 'Agent', mbox: `mailto:${username}@example.com` },
  ...extra,
});

const RALPH = `{"agent": {"mbox": "mailto:r@example.com", "objectType": "Agent", "name": null}, "scopes": ["all"], "hash": "${HASH}", "username": "r\\"q"}`;
const OTHER = `{"username":"o","hash":"${HASH}","scopes":["state"],"agent":{"openid":"http://o.example.com/[x]"},"target":"t"}`;

test('appends after the last entry, keeping the others and the layout byte for byte', () => {
  const original = `[\n${RALPH},\t${OTHER}  \n]  \n`;
  const { text, replaced } = upsertCredentialText(original, entry('new'));
  assert.equal(replaced, false);
  assert.ok(text.startsWith(`[\n${RALPH},\t${OTHER},\n  {`), text);
  assert.ok(text.endsWith('}  \n]  \n'), text);
  const parsed = JSON.parse(text);
  assert.deepEqual(
    parsed.map((e: { username: string }) => e.username),
    ['r"q', 'o', 'new'],
  );
  assert.equal('target' in parsed[2], false);
});

test('replaces only the entry of the same user', () => {
  const original = `[${RALPH},${OTHER}]`;
  const { text, replaced } = upsertCredentialText(original, entry('r"q', { scopes: ['state/read'] }));
  assert.equal(replaced, true);
  assert.ok(text.endsWith(`,${OTHER}]`), text);
  assert.deepEqual(JSON.parse(text)[0].scopes, ['state/read']);
});

test('an empty list, an empty file and no file', () => {
  for (const original of ['[]', '[ \n ]\n', '', undefined]) {
    const { text } = upsertCredentialText(original, entry('a'));
    assert.deepEqual(
      JSON.parse(text).map((e: { username: string }) => e.username),
      ['a'],
      String(original),
    );
  }
});

test('a user whose name has ":" (never able to sign in with Basic) is kept with a warning naming the entry; the others load', () => {
  const warnings: string[] = [];
  const text = JSON.stringify([entry('ok'), entry('us:er')]);
  const entries = parseCredentials(text, 'auth.json', (m) => warnings.push(m));
  assert.deepEqual(
    entries.map((e) => e.username),
    ['ok', 'us:er'],
  );
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /^auth\.json: entry 1 \("us:er"\): the username contains ":".*never sign in with Basic/);
});
