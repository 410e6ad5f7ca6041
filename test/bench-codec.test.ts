/**
 * The statement JSON codec (src/store/codec.ts): frames round-trip exactly on both engines (the
 * reused native contexts and node:zlib's public one-shot calls) and are interchangeable between
 * them; unicode, NUL and multi-megabyte statements survive; the wrong dictionary, a missing one,
 * corrupted, truncated, trailing or oversized data give a CodecError, and the codec keeps working
 * after it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { zstdDecompressSync } from 'node:zlib';
import { statement } from '../bench/generate.ts';
import { CodecError, frameContentSize, rawDictionary, StatementCodec } from '../bench/codec.ts';
import { prepareStatement, stamp } from '../src/xapi/statement.ts';
import type { Actor, Statement } from '../src/xapi/types.ts';

const AUTHORITY: Actor = { objectType: 'Agent', mbox: 'mailto:lrs@example.com' };
const stored = (seed: number, i: number): string =>
  JSON.stringify(stamp(prepareStatement(statement(seed, i) as unknown as Statement, AUTHORITY, '1.0.3'), '2026-11-23T02:00:00.000Z'));
const dictionary = rawDictionary(Array.from({ length: 40 }, (_, i) => stored(7, i)), 32 * 1024);
const other = rawDictionary(Array.from({ length: 40 }, (_, i) => stored(8, 1000 + i)).map((s) => s.replaceAll('example', 'elpmaxe')), 32 * 1024);

test('on this Node the codec keeps its contexts (the fast path passed its self-check)', () => {
  assert.equal(new StatementCodec({ dictionary }).engine, 'reused contexts');
  assert.equal(new StatementCodec({ dictionary, reuseContexts: false }).engine, 'one-shot');
});

for (const reuseContexts of [true, false]) {
  describe(`StatementCodec (${reuseContexts ? 'reused contexts' : 'one-shot'})`, () => {
    const codec = new StatementCodec({ dictionary, reuseContexts });

    test('generated statements round-trip, each its own frame with its size declared, far smaller than the JSON', () => {
      let json = 0;
      let packed = 0;
      for (let i = 0; i < 300; i++) {
        const text = stored(20261123, i);
        const frame = codec.compress(text);
        assert.equal(frameContentSize(frame), Buffer.byteLength(text));
        assert.equal(codec.decompress(frame), text);
        assert.equal(codec.decompress(new Uint8Array(frame)), text, 'a plain Uint8Array, as node:sqlite returns BLOBs');
        json += Buffer.byteLength(text);
        packed += frame.length;
      }
      assert.ok(packed < json / 3, `${packed} bytes of frames for ${json} of JSON`);
    });

    test('frames are standard zstd: the other engine and node:zlib itself read them', () => {
      const otherEngine = new StatementCodec({ dictionary, reuseContexts: !reuseContexts });
      const text = stored(1, 2);
      const frame = codec.compress(text);
      assert.equal(otherEngine.decompress(frame), text);
      assert.equal(codec.decompress(otherEngine.compress(text)), text);
      assert.equal(zstdDecompressSync(frame, { dictionary } as never).toString(), text);
    });

    test('unicode, NUL, lone-surrogate escapes and empty text survive exactly', () => {
      const texts = [
        JSON.stringify({ name: { 'ja-JP': '学習記録', 'ar-SA': 'سجل التعلم', emoji: '🎓👩🏽‍🏫', combining: 'e\u0301' } }),
        JSON.stringify({ nul: 'a\u0000b', surrogate: '\ud800' }),
        '{"raw NUL":"\u0000"}',
        '',
      ];
      for (const text of texts) assert.equal(codec.decompress(codec.compress(text)), text);
    });

    test('large statements (5 MB) round-trip; a limit on decoded size is enforced', () => {
      const big = JSON.stringify({ ...statement(3, 3), result: { extensions: { 'http://example.com/blob': 'xyz0123456789'.repeat(400_000) } } });
      const frame = codec.compress(big);
      assert.equal(codec.decompress(frame), big);
      const small = new StatementCodec({ dictionary, reuseContexts, maxBytes: 1024 * 1024 });
      assert.throws(() => small.decompress(frame), (e: unknown) => e instanceof CodecError && /1048576/.test(e.message));
      assert.equal(small.decompress(small.compress('{"ok":true}')), '{"ok":true}');
    });

    test('the wrong dictionary, no dictionary, corrupted, truncated and trailing data give a CodecError; the codec keeps working', () => {
      const text = stored(20261123, 5);
      const frame = codec.compress(text);
      const cases: [string, StatementCodec, Uint8Array][] = [
        ['wrong dictionary', new StatementCodec({ dictionary: other, reuseContexts }), frame],
        ['no dictionary', new StatementCodec({ reuseContexts }), frame],
        ['a flipped byte', codec, Buffer.from(frame).map((b, i) => (i === frame.length - 9 ? b ^ 0x55 : b))],
        ['truncated', codec, frame.subarray(0, frame.length - 3)],
        ['cut in half', codec, frame.subarray(0, frame.length >> 1)],
        ['not zstd at all', codec, Buffer.from(text)],
        ['trailing bytes', codec, Buffer.concat([frame, Buffer.from('xx')])],
        ['a second frame after it', codec, Buffer.concat([frame, frame])],
      ];
      for (const [what, decoder, data] of cases) {
        assert.throws(() => decoder.decompress(data), (e: unknown) => e instanceof CodecError && /does not decode|declares|truncated|trailing/i.test(e.message), what);
        assert.equal(decoder === codec ? codec.decompress(frame) : decoder.decompress(decoder.compress(text)), text, `works after: ${what}`);
      }
    });

    test('without a dictionary too', () => {
      const plain = new StatementCodec({ reuseContexts });
      const text = stored(9, 9);
      assert.equal(plain.decompress(plain.compress(text)), text);
    });
  });
}

test('rawDictionary keeps the last bytes of the samples', () => {
  const d = rawDictionary(['aaaa', 'bbbb', 'cccc'], 6);
  assert.equal(d.toString(), 'bbcccc');
  assert.equal(rawDictionary(['ab'], 100).toString(), 'ab');
});
