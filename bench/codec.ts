/**
 * zstd for stored statement JSON: one frame per statement, optionally with a raw-content
 * dictionary (statements concatenated), with the frame checksum on — a raw-content dictionary has
 * no id inside the frame, so without the checksum the wrong dictionary decodes to wrong text
 * silently. Frames are standard zstd: anything that has the dictionary can read them.
 *
 * Speed (bench/compress.ts): node:zlib's public zstd calls build a context
 * and load the dictionary on every call (≈ 30–50 µs per 1.4 KB statement to decompress, 60–350 µs
 * to compress), and its stream objects are asynchronous and decode only the first of several
 * frames. The same native context, kept open and driven synchronously, costs ≈ 5 µs and 7–12 µs.
 * Node exposes no public synchronous way to keep it, so this module drives the stream's native
 * handle the way node:zlib's own `*Sync` functions do (`_handle.writeSync`, `_writeState`), checks
 * at construction that this works and agrees with the public calls, and otherwise falls back to
 * the public one-shot calls — same frames, same results, only slower (`engine` tells which).
 *
 * Pure: no I/O. Not used by the stores (docs/performance.md, "Disk": measured, not
 * adopted — it rests on node:zlib internals, and a raw dictionary holds learners' statements that
 * erasure cannot reach); kept here so the experiment can be repeated.
 */
import * as zlib from 'node:zlib';

const { ZSTD_e_end, ZSTD_c_compressionLevel, ZSTD_c_checksumFlag } = zlib.constants;

/** A stored statement that cannot be decoded: wrong dictionary, corrupted or truncated data. */
export class CodecError extends Error {
  override name = 'CodecError';
}

export interface CodecOptions {
  /** Raw-content (or zstd-trained) dictionary; the same bytes must be given to decode. */
  dictionary?: Uint8Array;
  /** zstd level (default 3). */
  level?: number;
  /** Largest statement text, in bytes, a frame may decode to (default 256 MiB). */
  maxBytes?: number;
  /** false: always use node:zlib's public one-shot calls (a new context per call). */
  reuseContexts?: boolean;
}

/** The content size a zstd frame header declares (RFC 8878 §3.1.1.1), or undefined when absent or not a frame. */
export function frameContentSize(frame: Uint8Array): number | undefined {
  if (frame.length < 6 || frame[0] !== 0x28 || frame[1] !== 0xb5 || frame[2] !== 0x2f || frame[3] !== 0xfd) return undefined;
  const descriptor = frame[4];
  const fcsFlag = descriptor >> 6;
  const singleSegment = (descriptor >> 5) & 1;
  const at = 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][descriptor & 3];
  const width = fcsFlag === 0 ? singleSegment : 1 << fcsFlag;
  if (width === 0 || at + width > frame.length) return undefined;
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  if (width === 1) return frame[at];
  if (width === 2) return view.getUint16(at, true) + 256;
  if (width === 4) return view.getUint32(at, true);
  return Number(view.getBigUint64(at, true));
}

/** A raw-content dictionary: sample statement texts concatenated, the last `bytes` of them kept (zstd reaches the end best). */
export function rawDictionary(samples: readonly string[], bytes = 32 * 1024): Buffer {
  const all = Buffer.from(samples.join(''));
  return all.subarray(Math.max(0, all.length - bytes));
}

/** node:zlib's zstd options; @types/node does not declare these two yet (node:zlib has them, e.g. in Node 24.21). */
type ZstdOptions = zlib.ZstdOptions & { dictionary?: Buffer; rejectGarbageAfterEnd?: boolean };

interface NativeHandle {
  writeSync(flush: number, input: Uint8Array, inOff: number, inLen: number, out: Buffer, outOff: number, outLen: number): void;
}

/** One node:zlib zstd context kept open; reopened after any error (a failed frame leaves it mid-frame). */
class NativeContext {
  #make: () => zlib.ZstdCompress | zlib.ZstdDecompress;
  #stream!: zlib.ZstdCompress | zlib.ZstdDecompress;
  #handle!: NativeHandle;
  #state!: Uint32Array;
  #out = Buffer.allocUnsafe(64 * 1024);

  constructor(make: () => zlib.ZstdCompress | zlib.ZstdDecompress) {
    this.#make = make;
    this.#open();
  }

