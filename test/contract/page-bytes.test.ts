/**
 * A statement page is bounded in bytes (REVIEW-27 item 1: one GET of 40 statements of 2M values
 * each killed the server), through HTTP, on every backend, with a small LECTERN_MAX_PAGE_BYTES: a
 * page ends early with a `more` link once its statements (and with `attachments=true` their data)
 * would go past the bound, always with at least one statement; following the links gives every
 * statement once, in order. What the store reads from the database for a page is counted on the
 * driver (node:sqlite on the event loop, pg), never timed.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { StatementSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { parseMultipartMixed } from '../../src/xapi/multipart.ts';
import { BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const BOUND = 16 * 1024;
const user = (username: string, scopes: string[]): TestUser => ({ username, password: `${username}-pw`, scopes, agent: { mbox: `mailto:${username}@example.com` } });
const READER = user('reader', ['all']);
const MINE = user('mine', ['statements/read/mine', 'statements/write']);

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');
/** A statement of about `bytes` bytes (padded in a result extension), with this verb. */
const sized = (verb: string, bytes: number, extra: Record<string, unknown> = {}): Record<string, unknown> =>
  statement({ verb: { id: verb }, result: { extensions: { 'http://example.com/pad': 'x'.repeat(bytes) } }, ...extra });

/** Bytes of strings and buffers the database drivers hand to this process while counting. */
let counted = 0;
let counting = false;
function count(value: unknown): void {
  if (!counting) return;
  if (typeof value === 'string') counted += Buffer.byteLength(value);
  else if (Buffer.isBuffer(value) || value instanceof Uint8Array) counted += value.byteLength;
  else if (Array.isArray(value)) value.forEach(count);
  else if (value && typeof value === 'object') Object.values(value).forEach(count);
}
// node:sqlite on the event loop (the `sqlite` backend; `sqlite-threads` reads on other threads)
// and pg (the server runs in this process): every row they return is counted.
for (const method of ['all', 'get'] as const) {
  const original = StatementSync.prototype[method] as (...a: unknown[]) => unknown;
  (StatementSync.prototype as unknown as Record<string, unknown>)[method] = function (this: StatementSync, ...a: unknown[]) {
    const out = original.apply(this, a);
    count(out);
    return out;
  };
}
{
  const original = pg.Client.prototype.query as (...a: unknown[]) => unknown;
  (pg.Client.prototype as unknown as Record<string, unknown>).query = function (this: pg.Client, ...a: unknown[]) {
    const rows = (r: unknown) => count((r as { rows?: unknown } | undefined)?.rows);
    const last = a[a.length - 1];
    if (typeof last === 'function') {
      return original.apply(this, [...a.slice(0, -1), (err: unknown, r: unknown) => (rows(r), (last as (e: unknown, r: unknown) => void)(err, r))]);
    }
    const out = original.apply(this, a);
    if (out instanceof Promise) return out.then((r) => (rows(r), r));
    return out;
  };
}

interface Page {
  ids: string[];
  /** Bytes of the statements' JSON as served (exact format: the stored text). */
  jsonBytes: number[];
  /** Attachment parts: sha2 → bytes. */
  parts: Map<string, number>;
  more: string;
}

