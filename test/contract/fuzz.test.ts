/**
 * Seeded fuzzing through HTTP: mutated statements, parameters, documents, multipart bodies and
 * headers from every resource, on every backend. Whatever a client sends, the answer is never a
 * 5xx and the server keeps serving. The same seed gives the same requests; a longer run:
 * `LECTERN_FUZZ_REQUESTS=30000 LECTERN_FUZZ_SEED=7 node --test ... test/contract/fuzz.test.ts`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const COUNT = Number(process.env.LECTERN_FUZZ_REQUESTS ?? 400);
const SEED = Number(process.env.LECTERN_FUZZ_SEED ?? 20261126);

/** mulberry32: a small, seedable PRNG (reproducible requests). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

class Gen {
  readonly next: () => number;
  constructor(seed: number) {
    this.next = prng(seed);
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  uuid(): string {
    const h = () => this.int(16).toString(16);
    return `${Array.from({ length: 8 }, h).join('')}-${Array.from({ length: 4 }, h).join('')}-4${Array.from({ length: 3 }, h).join('')}-a${Array.from({ length: 3 }, h).join('')}-${Array.from({ length: 12 }, h).join('')}`;
  }
  /** Strings that break parsers: odd characters, escapes, lone surrogates, huge and tiny numbers as text. */
  string(): string {
    return this.pick([
      '',
      ' ',
      'http://example.com/a',
      'https://example.com/ä/ü?q=1#f',
      'mailto:a@example.com',
      'mailto:',
      'urn:x',
      'not an iri',
      '\u0000',
      '\ud800',
      '\uffff',
      '%',
      '%FF',
      '%C3%28',
      '💥'.repeat(3),
      'x'.repeat(this.int(3) ? 10 : 5000),
      '9999-12-31T23:59:59-23:59',
      '0000-01-01T00:00:00Z',
      '2026-02-30T25:61:61Z',
      '2026-11-26T05:00:00.123456789+14:00',
      'P1Y2M3DT4H5M6.7S',
      'PT',
      this.uuid(),
      this.uuid().toUpperCase(),
      '12345678-1234-5678-1234-56781234567',
      '18446744073709551616',
      '9223372036854775808',
      '-1',
      '1e400',
      '__proto__',
      'constructor',
      'en-US',
      'x-invalid--tag',
      '{"mbox":"mailto:a@example.com"}',
      '[]',
      'null',
    ]);
  }
  scalar(): Json {
    return this.pick<() => Json>([
      () => null,
      () => true,
      () => false,
      () => 0,
      () => -1,
      () => 1.5,
      () => 1e308,
      () => -1e308,
      () => Number.MAX_SAFE_INTEGER + 2,
      () => this.string(),
    ])();
  }
  value(depth = 0): Json {
    if (depth > 3 || this.chance(0.6)) return this.scalar();
    if (this.chance(0.5)) return Array.from({ length: this.int(4) }, () => this.value(depth + 1));
    const o: Record<string, Json> = {};
    for (let i = this.int(4); i > 0; i--) o[this.pick(['id', 'objectType', 'mbox', 'name', 'en-US', 'http://example.com/ext', this.string()])] = this.value(depth + 1);
    return o;
  }
}

/** A valid statement with most of what a statement may carry, for mutation. */
function rich(g: Gen): Record<string, Json> {
  return statement({
    id: g.uuid(),
    timestamp: '2026-11-26T05:00:00.000Z',
    result: { score: { scaled: 0.5, raw: 5, min: 0, max: 10 }, success: true, completion: true, duration: 'PT1M', extensions: { 'http://example.com/r': { a: [1, 2] } } },
    context: {
      registration: g.uuid(),
      instructor: { mbox: 'mailto:teacher@example.com' },
      team: { objectType: 'Group', name: 'T', member: [{ mbox: 'mailto:m@example.com' }] },
      contextActivities: {
        parent: [{ id: 'http://example.com/p' }],
        grouping: { id: 'http://example.com/g' },
        other: [{ id: 'http://example.com/o', definition: { name: { 'en-US': 'o' } } }],
      },
      language: 'en-US',
      statement: { objectType: 'StatementRef', id: g.uuid() },
      extensions: { 'http://example.com/c': 1 },
    },
    attachments: [{ usageType: 'http://example.com/u', display: { 'en-US': 'a' }, contentType: 'text/plain', length: 3, sha2: 'a'.repeat(64), fileUrl: 'http://example.com/f' }],
  }) as Record<string, Json>;
}