  #open(): void {
    const stream = this.#make();
    // Errors are read synchronously from `errored` below; the listener only keeps the later
    // 'error' event of the destroyed stream from becoming an uncaught exception.
    stream.on('error', () => {});
    const internals = stream as unknown as { _handle?: NativeHandle; _writeState?: Uint32Array };
    if (typeof internals._handle?.writeSync !== 'function' || !(internals._writeState instanceof Uint32Array)) {
      throw new Error('node:zlib keeps no synchronous zstd handle in this Node version');
    }
    this.#stream = stream;
    this.#handle = internals._handle;
    this.#state = internals._writeState;
  }

  /**
   * Feeds all of `input` with ZSTD_e_end; returns everything the context wrote (`expected` bytes,
   * when given). `borrow`: the result may be a view of the context's buffer, valid until the next call.
   */
  run(input: Uint8Array, maxBytes: number, expected?: number, borrow = false): Buffer {
    const out = this.#out;
    const spilled: Buffer[] = [];
    let used = 0;
    let total = 0;
    let inOff = 0;
    let inLen = input.length;
    try {
      for (;;) {
        this.#handle.writeSync(ZSTD_e_end, input, inOff, inLen, out, used, out.length - used);
        if (this.#stream.errored) throw this.#stream.errored;
        const availOut = this.#state[0];
        const availIn = this.#state[1];
        const have = out.length - used - availOut;
        used += have;
        total += have;
        if (total > maxBytes) throw new CodecError(`decoded statement exceeds ${maxBytes} bytes`);
        inOff += inLen - availIn;
        inLen = availIn;
        // Done when the context stopped with room left and all input taken (a frame's end also
        // stops it: going on with input left decodes what follows, which the caller then rejects).
        if (availOut !== 0 && inLen === 0) break;
        if (availOut === 0) {
          spilled.push(Buffer.from(out.subarray(0, used)));
          used = 0;
        }
      }
      if (expected !== undefined && total !== expected) {
        throw new CodecError(`stored statement decodes to ${total} bytes, its frame declares ${expected} (truncated or trailing data)`);
      }
    } catch (e) {
      this.#stream.destroy();
      this.#open();
      throw e;
    }
    const last = out.subarray(0, used);
    if (spilled.length === 0) return borrow ? last : Buffer.from(last);
    spilled.push(last);
    return Buffer.concat(spilled, total);
  }
}

/** Compresses and decompresses statement JSON text; one instance per thread, reused for every statement. */
export class StatementCodec {
  /** 'reused contexts' when the fast path passed its self-check, else 'one-shot'. */
  readonly engine: 'reused contexts' | 'one-shot';
  #maxBytes: number;
  #compressOptions: ZstdOptions;
  #decompressOptions: ZstdOptions;
  #compressor?: NativeContext;
  #decompressor?: NativeContext;

  constructor(o: CodecOptions = {}) {
    this.#maxBytes = o.maxBytes ?? 256 * 1024 * 1024;
    const dictionary = o.dictionary && Buffer.from(o.dictionary.buffer, o.dictionary.byteOffset, o.dictionary.byteLength);
    this.#compressOptions = { dictionary, params: { [ZSTD_c_compressionLevel]: o.level ?? 3, [ZSTD_c_checksumFlag]: 1 } };
    // Without rejectGarbageAfterEnd the one-shot call decodes the first frame and ignores what follows.
    this.#decompressOptions = { dictionary, maxOutputLength: this.#maxBytes, rejectGarbageAfterEnd: true };
    this.engine = o.reuseContexts !== false && this.#openContexts() ? 'reused contexts' : 'one-shot';
  }

  /** Opens the kept contexts and checks them against the public calls, both ways. */
  #openContexts(): boolean {
    try {
      this.#compressor = new NativeContext(() => zlib.createZstdCompress(this.#compressOptions));
      this.#decompressor = new NativeContext(() => zlib.createZstdDecompress(this.#decompressOptions));
      const probe = Buffer.from(JSON.stringify({ id: '00000000-0000-4000-8000-000000000000', verb: { id: 'http://adlnet.gov/expapi/verbs/answered' }, n: 'é\u0000' }));
      for (let k = 0; k < 2; k++) {
        const mine = this.#compressor.run(probe, this.#maxBytes);
        const theirs = zlib.zstdCompressSync(probe, this.#compressOptions);
        if (!zlib.zstdDecompressSync(mine, this.#decompressOptions).equals(probe)) return this.#dropContexts();
        if (!this.#decompressor.run(theirs, this.#maxBytes, probe.length).equals(probe)) return this.#dropContexts();
      }
      return true;
    } catch {
      return this.#dropContexts();
    }
  }

  #dropContexts(): false {
    this.#compressor = this.#decompressor = undefined;
    return false;
  }

  /** One zstd frame (with its content size and checksum) for a statement's JSON text. */
  compress(json: string): Buffer {
    const input = Buffer.from(json, 'utf8');
    return this.#compressor ? this.#compressor.run(input, Number.MAX_SAFE_INTEGER) : zlib.zstdCompressSync(input, this.#compressOptions);
  }

  /** The JSON text of a frame made by {@link compress} with the same dictionary; CodecError otherwise. */
  decompress(frame: Uint8Array): string {
    const declared = frameContentSize(frame);
    if (declared !== undefined && declared > this.#maxBytes) throw new CodecError(`stored statement declares ${declared} bytes, over the ${this.#maxBytes}-byte limit`);
    let out: Buffer;
    try {
      // The kept context needs the declared size to know the frame is whole; frames without one go the public way.
      out = this.#decompressor && declared !== undefined ? this.#decompressor.run(frame, this.#maxBytes, declared, true) : zlib.zstdDecompressSync(frame, this.#decompressOptions);
    } catch (e) {
      if (e instanceof CodecError) throw e;
      throw new CodecError(`stored statement does not decode (wrong dictionary, or corrupted, truncated or trailing data): ${(e as Error).message}`, { cause: e });
    }
    if (declared !== undefined && out.length !== declared) {
      throw new CodecError(`stored statement decodes to ${out.length} bytes, its frame declares ${declared} (truncated or trailing data)`);
    }
    return out.toString('utf8');
  }
}