for (const backend of BACKENDS) {
  describe(`statement pages are bounded in bytes [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [READER, MINE], env: { LECTERN_MAX_PAGE_BYTES: String(BOUND) } });
    });
    after(async () => t?.close());

    const post = async (u: TestUser, body: unknown): Promise<string> => {
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', body, { user: u }));
      assert.equal(res.status, 200, await res.clone().text());
      return ((await res.json()) as string[])[0];
    };
    /** POST with attachment data parts. */
    const postParts = async (u: TestUser, body: unknown, parts: Buffer[]): Promise<string> => {
      const b = `b${randomUUID()}`;
      const chunks: Buffer[] = [Buffer.from(`--${b}\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(body)}\r\n`)];
      for (const p of parts) {
        chunks.push(
          Buffer.from(`--${b}\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\nX-Experience-API-Hash: ${sha256(p)}\r\n\r\n`),
          p,
          Buffer.from('\r\n'),
        );
      }
      chunks.push(Buffer.from(`--${b}--`));
      const res = await t.fetch('/xAPI/statements', {
        method: 'POST',
        user: u,
        headers: { 'content-type': `multipart/mixed; boundary=${b}` },
        body: new Uint8Array(Buffer.concat(chunks)),
      });
      assert.equal(res.status, 200, await res.clone().text());
      return ((await res.json()) as string[])[0];
    };

    const read = async (path: string, u: TestUser): Promise<Page> => {
      const res = await t.fetch(path, { user: u });
      assert.equal(res.status, 200, await res.clone().text());
      let json: Buffer;
      const parts = new Map<string, number>();
      if ((res.headers.get('content-type') ?? '').startsWith('multipart/')) {
        const [first, ...rest] = parseMultipartMixed(res.headers.get('content-type')!, Buffer.from(await res.arrayBuffer()));
        json = first.body;
        for (const p of rest) parts.set(p.headers['x-experience-api-hash'], p.body.length);
      } else json = Buffer.from(await res.arrayBuffer());
      const result = JSON.parse(json.toString('utf8')) as { statements: Record<string, unknown>[]; more: string };
      return {
        ids: result.statements.map((s) => s.id as string),
        jsonBytes: result.statements.map((s) => Buffer.byteLength(JSON.stringify(s))),
        parts,
        more: result.more,
      };
    };
    /** Every page from `path` on, following the `more` links. */
    const walk = async (path: string, u: TestUser): Promise<Page[]> => {
      const pages = [await read(path, u)];
      while (pages.at(-1)!.more) {
        assert.ok(pages.length < 200, 'the walk ends');
        pages.push(await read(pages.at(-1)!.more, u));
      }
      return pages;
    };
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const pageBytes = (p: Page) => sum(p.jsonBytes) + sum([...p.parts.values()]);

    /** The walk gives `expected` in order, once each; every page within the bound (or one statement alone), and ended only where the next statement would not fit. */
    const assertWalk = (pages: Page[], expected: string[], sizeOf: (id: string) => number, limit = 100) => {
      assert.deepEqual(
        pages.flatMap((p) => p.ids),
        expected,
      );
      pages.forEach((p, i) => {
        assert.ok(p.ids.length >= 1 && p.ids.length <= limit, `page ${i}: ${p.ids.length} statements`);
        if (p.ids.length > 1) assert.ok(pageBytes(p) <= BOUND, `page ${i}: ${pageBytes(p)} bytes in ${p.ids.length} statements`);
        const next = pages[i + 1];
        if (next && p.ids.length < limit) assert.ok(pageBytes(p) + sizeOf(next.ids[0]) > BOUND, `page ${i} ended early though the next statement fits`);
      });
      assert.equal(pages.at(-1)!.more, '');
    };

    test('a page ends early with a more link once its statements would exceed the bound; the links give every statement once, in order', async () => {
      const verb = `http://example.com/verbs/paged-${randomUUID()}`;
      const ids: string[] = [];
      const size = new Map<string, number>();
      // 600 B to 6 KB each, one of 40 KB (larger than the bound: alone on its page), ≈ 140 KB in all.
      for (let i = 0; i < 40; i++) {
        const id = await post(MINE, sized(verb, i === 17 ? 40_000 : 600 + ((i * 1777) % 5400)));
        ids.push(id);
      }
      for (const page of await walk(`/xAPI/statements?verb=${encodeURIComponent(verb)}&limit=0&ascending=true`, MINE)) page.ids.forEach((id, i) => size.set(id, page.jsonBytes[i]));
      assert.ok(sum([...size.values()]) > 5 * BOUND);
      const reversed = [...ids].reverse();
      const q = (params: string) => `/xAPI/statements?${params}`;
      const v = `verb=${encodeURIComponent(verb)}`;
      // A verb (StatementRef targeting: the page's seqs first), both orders, with and without a limit.
      assertWalk(await walk(q(`${v}&limit=0&ascending=true`), MINE), ids, (id) => size.get(id)!);
      assertWalk(await walk(q(`${v}&limit=0`), READER), reversed, (id) => size.get(id)!);
      assertWalk(await walk(q(`${v}&limit=5`), MINE), reversed, (id) => size.get(id)!, 5);
      assertWalk(await walk(q(`${v}&limit=3&ascending=true`), READER), ids, (id) => size.get(id)!, 3);
      // Under mine without a filter (the statements table's own range), and with an activity.
      assertWalk(await walk(q('limit=0&ascending=true'), MINE), ids, (id) => size.get(id)!);
      assertWalk(await walk(q('limit=0'), MINE), reversed, (id) => size.get(id)!);
      const activity = encodeURIComponent('http://example.com/activities/explosives-training');
      assertWalk(await walk(q(`${v}&activity=${activity}&agent=${encodeURIComponent(JSON.stringify({ mbox: 'mailto:ben@example.com' }))}`), MINE), reversed, (id) => size.get(id)!);
      // The 40 KB statement is alone on its page.
      const alone = (await walk(q(`${v}&limit=0`), READER)).find((p) => p.ids.includes(ids[17]))!;
      assert.deepEqual(alone.ids, [ids[17]]);
    });

    // Counted by wrapping this thread's drivers: on sqlite-threads pages are read on reader threads
    // (the same readPage the sqlite run counts), so these two run on the other backends only.
    const countable = backend.name !== 'sqlite-threads';

    if (countable)
      test('the store reads about one page of statement JSON, not every row of the page query and cut afterwards', async () => {
        const verb = `http://example.com/verbs/read-${randomUUID()}`;
        const ids: string[] = [];
        for (let i = 0; i < 30; i++) ids.push(await post(READER, sized(verb, 8000)));
        for (const limit of ['0', '5']) {
          counted = 0;
          counting = true;
          const page = await read(`/xAPI/statements?verb=${encodeURIComponent(verb)}&limit=${limit}`, READER);
          counting = false;
          assert.ok(page.ids.length >= 1 && page.ids.length < 30 && page.more);
          // 30 × 8 KB = 240 KB match; one page is at most BOUND (16 KB), the rows read with the page
          // query at most BOUND more (inlineBytes), and a few small rows besides.
          assert.ok(counted <= 2 * BOUND + 8 * 1024, `limit=${limit}: ${counted} bytes read from the database for a page of ${sum(page.jsonBytes)} bytes`);
        }
      });

    if (countable)
      test("GET /agents reads about a page of the agent's statements, the newest first", async () => {
        const mbox = `mailto:${randomUUID()}@example.com`;
        for (let i = 0; i < 30; i++) await post(READER, sized('http://example.com/verbs/named', 8000, { actor: { mbox, name: `name ${i}` } }));
        counted = 0;
        counting = true;
        const res = await t.fetch(`/xAPI/agents?agent=${encodeURIComponent(JSON.stringify({ mbox }))}`, { user: READER });
        counting = false;
        assert.equal(res.status, 200);
        const person = (await res.json()) as { name?: string[] };
        assert.ok(person.name?.includes('name 29'), JSON.stringify(person));
        assert.ok(counted <= 2 * BOUND + 8 * 1024, `${counted} bytes read from the database for the Person object`);
      });

    test('attachments=true: a page counts the attachment data; a statement with more data than the bound is alone on its page with its data', async () => {
      const verb = `http://example.com/verbs/attached-${randomUUID()}`;
      const ids: string[] = [];
      const data = new Map<string, number>();
      for (let i = 0; i < 12; i++) {
        const blob = Buffer.alloc(i === 5 ? 3 * BOUND : 3000 + i * 300, i + 1);
        const att = { usageType: 'http://example.com/u', display: { en: 'a' }, contentType: 'application/octet-stream', length: blob.length, sha2: sha256(blob) };
        ids.push(await postParts(MINE, sized(verb, 500, { attachments: [att] }), [blob]));
        data.set(ids.at(-1)!, blob.length);
      }
      const pages = await walk(`/xAPI/statements?verb=${encodeURIComponent(verb)}&attachments=true&ascending=true`, MINE);
      for (const p of pages) assert.equal(p.parts.size, p.ids.length, 'each statement has its data');
      const size = new Map(pages.flatMap((p) => p.ids.map((id, i) => [id, p.jsonBytes[i] + data.get(id)!] as const)));
      assertWalk(pages, ids, (id) => size.get(id)!);
      assert.deepEqual(pages.find((p) => p.ids.includes(ids[5]))!.ids, [ids[5]]);
      assert.ok(pages.length >= 5);
      // Without attachments the same statements are one page.
      assert.equal((await walk(`/xAPI/statements?verb=${encodeURIComponent(verb)}`, MINE)).length, 1);
    });

    test('attachments=true: data declared by hash (with a fileUrl) beyond the bound is left out of a statement, single or in a page; its own data never', async () => {
      const verb = `http://example.com/verbs/by-hash-${randomUUID()}`;
      const blobs = [1, 2, 3].map((i) => Buffer.alloc(10_000, i));
      for (const b of blobs) {
        const att = { usageType: 'http://example.com/u', display: { en: 'a' }, contentType: 'application/octet-stream', length: b.length, sha2: sha256(b) };
        await postParts(READER, statement({ attachments: [att] }), [b]);
      }
      // One statement naming all three by hash (their data carried by the others), and 12 KB of its own.
      const own = Buffer.alloc(12_000, 9);
      const declared = blobs.map((b) => ({
        usageType: 'http://example.com/u',
        display: { en: 'a' },
        contentType: 'application/octet-stream',
        length: b.length,
        sha2: sha256(b),
        fileUrl: 'http://example.com/f',
      }));
      const ownAtt = { usageType: 'http://example.com/u', display: { en: 'own' }, contentType: 'application/octet-stream', length: own.length, sha2: sha256(own) };
      const id = await postParts(READER, statement({ verb: { id: verb }, attachments: [...declared, ownAtt] }), [own]);
      for (const path of [`/xAPI/statements?statementId=${id}&attachments=true`, `/xAPI/statements?verb=${encodeURIComponent(verb)}&attachments=true`]) {
        const res = await t.fetch(path, { user: READER });
        assert.equal(res.status, 200);
        const [first, ...parts] = parseMultipartMixed(res.headers.get('content-type')!, Buffer.from(await res.arrayBuffer()));
        const hashes = parts.map((p) => p.headers['x-experience-api-hash']);
        assert.ok(hashes.includes(sha256(own)), `${path}: the statement's own data is served`);
        // 12 KB of its own and its JSON leave room for none of the 10 KB blobs it declared by hash.
        assert.deepEqual(hashes, [sha256(own)], path);
        assert.ok(first.body.length + sum(parts.map((p) => p.body.length)) <= BOUND, path);
      }
    });
  });
}
