/**
 * Can the stored statement JSON be compressed cheaply enough? (Measured, not adopted:
 * docs/performance.md, "Disk".) The rule: adopt zstd only if a page of 100 statements decompresses in ≤ 1 ms and a
 * ≈ 1.2 KB statement compresses in ≈ 10–15 µs on the write path.
 *
 * Statements are the benchmark's seeded stream (bench/generate.ts), stamped as the server stores
 * them (id, stored, timestamp, authority, version). Dictionaries are built from another seed of
 * the same stream: raw content (statements concatenated, cut to 8/32/110 KB) and, when the
 * `zstd` CLI is installed, trained with `zstd --train`. Codecs measured, each call timed alone:
 *
 *   zlib one-shot          node:zlib zstdCompressSync/zstdDecompressSync (a new context per call);
 *   zlib stream (async)    one ZstdCompress/ZstdDecompress object kept open, one frame per
 *                          statement via flush(ZSTD_e_end) — the public way to reuse a context;
 *   zlib handle (internal) the same native context driven synchronously through node:zlib's
 *                          private _handle.writeSync: what a reused sync context costs, bare (a
 *                          page is also decoded in one pass over its 100 concatenated frames,
 *                          split by the content size each frame header declares);
 *   codec.ts               bench/codec.ts's StatementCodec, which does the same with checks
 *                          and a fallback (text in/out, frame checksum on), on both its engines;
 *   npm bindings           zstd-napi (Compressor/Decompressor + loadDictionary), @toondepauw/node-zstd
 *                          (Encoder/Decoder holding the dictionary), @bokuweb/zstd-wasm (reused
 *                          contexts, dictionary passed per call); each loaded only from
 *                          `--libs <dir>` (a node_modules folder where it is installed).
 *
 * Then bytes per statement in SQLite for ≈ 1.2 KB rows (and compressed ones) at page_size
 * 4096/8192/16384.
 *
 *   node bench/compress.ts [--statements 2000] [--reps 5] [--libs /tmp/x/node_modules] [--only <part of a codec's name>]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import * as zlib from 'node:zlib';
import { frameContentSize, StatementCodec } from './codec.ts';
import { prepareStatement, stamp } from '../src/xapi/statement.ts';
import type { Actor, Statement } from '../src/xapi/types.ts';
import { statement } from './generate.ts';
import { machine } from './harness.ts';

const { values: args } = parseArgs({
  options: { statements: { type: 'string', default: '2000' }, reps: { type: 'string', default: '5' }, libs: { type: 'string' }, only: { type: 'string' } },
});
const N = Number(args.statements);
const REPS = Number(args.reps);
const PAGE = 100;
const SEED = 20261123;
const AUTHORITY: Actor = { objectType: 'Agent', mbox: 'mailto:bench@example.com' };
const { ZSTD_e_end } = zlib.constants;

/** Statements i..i+n of a stream, as the store keeps them (stamped JSON, UTF-8). */
function stored(seed: number, from: number, n: number): Buffer[] {
  const iso = new Date(Date.UTC(2026, 10, 23)).toISOString();
  return Array.from({ length: n }, (_, k) => {
    const p = prepareStatement(statement(seed, from + k) as unknown as Statement, AUTHORITY, '1.0.3');
    return Buffer.from(JSON.stringify(stamp(p, iso)));
  });
}

// ----- dictionaries ---------------------------------------------------------------------------

/** Raw content: statements of another stream, concatenated and cut to `bytes`. */
function rawDictionary(bytes: number): Buffer {
  const parts: Buffer[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const [s] = stored(SEED + 1, 50_000 + i, 1);
    parts.push(s);
    size += s.length;
  }
  return Buffer.concat(parts).subarray(0, bytes);
}

