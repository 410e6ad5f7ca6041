/**
 * Statements with attachments (xAPI-Communication §1.5, §2.1.3 `attachments`) and signed statements
 * (xAPI-Data §2.6), through HTTP, on every backend.
 */
import assert from 'node:assert/strict';
import crypto, { createHash, createPrivateKey, randomUUID, sign as cryptoSign, type JsonWebKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { after, before, describe, mock, test } from 'node:test';
import { CompactSign, generateKeyPair, importPKCS8 } from 'jose';
import { parseMultipartMixed } from '../../src/xapi/multipart.ts';
import { REPLICA_BACKENDS, jsonInit, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';

const SIGNATURE = 'http://adlnet.gov/expapi/attachments/signature';
const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');
const fixture = (name: string): string => readFileSync(new URL(`../fixtures/signing/${name}`, import.meta.url), 'latin1');

/** An attachment object for `data` (no fileUrl unless given). */
function attachment(data: Buffer | string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    usageType: 'http://example.com/attachment-usage/test',
    display: { 'en-US': 'A test attachment' },
    contentType: 'text/plain',
    length: Buffer.byteLength(data),
    sha2: sha256(data),
    ...extra,
  };
}

interface Part {
  headers: Record<string, string>;
  body: Buffer | string;
}

const BOUNDARY = "abcABC0123'()+_,-./:=?";

/** A multipart/mixed body written by hand (so that tests can also break the rules). */
function multipartBody(parts: Part[], boundary = BOUNDARY): Uint8Array<ArrayBuffer> {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const head = Object.entries(p.headers)
      .map(([k, v]) => `${k}:${v}\r\n`)
      .join('');
    chunks.push(Buffer.from(`--${boundary}\r\n${head}\r\n`, 'latin1'), Buffer.from(p.body), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--`));
  return new Uint8Array(Buffer.concat(chunks)); // fetch's BodyInit type wants an ArrayBuffer-backed view
}

const jsonPart = (value: unknown): Part => ({ headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(value) });
const dataPart = (data: Buffer | string, extra: Record<string, string> = {}): Part => ({
  headers: { 'Content-Type': 'text/plain', 'Content-Transfer-Encoding': 'binary', 'X-Experience-API-Hash': sha256(data), ...extra },
  body: data,
});

const multipartInit = (method: string, parts: Part[], contentType = `multipart/mixed; boundary="${BOUNDARY}"`): RequestInit => ({
  method,
  headers: { 'content-type': contentType },
  body: multipartBody(parts),
});

/** Splits a multipart response: its parts with lower-cased header names. */
async function readMultipart(res: Response): Promise<{ headers: Record<string, string>; body: Buffer }[]> {
  const ct = res.headers.get('content-type') ?? '';
  assert.match(ct, /^multipart\/mixed; boundary=/);
  return parseMultipartMixed(ct, Buffer.from(await res.arrayBuffer()));
}

for (const backend of REPLICA_BACKENDS) {
  describe(`statements with attachments [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const getOne = (id: string, qs = '') => t.fetch(`/xAPI/statements?statementId=${id}${qs}`);
    const stored = async (id: string) => (await getOne(id)).status === 200;

    test('POST multipart/mixed (the spec example): stored, and served back with attachments=true', async () => {
      const text = 'here is a simple attachment';
      const id = randomUUID();
      const s = statement({ id, attachments: [attachment(text, { contentType: 'text/plain; charset=ascii' })] });
      const res = await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(s), dataPart(text)]));
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(await res.json(), [id]);

      const plain = await getOne(id);
      assert.match(plain.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal((await plain.json()).attachments[0].sha2, sha256(text));
      const no = await getOne(id, '&attachments=false');
      assert.match(no.headers.get('content-type') ?? '', /^application\/json/);

      const res2 = await getOne(id, '&attachments=true');
      assert.equal(res2.status, 200);
      assert.ok(res2.headers.get('last-modified'));
      assert.ok(res2.headers.get('x-experience-api-consistent-through'));
      const parts = await readMultipart(res2);
      assert.equal(parts.length, 2);
      assert.match(parts[0].headers['content-type'], /^application\/json/);
      const got = JSON.parse(parts[0].body.toString('utf8'));
      assert.equal(got.id, id);
      assert.equal(parts[1].headers['x-experience-api-hash'], sha256(text));
      assert.equal(parts[1].headers['content-transfer-encoding'], 'binary');
      assert.equal(parts[1].headers['content-type'], 'text/plain; charset=ascii', 'the attachment object’s contentType');
      assert.equal(parts[1].body.toString('latin1'), text);
    });

    test('binary data survives byte for byte; PUT accepts multipart/mixed too', async () => {
      const data = Buffer.from(Array.from({ length: 600 }, (_, i) => (i * 37) % 256));
      const id = randomUUID();
      const s = statement({ attachments: [attachment(data, { contentType: 'application/octet-stream' })] });
      const res = await t.fetch(
        `/xAPI/statements?statementId=${id}`,
        multipartInit('PUT', [jsonPart(s), { ...dataPart(data), headers: { ...dataPart(data).headers, 'Content-Type': 'application/octet-stream' } }]),
      );
      assert.equal(res.status, 204, await res.clone().text());
      const parts = await readMultipart(await getOne(id, '&attachments=true'));
      assert.equal(parts.length, 2);
      assert.ok(parts[1].body.equals(data));
    });

    test('a batch sharing an attachment sends its data once; a query with attachments=true returns each attachment once', async () => {
      const shared = `shared ${randomUUID()}`;
      const own = `own ${randomUUID()}`;
      const verb = `http://example.com/verbs/${randomUUID()}`;
      const batch = [
        statement({ verb: { id: verb }, attachments: [attachment(shared)] }),
        statement({ verb: { id: verb }, attachments: [attachment(shared), attachment(own)] }),
        statement({ verb: { id: verb } }),
      ];
      const res = await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(batch), dataPart(shared), dataPart(own)]));
      assert.equal(res.status, 200, await res.clone().text());
      const ids = await res.json();

      const q = await t.fetch(`/xAPI/statements?verb=${encodeURIComponent(verb)}&attachments=true`);
      assert.equal(q.status, 200);
      const parts = await readMultipart(q);
      const result = JSON.parse(parts[0].body.toString('utf8'));
      assert.deepEqual(
        result.statements.map((s: { id: string }) => s.id),
        [...ids].reverse(),
      );
      assert.equal(result.more, '');
      assert.deepEqual(
        parts
          .slice(1)
          .map((p) => p.body.toString())
          .sort(),
        [own, shared].sort(),
      );

      const plain = await t.fetch(`/xAPI/statements?verb=${encodeURIComponent(verb)}`);
      assert.match(plain.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal((await plain.json()).statements.length, 3);
    });

    test('HEAD with attachments=true: the multipart headers and no body', async () => {
      const text = `head ${randomUUID()}`;
      const id = randomUUID();
      assert.equal((await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(statement({ id, attachments: [attachment(text)] })), dataPart(text)]))).status, 200);
      const head = await t.fetch(`/xAPI/statements?statementId=${id}&attachments=true`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.match(head.headers.get('content-type') ?? '', /^multipart\/mixed; boundary=/);
      assert.equal((await head.arrayBuffer()).byteLength, 0);
    });

    test('data shared with a statement stored earlier is served for both', async () => {
      const text = `reused ${randomUUID()}`;
      const a = randomUUID();
      const b = randomUUID();
      assert.equal((await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(statement({ id: a, attachments: [attachment(text)] })), dataPart(text)]))).status, 200);
      assert.equal((await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(statement({ id: b, attachments: [attachment(text)] })), dataPart(text)]))).status, 200);
      for (const id of [a, b]) {
        const parts = await readMultipart(await getOne(id, '&attachments=true'));
        assert.equal(parts.length, 2, id);
        assert.equal(parts[1].body.toString(), text);
      }
    });

    test('an attachment of a SubStatement carries data like the statement’s own', async () => {
      const text = `sub ${randomUUID()}`;
      const id = randomUUID();
      const sub = {
        objectType: 'SubStatement',
        actor: { mbox: 'mailto:sub@example.com' },
        verb: { id: 'http://example.com/verbs/will-do' },
        object: { id: 'http://example.com/activities/sub' },
        attachments: [attachment(text)],
      };
      const res = await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(statement({ id, object: sub })), dataPart(text)]));
      assert.equal(res.status, 200, await res.clone().text());
      const parts = await readMultipart(await getOne(id, '&attachments=true'));
      assert.equal(parts[1].body.toString(), text);
    });

    test('application/json: attachments with a fileUrl are accepted; attachments=true then has only the JSON part', async () => {
      const id = randomUUID();
      const s = statement({ id, attachments: [attachment('remote', { fileUrl: 'http://example.com/files/remote.txt' })] });
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', s))).status, 200);
      const parts = await readMultipart(await getOne(id, '&attachments=true'));
      assert.equal(parts.length, 1);
      assert.equal(JSON.parse(parts[0].body.toString()).attachments[0].fileUrl, 'http://example.com/files/remote.txt');
    });

    test('multipart/mixed without any attachment, or with fileUrl-only attachments, is accepted', async () => {
      const a = randomUUID();
      const b = randomUUID();
      assert.equal((await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(statement({ id: a }))]))).status, 200);
      const s = statement({ id: b, attachments: [attachment('x', { fileUrl: 'http://example.com/x' })] });
      assert.equal((await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart([s])]))).status, 200);
      assert.ok((await stored(a)) && (await stored(b)));
    });

    test('application/json with an attachment that has no fileUrl: 400, nothing stored', async () => {
      const id = randomUUID();
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', [statement(), statement({ id, attachments: [attachment('lost')] })]));
      assert.equal(res.status, 400);
      assert.match((await res.json()).detail, /fileUrl/);
      assert.equal(await stored(id), false);
    });

    const text = 'some attachment data';
    const rejected: [string, () => RequestInit][] = [
      ['an attachment with neither fileUrl nor part', () => multipartInit('POST', [jsonPart(statement({ attachments: [attachment(text)] }))])],
      ['a part that matches no attachment', () => multipartInit('POST', [jsonPart(statement({ attachments: [attachment(text)] })), dataPart(text), dataPart('extra')])],
      [
        'a part whose hash is not the hash of its content',
        () => multipartInit('POST', [jsonPart(statement({ attachments: [attachment(text)] })), { ...dataPart('other data'), headers: { ...dataPart(text).headers } }]),
      ],
      [
        'a part without X-Experience-API-Hash',
        () =>
          multipartInit('POST', [
            jsonPart(statement({ attachments: [attachment(text)] })),
            { headers: { 'Content-Type': 'text/plain', 'Content-Transfer-Encoding': 'binary' }, body: text },
          ]),
      ],
      [
        'a part without Content-Transfer-Encoding',
        () =>
          multipartInit('POST', [
            jsonPart(statement({ attachments: [attachment(text)] })),
            { headers: { 'Content-Type': 'text/plain', 'X-Experience-API-Hash': sha256(text) }, body: text },
          ]),
      ],
      [
        'a base64 part',
        () =>
          multipartInit('POST', [
            jsonPart(statement({ attachments: [attachment(text)] })),
            dataPart(Buffer.from(text).toString('base64'), { 'X-Experience-API-Hash': sha256(text), 'Content-Transfer-Encoding': 'base64' }),
          ]),
      ],
      ['no boundary', () => multipartInit('POST', [jsonPart(statement()), dataPart(text)], 'multipart/mixed')],
      ['a boundary absent from the body', () => multipartInit('POST', [jsonPart(statement())], 'multipart/mixed; boundary=nothere')],
      ['a first part that is not JSON', () => multipartInit('POST', [{ headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify(statement()) }])],
      ['a first part that is not valid JSON', () => multipartInit('POST', [{ headers: { 'Content-Type': 'application/json' }, body: '{"actor":' }])],
      ['multipart/form-data', () => multipartInit('POST', [jsonPart(statement())], `multipart/form-data; boundary="${BOUNDARY}"`)],
    ];
    for (const [name, init] of rejected) {
      test(`multipart rejected with 400: ${name}; nothing stored`, async () => {
        const id = randomUUID();
        const req = init();
        // Put a fresh id in the statements so that "nothing stored" can be checked.
        const body = Buffer.from(req.body as Uint8Array)
          .toString('latin1')
          .replace('"actor":', `"id":"${id}","actor":`);
        const res = await t.fetch('/xAPI/statements', { ...req, body: new Uint8Array(Buffer.from(body, 'latin1')) });
        assert.equal(res.status, 400, name);
        const detail = (await res.json()).detail;
        assert.ok(detail && detail.length > 0, name);
        assert.ok(res.headers.get('x-experience-api-consistent-through'));
        assert.equal(await stored(id), false, name);
      });
    }

    test('PUT multipart/mixed with an array is a 400', async () => {
      const id = randomUUID();
      const res = await t.fetch(`/xAPI/statements?statementId=${id}`, multipartInit('PUT', [jsonPart([statement()])]));
      assert.equal(res.status, 400);
      assert.equal(await stored(id), false);
    });
  });

  describe(`request size limit [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { env: { LECTERN_MAX_REQUEST_SIZE: '2048' } });
    });
    after(async () => t?.close());

    test('a request over LECTERN_MAX_REQUEST_SIZE gets 413 with a JSON detail; one under it is stored', async () => {
      const big = 'x'.repeat(3000);
      const id = randomUUID();
      const res = await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(statement({ id, attachments: [attachment(big)] })), dataPart(big)]));
      assert.equal(res.status, 413);
      assert.match((await res.json()).detail, /LECTERN_MAX_REQUEST_SIZE/);
      assert.ok(res.headers.get('x-experience-api-consistent-through'));
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);
      const small = 'y'.repeat(100);
      const ok = await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart(statement({ attachments: [attachment(small)] })), dataPart(small)]));
      assert.equal(ok.status, 200);
    });
  });

  describe(`signed statements [${backend.name}]`, () => {
    let t: TestLrs;
    let key: CryptoKey;
    let x5c: string[];
    before(async () => {
      t = await startTestLrs(backend);
      key = (await importPKCS8(fixture('signer-key.pem'), 'RS256')) as CryptoKey;
      x5c = [fixture('signer-cert.pem').replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, '')];
    });
    after(async () => t?.close());

    const sign = (payload: unknown, k: CryptoKey = key, header: Record<string, unknown> = { x5c }) =>
      new CompactSign(new TextEncoder().encode(JSON.stringify(payload))).setProtectedHeader({ alg: 'RS256', ...header }).sign(k);

    /** The statement with its signature attachment, and the multipart parts carrying it. */
    function signed(s: Record<string, unknown>, jws: string, extra: Record<string, unknown> = {}): Part[] {
      const sig = attachment(jws, { usageType: SIGNATURE, contentType: 'application/octet-stream', display: { 'en-US': 'Signature' }, ...extra });
      return [jsonPart({ ...s, attachments: [sig] }), dataPart(jws, { 'Content-Type': 'application/octet-stream' })];
    }

    test('a well-signed statement (RS256, x5c) is stored and its signature served back', async () => {
      const id = randomUUID();
      const s = statement({ id, timestamp: '2024-05-01T10:00:00.000Z' });
      const jws = await sign(s);
      const res = await t.fetch('/xAPI/statements', multipartInit('POST', signed(s, jws)));
      assert.equal(res.status, 200, await res.clone().text());
      const parts = await readMultipart(await t.fetch(`/xAPI/statements?statementId=${id}&attachments=true`));
      assert.equal(parts[1].body.toString('latin1'), jws);
      assert.equal(parts[1].headers['content-type'], 'application/octet-stream');
    });

    test('signed without an id: the statement is stored under the id of the signed payload', async () => {
      const id = randomUUID();
      const s = statement();
      const jws = await sign({ ...s, id });
      const res = await t.fetch('/xAPI/statements', multipartInit('POST', signed(s, jws)));
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(await res.json(), [id]);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 200);
    });

    test('PUT: a payload signed under another id than statementId is a 400', async () => {
      const id = randomUUID();
      const s = statement();
      const jws = await sign({ ...s, id: randomUUID() });
      const res = await t.fetch(`/xAPI/statements?statementId=${id}`, multipartInit('PUT', signed(s, jws)));
      assert.equal(res.status, 400);
      assert.match((await res.json()).detail, /\$\.id/);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);
    });

    const bad: [string, () => Promise<{ s: Record<string, unknown>; parts: Part[] }>, RegExp][] = [
      [
        'the payload differs from the statement',
        async () => {
          const s = statement({ id: randomUUID() });
          return { s, parts: signed(s, await sign({ ...s, result: { success: false } })) };
        },
        /does not match/,
      ],
      [
        'the signature does not verify with its x5c certificate',
        async () => {
          const s = statement({ id: randomUUID() });
          const other = (await generateKeyPair('RS256')).privateKey as CryptoKey;
          return { s, parts: signed(s, await sign(s, other)) };
        },
        /does not verify/,
      ],
      [
        'the signature is not a JWS',
        async () => {
          const s = statement({ id: randomUUID() });
          return { s, parts: signed(s, 'not a signature') };
        },
        /Compact Serialization/,
      ],
      [
        'the signature attachment is not application/octet-stream',
        async () => {
          const s = statement({ id: randomUUID() });
          const jws = await sign(s);
          return { s, parts: signed(s, jws, { contentType: 'text/plain' }) };
        },
        /octet-stream/,
      ],
      [
        'the algorithm is not RS256/384/512',
        async () => {
          const s = statement({ id: randomUUID() });
          const secret = new TextEncoder().encode('0123456789abcdef0123456789abcdef');
          const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(s))).setProtectedHeader({ alg: 'HS256' }).sign(secret);
          return { s, parts: signed(s, jws) };
        },
        /RS256/,
      ],
      ...(
        [
          ['the protected header is not JSON', 0, 'not json', /protected header is not base64url-encoded JSON/],
          ['the protected header is JSON but not an object', 0, '["RS256"]', /protected header is not base64url-encoded JSON/],
          ['the payload is not JSON', 1, '{"id": ', /payload is not a JSON serialization of a statement/],
        ] as const
      ).map(([name, segment, text, pattern]): (typeof bad)[number] => [
        name,
        async () => {
          // A good signature with one of its segments replaced by other base64url text.
          const s = statement({ id: randomUUID() });
          const parts = (await sign(s)).split('.');
          parts[segment] = Buffer.from(text).toString('base64url');
          return { s, parts: signed(s, parts.join('.')) };
        },
        pattern,
      ]),
    ];
    for (const [name, make, pattern] of bad) {
      test(`malformed signature rejected with 400: ${name}`, async () => {
        const { s, parts } = await make();
        const res = await t.fetch('/xAPI/statements', multipartInit('POST', parts));
        assert.equal(res.status, 400);
        assert.match((await res.json()).detail, pattern);
        assert.equal((await t.fetch(`/xAPI/statements?statementId=${s.id as string}`)).status, 404);
      });
    }

    /** A JWS of `payload` signed with a private JWK, its certificate in x5c (node:crypto: jose refuses odd keys). */
    function signWithJwk(payload: unknown, key: { jwk: JsonWebKey; x5c: string }): string {
      const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
      const input = `${encode({ alg: 'RS256', x5c: [key.x5c] })}.${encode(payload)}`;
      return `${input}.${cryptoSign('sha256', Buffer.from(input), createPrivateKey({ key: key.jwk, format: 'jwk' })).toString('base64url')}`;
    }

    test('review item 2: an x5c key with an outsized exponent or modulus is a 400 naming the bound; a 33-bit exponent verifies', async () => {
      // The review's key: RSA-3072 with an exponent nearly as long (OpenSSL bounds exponents only
      // above 3,072 bits), 6 ms a verification.
      const keys = JSON.parse(fixture('odd-keys.json')) as Record<string, { jwk: JsonWebKey; x5c: string }>;
      const cases: [string, RegExp | undefined][] = [
        ['3072-bit modulus, exponent nearly as long', /RSA key has a 30\d\d-bit public exponent; this LRS verifies keys whose exponent is odd and from 3 to 2\^33 - 1/],
        ['34-bit exponent', /RSA key has a 34-bit public exponent/],
        ['8200-bit modulus', /RSA key has a 8200-bit modulus; this LRS verifies keys of at most 8192 bits/],
        ['33-bit exponent', undefined],
      ];
      for (const [name, refusal] of cases) {
        const s = statement({ id: randomUUID() });
        const res = await t.fetch('/xAPI/statements', multipartInit('POST', signed(s, signWithJwk(s, keys[name]!))));
        if (refusal === undefined) {
          assert.equal(res.status, 200, `${name}: ${await res.clone().text()}`);
          continue;
        }
        assert.equal(res.status, 400, name);
        assert.match((await res.json()).detail, new RegExp(`^attachments\\[0\\] \\(signature\\): the x5c certificate's ${refusal.source}`), name);
        assert.equal((await t.fetch(`/xAPI/statements?statementId=${s.id as string}`)).status, 404);
      }
    });

    test('review item 2: a JWS declared 2,000 times by one statement, and by each statement of a batch, is verified once', async () => {
      // Counted on node:crypto's verify, which the server (in this process) calls per verification.
      const verify = mock.method(crypto, 'verify');
      syncBuiltinESMExports();
      try {
        const id = randomUUID();
        const s = statement({ id });
        const jws = await sign(s);
        const sig = attachment(jws, { usageType: SIGNATURE, contentType: 'application/octet-stream', display: { 'en-US': 'Signature' } });
        const part = dataPart(jws, { 'Content-Type': 'application/octet-stream' });
        const res = await t.fetch('/xAPI/statements', multipartInit('POST', [jsonPart({ ...s, attachments: Array(2_000).fill(sig) }), part]));
        assert.equal(res.status, 200, await res.clone().text());
        assert.equal(verify.mock.callCount(), 1, 'one verification for 2,000 declarations');
        // Statements without an id, all equal to the signed payload: 50 statements, one verification.
        const anonymous = statement({ timestamp: '2024-05-01T10:00:00.000Z' });
        const shared = await sign(anonymous);
        const sharedSig = attachment(shared, { usageType: SIGNATURE, contentType: 'application/octet-stream', display: { 'en-US': 'Signature' } });
        const batch = await t.fetch(
          '/xAPI/statements',
          multipartInit('POST', [jsonPart(Array(50).fill({ ...anonymous, attachments: [sharedSig] })), dataPart(shared, { 'Content-Type': 'application/octet-stream' })]),
        );
        assert.equal(batch.status, 200, await batch.clone().text());
        assert.equal((await batch.json()).length, 50);
        assert.equal(verify.mock.callCount(), 2, 'one more verification for the batch');
        // Each is still compared with its statement: a batch whose second statement differs is refused.
        const differs = await t.fetch(
          '/xAPI/statements',
          multipartInit('POST', [
            jsonPart([
              { ...anonymous, attachments: [sharedSig] },
              { ...anonymous, result: { success: true }, attachments: [sharedSig] },
            ]),
            dataPart(shared, { 'Content-Type': 'application/octet-stream' }),
          ]),
        );
        assert.equal(differs.status, 400);
        assert.match((await differs.json()).detail, /does not match the received statement \(they differ at \$\.result\)/);
      } finally {
        verify.mock.restore();
        syncBuiltinESMExports();
      }
    });

    test('a signed statement sent as application/json (signature by fileUrl only) is a 400: it cannot be verified', async () => {
      const s = statement({ id: randomUUID() });
      const jws = await sign(s);
      const sig = attachment(jws, { usageType: SIGNATURE, contentType: 'application/octet-stream', fileUrl: 'http://example.com/sig' });
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', { ...s, attachments: [sig] }));
      assert.equal(res.status, 400);
      assert.match((await res.json()).detail, /multipart/);
    });
  });
}
