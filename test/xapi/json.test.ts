/** countJson: what JSON.parse would build, counted on the bytes, stopping at a limit; unpairedSurrogate. */
import assert from 'node:assert/strict';
import { describe, it, test } from 'node:test';
import { countJson, unpairedSurrogate } from '../../src/xapi/json.ts';

const NO_LIMIT = { maxItems: Infinity, maxValues: Infinity };
const count = (text: string, limits = NO_LIMIT) => countJson(Buffer.from(text, 'utf8'), limits);

/** Values and top-level elements of a parsed JSON value, the reference. */
function reference(v: unknown): { items: number; values: number } {
  const walk = (x: unknown): number =>
    1 + (Array.isArray(x) ? x.reduce((n: number, y) => n + walk(y), 0) : x !== null && typeof x === 'object' ? Object.values(x).reduce((n: number, y) => n + walk(y), 0) : 0);
  return { items: Array.isArray(v) ? v.length : 1, values: walk(v) };
}

test('counts values of every kind and the elements of a top-level array, as JSON.parse would build them', () => {
  const texts = [
    '[]',
    '{}',
    '0',
    '"a"',
    '[{},{},[]]',
    ' [ 1 , -2.5e-3 , true , false , null , "x" ] ',
    '{"a":1,"b":[1,2,{"c":"d"}],"e":{"f":null}}',
    '[{"k:\\"{[,":"v]}\\\\"},"\\\\",":"]',
    '{"é€😀":"é€😀","":[""]}',
    '[[[[]]],[{"a":[{}]}]]',
    '\ufeff[1,2]',
    JSON.stringify([{ actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://x' }, object: { id: 'http://y' }, result: { score: { raw: 1e21, min: -0 } } }]),
  ];
  for (const text of texts) {
    const { items, values } = count(text);
    assert.deepEqual({ items, values }, reference(JSON.parse(text.replace(/^\ufeff/, ''))), text);
  }
});

test('stops at the first element or value over a limit', () => {
  assert.deepEqual(count('[{},{},{}]', { maxItems: 2, maxValues: Infinity }), { items: 3, values: 3, over: 'items' });
  assert.equal(count('[{},{},{}]', { maxItems: 3, maxValues: 4 }).over, undefined);
  assert.deepEqual(count('[{},{},{}]', { maxItems: 3, maxValues: 3 }), { items: 3, values: 4, over: 'values' });
  // A key about to be followed by its value is not counted against the limit twice.
  assert.equal(count('{"a":1}', { maxItems: 1, maxValues: 2 }).over, undefined);
  // Counting stops there: what follows, even malformed, is never looked at.
  assert.equal(count(`[${'{},'.repeat(10)}${'x'.repeat(100)}`, { maxItems: 5, maxValues: Infinity }).over, 'items');
});

test('malformed text is counted as far as it resembles JSON, without throwing', () => {
  for (const text of ['[', ']', '"unterminated', '[1,,2', '{"a"', 'nul', '[}', '\\', '']) {
    assert.doesNotThrow(() => count(text), text);
  }
  assert.equal(count('').items, 0);
});

describe('unpairedSurrogate (review of issue 27, item 8)', () => {
  const at = (text: string) => unpairedSurrogate(text, JSON.parse(text));
  it('finds a lone high or low surrogate in a string or a key, with its path', () => {
    assert.deepEqual(at('{"a":[1,{"b":"x\\udfffy"}]}'), { path: ['a', 1, 'b'], key: false });
    assert.deepEqual(at('{"a":{"\\uD800":1}}'), { path: ['a', '\ud800'], key: true });
    assert.deepEqual(at('"\\ud800\\ud800\\udc00"'), { path: [], key: false });
  });
  it('accepts pairs, escaped backslashes and text without any surrogate escape', () => {
    for (const text of ['{"a":"\\ud83d\\ude00"}', '{"a":"\\\\udfff"}', '{"\\u00e9":"\\uffff"}', '[1,2]']) assert.equal(at(text), undefined, text);
  });
  it('walks any nesting without recursion and names at most 64 steps', () => {
    const n = 100_000;
    const found = at(`${'['.repeat(n)}"\\udfff"${']'.repeat(n)}`);
    assert.equal(found?.path.length, 65);
    assert.equal(found?.path[64], '…');
  });
});