/** A dictionary trained by the zstd CLI on 3,000 statements of another stream (undefined without the CLI). */
function trainedDictionary(bytes: number): Buffer | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-zdict-'));
  try {
    const files = stored(SEED + 1, 100_000, 3000).map((s, i) => {
      const f = join(dir, `s${i}.json`);
      writeFileSync(f, s);
      return f;
    });
    execFileSync('zstd', ['-q', '--train', `--maxdict=${bytes}`, '-o', join(dir, 'dict'), ...files], { stdio: 'ignore' });
    return readFileSync(join(dir, 'dict'));
  } catch {
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ----- codecs ---------------------------------------------------------------------------------

interface Codec {
  name: string;
  compress(b: Buffer): Uint8Array;
  decompress(b: Uint8Array): Uint8Array | string;
  /** Decompresses a page of frames in fewer calls than one per frame, when the codec can. */
  decompressPage?(frames: Uint8Array[]): Uint8Array[];
}

/** Splits the output of decompressing concatenated frames by each frame's declared size. */
function splitBySizes(frames: Uint8Array[], out: Buffer): Uint8Array[] {
  let at = 0;
  return frames.map((f) => {
    const n = frameContentSize(f);
    if (n === undefined) throw new Error('frame without a content size');
    return out.subarray(at, (at += n));
  });
}

function zlibOneShot(name: string, dictionary?: Buffer): Codec {
  const o = dictionary ? { dictionary } : {};
  return {
    name,
    compress: (b) => zlib.zstdCompressSync(b, o),
    decompress: (b) => zlib.zstdDecompressSync(b, o),
    // No page in one call: zstdDecompressSync stops after the first of concatenated frames.
  };
}

/** the experiment's codec (bench/codec.ts): text in, text out, frame checksum on. */
function lectern(name: string, dictionary: Buffer | undefined, reuseContexts = true): Codec {
  const codec = new StatementCodec({ dictionary, reuseContexts });
  const texts = new WeakMap<Buffer, string>();
  return {
    name: `${name} [${codec.engine}]`,
    compress: (b) => {
      let t = texts.get(b);
      if (t === undefined) texts.set(b, (t = b.toString()));
      return codec.compress(t);
    },
    decompress: (f) => codec.decompress(f),
  };
}

interface ZlibInternals {
  _handle: { writeSync(flush: number, i: Uint8Array, inOff: number, inLen: number, o: Buffer, outOff: number, outLen: number): void };
  _writeState: Uint32Array;
}

/** node:zlib's native context kept open and driven synchronously (private API: reference only). */
function zlibHandle(name: string, dictionary?: Buffer): Codec {
  const drive = (stream: object) => {
    const { _handle: h, _writeState: state } = stream as unknown as ZlibInternals;
    const out = Buffer.allocUnsafe(64 * 1024);
    return (input: Uint8Array): Uint8Array => {
      const parts: Buffer[] = [];
      let inOff = 0;
      let inLen = input.length;
      for (;;) {
        h.writeSync(ZSTD_e_end, input, inOff, inLen, out, 0, out.length);
        const [availOut, availIn] = state;
        parts.push(Buffer.from(out.subarray(0, out.length - availOut)));
        inOff += inLen - availIn;
        inLen = availIn;
        // A frame's end stops the native call: go on while input is left (concatenated frames).
        if (availOut !== 0 && inLen === 0) return parts.length === 1 ? parts[0] : Buffer.concat(parts);
      }
    };
  };
  const o = dictionary ? { dictionary } : {};
  const c = drive(zlib.createZstdCompress(o));
  const d = drive(zlib.createZstdDecompress(o));
  return { name, compress: c, decompress: d, decompressPage: (frames) => splitBySizes(frames, d(Buffer.concat(frames)) as Buffer) };
}

interface ZstdNapi {
  Compressor: new () => { loadDictionary(d: Uint8Array): void; compress(b: Uint8Array): Buffer; setParameters(p: object): void };
  Decompressor: new () => { loadDictionary(d: Uint8Array): void; decompress(b: Uint8Array): Buffer };
}

function zstdNapi(lib: ZstdNapi, name: string, dictionary?: Buffer): Codec {
  const c = new lib.Compressor();
  const d = new lib.Decompressor();
  if (dictionary) {
    c.loadDictionary(dictionary);
    d.loadDictionary(dictionary);
  }
  return { name, compress: (b) => c.compress(b), decompress: (b) => d.decompress(b) };
}

interface NodeZstd {
  Encoder: new (level: number, dictionary?: Buffer) => { encodeSync(b: Buffer): Buffer };
  Decoder: new (dictionary?: Buffer) => { decodeSync(b: Buffer): Buffer };
}

function nodeZstd(lib: NodeZstd, name: string, dictionary?: Buffer, level = 3): Codec {
  const e = new lib.Encoder(level, dictionary);
  const d = new lib.Decoder(dictionary);
  return { name, compress: (b) => e.encodeSync(b), decompress: (b) => d.decodeSync(Buffer.from(b.buffer, b.byteOffset, b.byteLength)) };
}

interface ZstdWasm {
  init(): Promise<void>;
  createCCtx(): number;
  createDCtx(): number;
  compressUsingDict(cctx: number, b: Uint8Array, dict: Uint8Array, level?: number): Uint8Array;
  decompressUsingDict(dctx: number, b: Uint8Array, dict: Uint8Array): Uint8Array;
}

function zstdWasm(lib: ZstdWasm, name: string, dictionary: Buffer): Codec {
  const c = lib.createCCtx();
  const d = lib.createDCtx();
  return { name, compress: (b) => lib.compressUsingDict(c, b, dictionary, 3), decompress: (b) => lib.decompressUsingDict(d, b, dictionary) };
}

// ----- measuring ------------------------------------------------------------------------------

interface Stats {
  median: number;
  p99: number;
}

const stats = (xs: number[]): Stats => {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], p99: s[Math.min(s.length - 1, Math.floor(s.length * 0.99))] };
};