/** Mutates one place of a JSON tree: drop, replace, add a key, or wrap. */
function mutate(g: Gen, v: Json, depth = 0): Json {
  if (v === null || typeof v !== 'object' || depth > 6 || g.chance(0.25)) {
    return g.pick<() => Json>([() => g.value(), () => g.scalar(), () => [v], () => ({ x: v })])();
  }
  if (Array.isArray(v)) {
    if (!v.length || g.chance(0.2)) return [...v, g.value()];
    const i = g.int(v.length);
    return v.map((x, j) => (j === i ? mutate(g, x, depth + 1) : x));
  }
  const keys = Object.keys(v);
  const out: Record<string, Json> = { ...v };
  const r = g.next();
  if (!keys.length || r < 0.15) out[g.pick(['objectType', 'id', 'definition', 'extensions', 'member', 'version', 'stored', 'authority', g.string()])] = g.value();
  else if (r < 0.3) delete out[g.pick(keys)];
  else {
    const k = g.pick(keys);
    out[k] = mutate(g, v[k], depth + 1);
  }
  return out;
}

/** Lone surrogates cannot be percent-encoded: sent as U+FFFD. */
const enc = (s: string): string => encodeURIComponent(s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd'));
const versions = ['1.0.3', '2.0.0', '1.0.0', '0.95', '2.1.0', '', null] as const;

interface FuzzRequest {
  path: string;
  init: RequestInit & { user?: TestUser | null; version?: string | null };
}

/** One random request to a random resource. */
function request(g: Gen): FuzzRequest {
  const version = g.chance(0.85) ? g.pick(['1.0.3', '2.0.0']) : g.pick(versions);
  const kind = g.int(7);
  if (kind <= 1) {
    // Statements, mutated one to three times, alone or in a batch; PUT or POST.
    let s: Json = rich(g);
    for (let i = g.int(4); i > 0; i--) s = mutate(g, s);
    const body = g.chance(0.3) ? [s, mutate(g, rich(g))] : s;
    const put = g.chance(0.3);
    const id = g.chance(0.8) ? g.uuid() : g.string();
    return {
      path: put ? `/xAPI/statements?statementId=${enc(id)}` : '/xAPI/statements',
      init: {
        method: put ? 'PUT' : 'POST',
        version,
        headers: { 'content-type': g.chance(0.9) ? 'application/json' : g.pick(['text/plain', 'application/json; charset=latin1', '']) },
        body: JSON.stringify(body),
      },
    };
  }
  if (kind === 2) {
    // Statement queries with random parameters and values.
    const names = [
      'agent',
      'verb',
      'activity',
      'registration',
      'related_activities',
      'related_agents',
      'since',
      'until',
      'limit',
      'format',
      'attachments',
      'ascending',
      'search_after',
      'statementId',
      'voidedStatementId',
      'mine',
      'method',
      g.string(),
    ];
    const values = () =>
      g.pick([
        g.string(),
        JSON.stringify(g.value()),
        JSON.stringify({ mbox: 'mailto:ben@example.com' }),
        'true',
        'false',
        'canonical',
        'ids',
        '0',
        '100000',
        '-5',
        '9223372036854775808',
        '9999999999999999999',
        '18446744073709551615',
        '1e3',
        '2026-01-01T00:00:00Z',
      ]);
    const qs = Array.from({ length: g.int(4) }, () => `${enc(g.pick(names))}=${g.chance(0.9) ? enc(values()) : values()}`).join('&');
    return {
      path: `/xAPI/statements?${qs}`,
      init: { method: g.pick(['GET', 'GET', 'HEAD']), version, headers: { 'accept-language': g.pick(['en', '*', 'fr;q=0.5, en;q=x', '', '!!']) } },
    };
  }
  if (kind === 3) {
    // Documents: random parameters, content types, preconditions and bodies (JSON, not JSON, bad UTF-8).
    const resource = g.pick(['/xAPI/activities/state', '/xAPI/activities/profile', '/xAPI/agents/profile']);
    const params: Record<string, string> = {};
    if (g.chance(0.9)) params.activityId = g.chance(0.8) ? 'http://example.com/a' : g.string();
    if (g.chance(0.9)) params.agent = g.chance(0.8) ? JSON.stringify({ mbox: 'mailto:ben@example.com' }) : JSON.stringify(g.value());
    if (g.chance(0.7)) params[g.pick(['stateId', 'profileId'])] = g.chance(0.8) ? 'doc' : g.string();
    if (g.chance(0.2)) params.registration = g.chance(0.5) ? g.uuid() : g.string();
    if (g.chance(0.2)) params.since = g.string();
    const qs = Object.entries(params)
      .map(([k, v]) => `${k}=${g.chance(0.95) ? enc(v) : v}`)
      .join('&');
    const body = g.pick<() => string | Uint8Array<ArrayBuffer>>([
      () => JSON.stringify(g.value()),
      () => JSON.stringify({ a: g.value(), b: 1 }),
      () => '{"a":',
      () => new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
      () => 'plain text',
    ])();
    const headers: Record<string, string> = { 'content-type': g.pick(['application/json', 'application/json; charset=utf-8', 'text/plain', 'application/octet-stream']) };
    if (g.chance(0.3)) headers[g.pick(['if-match', 'if-none-match'])] = g.pick(['*', '"abc"', 'W/"x"', '', `"${'f'.repeat(40)}"`]);
    const method = g.pick(['GET', 'PUT', 'POST', 'DELETE', 'HEAD']);
    return { path: `${resource}?${qs}`, init: { method, version, headers, ...(method === 'PUT' || method === 'POST' ? { body } : {}) } };
  }
  if (kind === 4) {
    // multipart/mixed: statements with attachments, parts missing, extra, garbled or with bad headers.
    const boundary = g.chance(0.8) ? 'b0undary' : g.pick(['', '"q"', 'x'.repeat(80), 'a b']);
    const data = 'abc';
    const sha2 = g.chance(0.7) ? 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' : g.string();
    let s: Json = statement({ attachments: [{ usageType: 'http://example.com/u', display: { 'en-US': 'a' }, contentType: 'text/plain', length: 3, sha2 }] }) as Json;
    if (g.chance(0.5)) s = mutate(g, s);
    const parts = [`--${boundary}\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(s)}\r\n`];
    const partCount = g.pick([0, 1, 1, 2, 5]);
    for (let i = 0; i < partCount; i++) {
      const headers = g.pick([
        `Content-Type: text/plain\r\nContent-Transfer-Encoding: binary\r\nX-Experience-API-Hash: ${sha2}\r\n`,
        'Content-Type: text/plain\r\n',
        `X-Experience-API-Hash: ${g.string()}\r\n`,
        '',
        'garbage\r\n',
      ]);
      parts.push(`--${boundary}\r\n${headers}\r\n${data}\r\n`);
    }
    const end = g.chance(0.85) ? `--${boundary}--\r\n` : '';
    const contentType = g.chance(0.8)
      ? `multipart/mixed; boundary=${boundary}`
      : g.pick(['multipart/mixed', 'multipart/form-data; boundary=b0undary', 'multipart/mixed; boundary=']);
    return { path: '/xAPI/statements', init: { method: 'POST', version, headers: { 'content-type': contentType }, body: parts.join('') + end } };
  }
  if (kind === 5) {
    // The alternate request syntax with random form fields.
    const fields: Record<string, string> = {};
    if (g.chance(0.8)) fields['X-Experience-API-Version'] = g.pick(['1.0.3', '2.0.0', 'x']);
    if (g.chance(0.8)) fields.Authorization = `Basic ${Buffer.from(`${ADMIN.username}:${ADMIN.password}`).toString('base64')}`;
    if (g.chance(0.5)) fields.content = g.chance(0.7) ? JSON.stringify(mutate(g, rich(g))) : g.string();
    if (g.chance(0.4)) fields[g.pick(['statementId', 'limit', 'agent', 'Content-Type', g.string()])] = g.string();
    const form = new URLSearchParams(fields).toString();
    return {
      path: `/xAPI/statements?method=${enc(g.pick(['GET', 'PUT', 'POST', 'DELETE', 'HEAD', 'PATCH', '']))}`,
      init: { method: 'POST', user: null, version: null, headers: { 'content-type': g.chance(0.9) ? 'application/x-www-form-urlencoded' : 'application/json' }, body: form },
    };
  }
  // Other resources and raw bodies.
  const path = g.pick([
    `/xAPI/activities?activityId=${enc(g.string())}`,
    `/xAPI/agents?agent=${enc(JSON.stringify(g.value()))}`,
    `/xAPI/agents?agent=${enc(JSON.stringify({ mbox: 'mailto:ben@example.com' }))}`,
    '/xAPI/about',
    '/xAPI/statements',
    `/xAPI/statements?${g.string()}`,
    '/whoami',
  ]);
  const method = g.pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);
  const raw = new Uint8Array(Array.from({ length: g.int(64) }, () => g.int(256)));
  return {
    path,
    init: {
      method,
      version,
      headers: { 'content-type': g.pick(['application/json', 'multipart/mixed; boundary=x', 'text/plain']) },
      ...(method === 'GET' || method === 'OPTIONS' ? {} : { body: raw }),
    },
  };
}

for (const backend of BACKENDS) {
  describe(`fuzzing through HTTP [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    test(`${COUNT} random requests (seed ${SEED}): never a 5xx, and the server keeps serving`, async () => {
      const g = new Gen(SEED);
      const failures: string[] = [];
      const statuses = new Map<number, number>();
      for (let i = 0; i < COUNT; i++) {
        const { path, init } = request(g);
        let res: Response;
        try {
          res = await t.fetch(path, init);
        } catch (err) {
          // A request fetch itself refuses to send (an invalid header value) never reached the server.
          if (err instanceof TypeError && !(err.cause instanceof Error && 'code' in err.cause)) continue;
          throw err;
        }
        const text = await res.text();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status >= 500) failures.push(`#${i} ${init.method} ${path.slice(0, 120)} → ${res.status} ${text.slice(0, 200)}`);
      }
      assert.deepEqual(failures, []);
      // The generator reaches the handlers, not only the validators: some requests were stored or served.
      assert.ok(
        [200, 204].some((s) => statuses.get(s)),
        `statuses seen: ${JSON.stringify([...statuses])}`,
      );
      const alive = await t.fetch('/xAPI/statements?limit=1');
      assert.equal(alive.status, 200);
    });
  });
}