interface Row {
  codec: string;
  bytes: number;
  compressUs: Stats;
  decompressUs: Stats;
  pageMs: Stats;
  pageOneCallMs?: Stats;
}

const time = (f: () => unknown): number => {
  const t = performance.now();
  f();
  return performance.now() - t;
};

function measure(codec: Codec, sample: Buffer[]): Row {
  const frames = sample.map((b) => codec.compress(b));
  sample.forEach((b, i) => {
    if (!Buffer.from(codec.decompress(frames[i])).equals(b)) throw new Error(`${codec.name}: round trip differs at ${i}`);
  });
  const pages = Array.from({ length: Math.floor(sample.length / PAGE) }, (_, p) => frames.slice(p * PAGE, (p + 1) * PAGE));
  if (codec.decompressPage) {
    const got = codec.decompressPage(pages[0]);
    got.forEach((g, i) => {
      if (!Buffer.from(g).equals(sample[i])) throw new Error(`${codec.name}: page split differs at ${i}`);
    });
  }
  const c: number[] = [];
  const d: number[] = [];
  const page: number[] = [];
  const pageOne: number[] = [];
  for (let rep = 0; rep < REPS; rep++) {
    for (const b of sample) c.push(time(() => codec.compress(b)) * 1000);
    for (const f of frames) d.push(time(() => codec.decompress(f)) * 1000);
    for (const p of pages) page.push(time(() => p.map((f) => codec.decompress(f))));
    if (codec.decompressPage) for (const p of pages) pageOne.push(time(() => codec.decompressPage!(p)));
  }
  return {
    codec: codec.name,
    bytes: frames.reduce((a, f) => a + f.length, 0) / frames.length,
    compressUs: stats(c),
    decompressUs: stats(d),
    pageMs: stats(page),
    ...(pageOne.length && { pageOneCallMs: stats(pageOne) }),
  };
}

/** The public reusable context: one stream object per direction, one frame per statement (async, thread pool). */
async function measureStream(name: string, sample: Buffer[], dictionary?: Buffer): Promise<Row> {
  const o = dictionary ? { dictionary } : {};
  const roundTrip = (stream: zlib.ZstdCompress | zlib.ZstdDecompress) => {
    const chunks: Buffer[] = [];
    stream.on('data', (ch: Buffer) => chunks.push(ch));
    return (input: Uint8Array) =>
      new Promise<Buffer>((resolve, reject) => {
        stream.once('error', reject);
        stream.write(input);
        stream.flush(ZSTD_e_end, () => {
          stream.off('error', reject);
          resolve(Buffer.concat(chunks.splice(0)));
        });
      });
  };
  const compress = roundTrip(zlib.createZstdCompress(o));
  const decompress = roundTrip(zlib.createZstdDecompress(o));
  const frames: Buffer[] = [];
  for (const b of sample) frames.push(await compress(b));
  for (let i = 0; i < sample.length; i++) if (!(await decompress(frames[i])).equals(sample[i])) throw new Error(`${name}: round trip differs at ${i}`);
  const c: number[] = [];
  const d: number[] = [];
  const page: number[] = [];
  // No page in one write: the stream decodes the first of concatenated frames and drops the rest.
  for (let rep = 0; rep < REPS; rep++) {
    for (const b of sample) {
      const t = performance.now();
      await compress(b);
      c.push((performance.now() - t) * 1000);
    }
    for (const f of frames) {
      const t = performance.now();
      await decompress(f);
      d.push((performance.now() - t) * 1000);
    }
    for (let p = 0; p + PAGE <= frames.length; p += PAGE) {
      const t = performance.now();
      for (const f of frames.slice(p, p + PAGE)) await decompress(f);
      page.push(performance.now() - t);
    }
  }
  const bytes = frames.reduce((a, f) => a + f.length, 0) / frames.length;
  return { codec: name, bytes, compressUs: stats(c), decompressUs: stats(d), pageMs: stats(page) };
}

// ----- SQLite page size -----------------------------------------------------------------------

interface PageSizeRow {
  rows: string;
  pageSize: number;
  tableBytes: number;
  fileBytes: number;
}

/** Bytes per statement of a one-table store (rowid, 36-char unique id, stored_ms, the JSON) by page size. */
function pageSizes(sample: Buffer[], packed: Uint8Array[]): PageSizeRow[] {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-pagesize-'));
  const out: PageSizeRow[] = [];
  try {
    for (const [rows, bodies] of [['JSON text', sample.map((b) => b.toString())], ['zstd frames (8 KB raw dictionary)', packed]] as const) {
      for (const pageSize of [4096, 8192, 16384]) {
        const file = join(dir, `${pageSize}-${out.length}.sqlite`);
        const db = new DatabaseSync(file);
        db.exec(`PRAGMA page_size = ${pageSize}; PRAGMA journal_mode = WAL;`);
        db.exec('CREATE TABLE statements (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stored_ms INTEGER NOT NULL, full BLOB NOT NULL)');
        const ins = db.prepare('INSERT INTO statements (id, stored_ms, full) VALUES (?, ?, ?)');
        db.exec('BEGIN');
        // Several passes over the sample (fresh ids) so the tables span thousands of pages.
        for (let pass = 0; pass < 10; pass++) bodies.forEach((b, i) => ins.run(`${pass}-${i}-${'0'.repeat(28)}`.slice(0, 36), Date.now(), b));
        db.exec('COMMIT');
        db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
        const n = bodies.length * 10;
        const table = (db.prepare("SELECT sum(pgsize) AS s FROM dbstat WHERE name = 'statements'").get() as { s: number }).s;
        db.close();
        out.push({ rows, pageSize, tableBytes: table / n, fileBytes: statSync(file).size / n });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return out;
}

// ----- main -----------------------------------------------------------------------------------

if (import.meta.main) {
  const started = machine();
  const sample = stored(SEED, 10_000, N);
  const jsonBytes = sample.reduce((a, b) => a + b.length, 0) / N;
  const raw = Object.fromEntries([8, 32, 110].map((kb) => [kb, rawDictionary(kb * 1024)]));
  const trained = Object.fromEntries([8, 32, 110].map((kb) => [kb, trainedDictionary(kb * 1024)]));
  const codecs: Codec[] = [zlibOneShot('zlib one-shot, no dictionary')];
  for (const kb of [8, 32, 110]) codecs.push(zlibOneShot(`zlib one-shot, raw ${kb} KB`, raw[kb]));
  for (const kb of [8, 32, 110]) if (trained[kb]) codecs.push(zlibOneShot(`zlib one-shot, trained ${kb} KB`, trained[kb]));
  codecs.push(zlibHandle('zlib handle (internal), no dictionary'));
  for (const kb of [8, 32, 110]) codecs.push(zlibHandle(`zlib handle (internal), raw ${kb} KB`, raw[kb]));
  if (trained[32]) codecs.push(zlibHandle('zlib handle (internal), trained 32 KB', trained[32]));
  codecs.push(lectern('src/store/codec.ts, no dictionary', undefined));
  for (const kb of [8, 32, 110]) codecs.push(lectern(`src/store/codec.ts, raw ${kb} KB`, raw[kb]));
  if (trained[32]) codecs.push(lectern('src/store/codec.ts, trained 32 KB', trained[32]));
  codecs.push(lectern('src/store/codec.ts, raw 32 KB', raw[32], false));
  const libs = args.libs ? createRequire(join(args.libs, 'noop.js')) : undefined;
  const optional = <T>(name: string): T | undefined => {
    try {
      return libs?.(name) as T;
    } catch (e) {
      process.stderr.write(`${name}: not loaded (${(e as Error).message.split('\n')[0]})\n`);
      return undefined;
    }
  };
  const napi = optional<ZstdNapi>('zstd-napi');
  if (napi) {
    codecs.push(zstdNapi(napi, 'zstd-napi, no dictionary'));
    for (const kb of [8, 32, 110]) codecs.push(zstdNapi(napi, `zstd-napi, raw ${kb} KB`, raw[kb]));
    for (const kb of [8, 32, 110]) if (trained[kb]) codecs.push(zstdNapi(napi, `zstd-napi, trained ${kb} KB`, trained[kb]));
  }
  const toon = optional<NodeZstd>('@toondepauw/node-zstd');
  if (toon) {
    codecs.push(nodeZstd(toon, '@toondepauw/node-zstd, no dictionary'));
    for (const kb of [8, 32, 110]) codecs.push(nodeZstd(toon, `@toondepauw/node-zstd, raw ${kb} KB`, raw[kb]));
    for (const kb of [8, 32, 110]) if (trained[kb]) codecs.push(nodeZstd(toon, `@toondepauw/node-zstd, trained ${kb} KB`, trained[kb]));
    codecs.push(nodeZstd(toon, '@toondepauw/node-zstd, raw 32 KB, level 1', raw[32], 1));
  }
  const wasm = optional<ZstdWasm>('@bokuweb/zstd-wasm');
  if (wasm) {
    await wasm.init();
    for (const kb of [8, 32]) codecs.push(zstdWasm(wasm, `@bokuweb/zstd-wasm, raw ${kb} KB`, raw[kb]));
  }
  const results: Row[] = [];
  const wanted = (name: string) => !args.only || name.includes(args.only);
  for (const codec of codecs.filter((c) => wanted(c.name))) {
    measure(codec, sample.slice(0, 200)); // warm-up
    results.push(measure(codec, sample));
    process.stderr.write(`${codec.name} done, load ${machine().loadavg}\n`);
  }
  for (const kb of [0, 8]) if (wanted('zlib stream')) results.push(await measureStream(`zlib stream (async, reused), ${kb ? `raw ${kb} KB` : 'no dictionary'}`, sample, kb ? raw[kb] : undefined));
  const packed = sample.map((b) => zlib.zstdCompressSync(b, { dictionary: raw[8] }));
  const pages = pageSizes(sample, packed);
  const ended = machine();

  const f = (x: number, d = 1) => x.toFixed(d);
  const out = process.stdout;
  out.write(`JSON compression: ${N} stored statements (${f(jsonBytes, 0)} bytes of JSON on average), ${REPS} repetitions, each call timed alone\n`);
  out.write(`Node ${process.version}, ${started.nproc} × ${started.cpu}; load average ${started.loadavg} at start, ${ended.loadavg} at end\n\n`);
  out.write('| codec | bytes/statement | × JSON | compress µs p50 / p99 | decompress µs p50 / p99 | page of 100, one call each, ms p50 / p99 | page of 100, one call, ms p50 / p99 |\n|---|---|---|---|---|---|---|\n');
  for (const r of results) {
    const pair = (s: Stats, d = 1) => `${f(s.median, d)} / ${f(s.p99, d)}`;
    out.write(`| ${r.codec} | ${f(r.bytes, 0)} | ${f(r.bytes / jsonBytes, 2)} | ${pair(r.compressUs)} | ${pair(r.decompressUs)} | ${pair(r.pageMs, 2)} | ${r.pageOneCallMs ? pair(r.pageOneCallMs, 2) : '—'} |\n`);
  }
  out.write(`\nSQLite, one table (rowid, 36-char unique id, stored_ms, body), ${N * 10} rows:\n\n| rows | page_size | table bytes/statement | file bytes/statement |\n|---|---|---|---|\n`);
  for (const p of pages) out.write(`| ${p.rows} | ${p.pageSize} | ${f(p.tableBytes, 0)} | ${f(p.fileBytes, 0)} |\n`);
  out.write(`\n${JSON.stringify({ machine: { ...started, loadavgEnd: ended.loadavg }, jsonBytes, dictionaries: Object.fromEntries(Object.entries(trained).map(([k, v]) => [`trained ${k} KB`, v?.length])), results, pages })}\n`);
}
