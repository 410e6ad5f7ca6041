import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CompactSign, base64url, generateKeyPair, importPKCS8 } from 'jose';
import { LrsError } from '../../src/errors.ts';
import { canonicalJson, jsonDifference, jsonEqual } from '../../src/xapi/compare.ts';
import { statementDifference, verifySignedStatement } from '../../src/xapi/signature.ts';
import { SIGNATURE_USAGE_TYPE } from '../../src/xapi/types.ts';
import type { Attachment, Statement } from '../../src/xapi/types.ts';

type Parts = Map<string, { contentType: string; body: Buffer }>;
type Key = Parameters<CompactSign['sign']>[0];

const fixture = (name: string): string => readFileSync(new URL(`../fixtures/signing/${name}`, import.meta.url), 'latin1');
const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');
const clone = <T>(value: T): T => structuredClone(value);

/** The base64 DER of a PEM certificate: what goes in an x5c array. */
const derBase64 = (pem: string): string => pem.replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, '');

async function rejects400(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof LrsError, `expected an LrsError, got ${String(err)}`);
    assert.equal(err.kind, 'bad_request');
    assert.match(err.message, pattern);
    return true;
  });
}

const STATEMENT: Statement = {
  id: 'f1b5b0b2-6c40-4a5e-9d8b-2f1b9c3c8d11',
  actor: { objectType: 'Agent', name: 'Ada', mbox: 'mailto:ada@example.com' },
  verb: { id: 'http://adlnet.gov/expapi/verbs/completed', display: { 'en-US': 'completed' } },
  object: {
    objectType: 'Activity',
    id: 'http://example.com/course/1',
    definition: { name: { 'en-US': 'Course 1' } },
  },
  result: { completion: true, duration: 'PT1H', score: { scaled: 0.9 } },
  context: {
    registration: 'ec531277-b57b-4c15-8d91-d292c5b2b8f7',
    team: {
      objectType: 'Group',
      name: 'Team',
      member: [{ mbox: 'mailto:one@example.com' }, { mbox: 'mailto:two@example.com', name: 'Two' }],
    },
    contextActivities: { parent: [{ id: 'http://example.com/program' }] },
  },
  timestamp: '2024-05-01T10:00:00.000Z',
};

/** Builds what the LRS receives: the statement plus a signature attachment, and the parts map. */
function signedRequest(statement: Statement, jws: string | Buffer, attachment: Partial<Attachment> = {}): { statement: Statement; parts: Parts } {
  const body = typeof jws === 'string' ? Buffer.from(jws, 'latin1') : jws;
  const sig: Attachment = {
    usageType: SIGNATURE_USAGE_TYPE,
    display: { 'en-US': 'Signature' },
    contentType: 'application/octet-stream',
    length: body.length,
    sha2: sha256(body),
    ...attachment,
  };
  return {
    statement: { ...clone(statement), attachments: [...(statement.attachments ?? []), sig] },
    parts: new Map([[sig.sha2.toLowerCase(), { contentType: 'application/octet-stream', body }]]),
  };
}

const sign = (payload: unknown, key: Key, header: Record<string, unknown>): Promise<string> =>
  new CompactSign(new TextEncoder().encode(typeof payload === 'string' ? payload : JSON.stringify(payload))).setProtectedHeader({ alg: 'RS256', ...header }).sign(key);

let signerKey: Key;
let x5c: string[];
let otherKeys: { privateKey: Key; publicKey: Key };

before(async () => {
  signerKey = await importPKCS8(fixture('signer-key.pem'), 'RS256');
  x5c = [derBase64(fixture('signer-cert.pem'))];
  otherKeys = await generateKeyPair('RS256');
});

describe('verifySignedStatement', () => {
  describe('accepts', () => {
    for (const alg of ['RS256', 'RS384', 'RS512']) {
      it(`a good ${alg} signature verified against its x5c certificate`, async () => {
        const key = await importPKCS8(fixture('signer-key.pem'), alg);
        const jws = await sign(STATEMENT, key, { alg, x5c });
        const { statement, parts } = signedRequest(STATEMENT, jws);
        await verifySignedStatement(statement, parts, '1.0.3');
      });
    }

    it('a signature without x5c (structure and payload only; the key is unknown)', async () => {
      const jws = await sign(STATEMENT, otherKeys.privateKey, {});
      const { statement, parts } = signedRequest(STATEMENT, jws);
      await verifySignedStatement(statement, parts, '1.0.3');
    });

    it('the example signed statement of xAPI-Data Appendix D (1024-bit key, expired certificate)', async () => {
      const jws = fixture('appendix-d.jws');
      const appendixD: Statement = {
        version: '1.0.0',
        id: '33cff416-e331-4c9d-969e-5373a1756120',
        actor: { mbox: 'mailto:example@example.com', name: 'Example Learner', objectType: 'Agent' },
        verb: { id: 'http://adlnet.gov/expapi/verbs/experienced', display: { 'en-US': 'experienced' } },
        object: {
          id: 'https://www.youtube.com/watch?v=xh4kIiH3Sm8',
          objectType: 'Activity',
          definition: {
            name: { 'en-US': 'Tax Tips & Information : How to File a Tax Return ' },
            description: { 'en-US': 'Filing a tax return will require filling out either a 1040, 1040A or 1040EZ form' },
          },
        },
        timestamp: '2013-04-01T12:00:00Z',
      };
      const { statement, parts } = signedRequest(appendixD, jws, {
        description: { 'en-US': 'A test signature' },
        length: 4235,
      });
      assert.equal(statement.attachments![0]!.sha2, '672fa5fa658017f1b72d65036f13379c6ab05d4ab3b6664908d8acf0b6a0c634');
      await verifySignedStatement(statement, parts, '1.0.3');

      const altered = signedRequest({ ...appendixD, actor: { ...appendixD.actor, name: 'Someone Else' } }, jws);
      await rejects400(verifySignedStatement(altered.statement, altered.parts, '1.0.3'), /differ at \$\.actor\.name/);
    });

    it('a statement without signature attachment, whatever its other attachments', async () => {
      await verifySignedStatement(clone(STATEMENT), new Map(), '1.0.3');
      const other: Attachment = {
        usageType: 'http://example.com/usage/certificate',
        display: { en: 'Certificate' },
        contentType: 'application/pdf',
        length: 3,
        sha2: sha256(Buffer.from('pdf')),
      };
      await verifySignedStatement({ ...clone(STATEMENT), attachments: [other] }, new Map(), '1.0.3');
    });

    it('a payload that already listed other (non-signature) attachments', async () => {
      const withFile: Statement = {
        ...clone(STATEMENT),
        attachments: [{ usageType: 'http://example.com/u', display: { en: 'f' }, contentType: 'text/plain', length: 1, sha2: sha256(Buffer.from('x')) }],
      };
      const jws = await sign(withFile, signerKey, { x5c });
      const { statement, parts } = signedRequest(withFile, jws);
      await verifySignedStatement(statement, parts, '1.0.3');
    });

    it('a contentType with parameters or in another case, and trailing whitespace after the JWS', async () => {
      const jws = await sign(STATEMENT, signerKey, { x5c });
      const { statement, parts } = signedRequest(STATEMENT, `${jws}\r\n`, { contentType: 'Application/Octet-Stream; x=1' });
      await verifySignedStatement(statement, parts, '1.0.3');
    });

    it('differences the spec says to ignore (xAPI-Data 2.3.1)', async () => {
      // What the client signed: no id/version/authority/stored (the LRS assigns them).
      const original = clone(STATEMENT);
      delete original.id;
      const jws = await sign(original, signerKey, { x5c });
      const received: Statement = {
        ...clone(STATEMENT), // has an id
        version: '1.0.0',
        stored: '2024-05-01T10:00:01.000Z',
        authority: { objectType: 'Agent', mbox: 'mailto:lrs@example.com' },
        actor: { name: 'Ada', mbox: 'mailto:ada@EXAMPLE.com' }, // objectType defaulted, domain case
        verb: { id: 'http://adlnet.gov/expapi/verbs/completed' }, // display dropped
        object: { id: 'http://example.com/course/1' }, // definition dropped, objectType defaulted
        context: {
          registration: 'EC531277-B57B-4C15-8D91-D292C5B2B8F7',
          team: {
            objectType: 'Group',
            name: 'Team',
            member: [{ objectType: 'Agent', name: 'Two', mbox: 'mailto:two@example.com' }, { mbox: 'mailto:one@example.com' }],
          },
          // a single Activity instead of an array
          contextActivities: { parent: { id: 'http://example.com/program', definition: { name: { en: 'P' } } } as never },
        },
        timestamp: '2024-05-01T12:00:00+02:00', // same instant, other timezone
      };
      const { statement, parts } = signedRequest(received, jws);
      await verifySignedStatement(statement, parts, '1.0.3');
    });
  });

  describe('rejects', () => {
    it('a signature attachment whose contentType is not application/octet-stream', async () => {
      const jws = await sign(STATEMENT, signerKey, { x5c });
      const { statement, parts } = signedRequest(STATEMENT, jws, { contentType: 'text/plain; charset=ascii' });
      await rejects400(
        verifySignedStatement(statement, parts, '1.0.3'),
        /attachments\[0\] \(signature\): a signature attachment must have contentType application\/octet-stream, not "text\/plain; charset=ascii"/,
      );
    });

    it('a signature attachment whose data was not sent', async () => {
      const jws = await sign(STATEMENT, signerKey, { x5c });
      const { statement } = signedRequest(STATEMENT, jws, { fileUrl: 'http://example.com/sig' });
      await rejects400(verifySignedStatement(statement, new Map(), '1.0.3'), /signature must be sent as a multipart\/mixed part/);
    });

    for (const alg of ['HS256', 'HS512']) {
      it(`algorithm ${alg}`, async () => {
        const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(STATEMENT)))
          .setProtectedHeader({ alg })
          .sign(new TextEncoder().encode(fixture('signer-key.pem'))); // the ADL suite uses the PEM as HMAC secret
        const { statement, parts } = signedRequest(STATEMENT, jws);
        await rejects400(verifySignedStatement(statement, parts, '1.0.3'), new RegExp(`JWS algorithm "${alg}" is not allowed; a signed statement must use RS256, RS384 or RS512`));
      });
    }

    for (const alg of ['ES256', 'PS256']) {
      it(`algorithm ${alg}`, async () => {
        const { privateKey } = await generateKeyPair(alg);
        const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(STATEMENT))).setProtectedHeader({ alg }).sign(privateKey);
        const { statement, parts } = signedRequest(STATEMENT, jws);
        await rejects400(verifySignedStatement(statement, parts, '1.0.3'), new RegExp(`JWS algorithm "${alg}" is not allowed`));
      });
    }

    it('algorithm "none" and a missing alg', async () => {
      const payload = base64url.encode(JSON.stringify(STATEMENT));
      for (const [header, shown] of [
        [{ alg: 'none' }, '"none"'],
        [{}, 'null'],
      ] as const) {
        const jws = `${base64url.encode(JSON.stringify(header))}.${payload}.AAAA`;
        const { statement, parts } = signedRequest(STATEMENT, jws);
        await rejects400(verifySignedStatement(statement, parts, '1.0.3'), new RegExp(`JWS algorithm ${shown} is not allowed`));
      }
    });

    it('a tampered payload (x5c: the signature no longer verifies)', async () => {
      const jws = await sign(STATEMENT, signerKey, { x5c });
      const changed = { ...clone(STATEMENT), result: { completion: true, duration: 'PT1H', score: { scaled: 1 } } };
      const [h, , s] = jws.split('.');
      const tampered = `${h}.${base64url.encode(JSON.stringify(changed))}.${s}`;
      const { statement, parts } = signedRequest(changed, tampered);
      await rejects400(verifySignedStatement(statement, parts, '1.0.3'), /the JWS signature does not verify with the public key of its x5c certificate/);
    });

    it('a tampered signature', async () => {
      const jws = await sign(STATEMENT, signerKey, { x5c });
      const [h, p, s] = jws.split('.') as [string, string, string];
      const bytes = Buffer.from(s, 'base64url');
      bytes[10] ^= 1;
      const { statement, parts } = signedRequest(STATEMENT, `${h}.${p}.${bytes.toString('base64url')}`);
      await rejects400(verifySignedStatement(statement, parts, '1.0.3'), /does not verify/);
    });

    it('a signature made with another key than the x5c certificate’s', async () => {
      const jws = await sign(STATEMENT, otherKeys.privateKey, { x5c });
      const { statement, parts } = signedRequest(STATEMENT, jws);
      await rejects400(verifySignedStatement(statement, parts, '1.0.3'), /does not verify with the public key of its x5c certificate/);
    });

    it('a received statement that differs from the signed one (no x5c)', async () => {
      const jws = await sign(STATEMENT, otherKeys.privateKey, {});
      const changed = { ...clone(STATEMENT), result: { completion: false, duration: 'PT1H', score: { scaled: 0.9 } } };
      const { statement, parts } = signedRequest(changed, jws);
      await rejects400(
        verifySignedStatement(statement, parts, '1.0.3'),
        /the statement in the JWS payload does not match the received statement \(they differ at \$\.result\.completion\)/,
      );
    });

    it('a non-JSON payload, a JSON payload that is not an object, a non-UTF-8 payload', async () => {
      for (const payload of ["{'actor': 'broken'}", 'not json at all']) {
        const jws = await sign(payload, signerKey, { x5c });
        const { statement, parts } = signedRequest(STATEMENT, jws);
        await rejects400(verifySignedStatement(statement, parts, '1.0.3'), /the JWS payload is not a JSON serialization of a statement$/);
      }
      const array = await sign([STATEMENT], signerKey, { x5c });
      const r1 = signedRequest(STATEMENT, array);
      await rejects400(verifySignedStatement(r1.statement, r1.parts, '1.0.3'), /expected a JSON object/);
      const latin1 = await new CompactSign(Buffer.from('{"a":"\xe9"}', 'latin1')).setProtectedHeader({ alg: 'RS256' }).sign(signerKey);
      const r2 = signedRequest(STATEMENT, latin1);
      await rejects400(verifySignedStatement(r2.statement, r2.parts, '1.0.3'), /not a JSON serialization/);
    });

    it('data that is not a compact JWS', async () => {
      for (const body of ['garbage', 'a.b', 'a..c', 'a.b.c.d.e', '']) {
        const { statement, parts } = signedRequest(STATEMENT, body);
        await rejects400(verifySignedStatement(statement, parts, '1.0.3'), /not a JWS in Compact Serialization/);
      }
      const header = base64url.encode('not json');
      const { statement, parts } = signedRequest(STATEMENT, `${header}.${base64url.encode('{}')}.AAAA`);
      await rejects400(verifySignedStatement(statement, parts, '1.0.3'), /protected header is not base64url-encoded JSON/);
    });

    it('JWS JSON Serialization', async () => {
      const jws = await sign(STATEMENT, signerKey, {});
      const [h, p, s] = jws.split('.');
      const { statement, parts } = signedRequest(STATEMENT, JSON.stringify({ protected: h, payload: p, signature: s }));
      await rejects400(verifySignedStatement(statement, parts, '1.0.3'), /JWS JSON Serialization is not supported/);
    });

    it('a crit header', async () => {
      const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(STATEMENT))).setProtectedHeader({ alg: 'RS256', crit: ['b64'], b64: true }).sign(signerKey);
      const { statement, parts } = signedRequest(STATEMENT, jws);
      await rejects400(verifySignedStatement(statement, parts, '1.0.3'), /critical extensions/);
    });

    it('a malformed x5c', async () => {
      for (const bad of ['MIIB', [], ['not base64!'], [42], ['AAAA']]) {
        const jws = await sign(STATEMENT, signerKey, { x5c: bad });
        const { statement, parts } = signedRequest(STATEMENT, jws);
        await rejects400(
          verifySignedStatement(statement, parts, '1.0.3'),
          /x5c header must be a non-empty array of base64-encoded DER certificates|first certificate of the JWS x5c header is not a valid X\.509 certificate/,
        );
      }
    });

    it('any bad signature among several', async () => {
      const good = await sign(STATEMENT, signerKey, { x5c });
      const bad = await sign(STATEMENT, otherKeys.privateKey, { x5c });
      const first = signedRequest(STATEMENT, good);
      const second = signedRequest(first.statement, bad);
      for (const [k, v] of first.parts) second.parts.set(k, v);
      await rejects400(verifySignedStatement(second.statement, second.parts, '1.0.3'), /attachments\[1\] \(signature\).*does not verify/);
    });
  });
});

describe('statementDifference (xAPI-Data 2.3.1 comparison)', () => {
  const base = (): Record<string, unknown> => clone(STATEMENT) as unknown as Record<string, unknown>;

  it('ignores authority, stored and attachments always; id, timestamp and version when one side lacks them', () => {
    const a = base();
    const b = { ...base(), authority: { mbox: 'mailto:x@example.com' }, stored: 'x', attachments: [] };
    assert.equal(statementDifference(a, b, '1.0.3'), undefined);
    for (const key of ['id', 'timestamp', 'version']) {
      const without = base();
      delete without[key];
      assert.equal(statementDifference(without, { ...base(), version: '1.0.0' }, '1.0.3'), undefined, key);
      assert.equal(statementDifference({ ...base(), version: '1.0.0' }, without, '1.0.3'), undefined, key);
    }
  });

  it('compares id, timestamp and version when both sides have them', () => {
    assert.equal(statementDifference(base(), { ...base(), id: '00000000-0000-4000-8000-000000000000' }, '1.0.3'), '$.id');
    assert.equal(statementDifference(base(), { ...base(), id: STATEMENT.id!.toUpperCase() }, '1.0.3'), undefined);
    assert.equal(statementDifference(base(), { ...base(), timestamp: '2024-05-01T10:00:00.001Z' }, '1.0.3'), '$.timestamp');
    assert.equal(statementDifference(base(), { ...base(), timestamp: '2024-05-01T10:00:00Z' }, '1.0.3'), undefined);
    assert.equal(statementDifference(base(), { ...base(), timestamp: '2024-05-01T05:30:00.0000-04:30' }, '1.0.3'), undefined);
    assert.equal(statementDifference({ ...base(), version: '1.0.0' }, { ...base(), version: '1.0.3' }, '1.0.3'), '$.version');
  });

  it('does not ignore other differences, including the serialization of a duration', () => {
    const b = base();
    (b['result'] as Record<string, unknown>)['duration'] = 'PT60M';
    assert.equal(statementDifference(base(), b, '1.0.3'), '$.result.duration');
    const c = base();
    (c['actor'] as Record<string, unknown>)['mbox'] = 'mailto:ADA@example.com'; // the local part is case-sensitive
    assert.equal(statementDifference(base(), c, '1.0.3'), '$.actor.mbox');
    assert.equal(statementDifference(base(), { ...base(), verb: { id: 'http://example.com/other' } }, '1.0.3'), '$.verb.id');
    const d = base();
    delete d['result'];
    assert.equal(statementDifference(base(), d, '1.0.3'), '$.result');
  });

  it('applies the exceptions inside a SubStatement', () => {
    const sub = (timestamp: string, display: string, memberOrder: number[]): Record<string, unknown> => {
      const members = [{ mbox: 'mailto:a@example.com' }, { mbox: 'mailto:b@example.com' }];
      return {
        ...base(),
        object: {
          objectType: 'SubStatement',
          actor: { objectType: 'Group', member: memberOrder.map((i) => members[i]) },
          verb: { id: 'http://example.com/will', display: { en: display } },
          object: { objectType: 'StatementRef', id: 'ABCDEF00-0000-4000-8000-000000000000' },
          timestamp,
          attachments: [],
        },
      };
    };
    assert.equal(statementDifference(sub('2024-01-01T00:00:00Z', 'will', [0, 1]), sub('2024-01-01T01:00:00+01:00', 'shall', [1, 0]), '1.0.3'), undefined);
    assert.equal(statementDifference(sub('2024-01-01T00:00:00Z', 'will', [0, 1]), sub('2024-01-01T00:00:01Z', 'will', [0, 1]), '1.0.3'), '$.object.timestamp');
  });
});

describe('compare.ts', () => {
  it('jsonEqual ignores key order and compares arrays in order', () => {
    assert.ok(jsonEqual({ a: 1, b: [1, { c: null, d: 'x' }] }, { b: [1, { d: 'x', c: null }], a: 1 }));
    assert.ok(!jsonEqual([1, 2], [2, 1]));
    assert.ok(!jsonEqual({ a: 1 }, { a: 1, b: 2 }));
    assert.ok(!jsonEqual({ a: null }, {}));
    assert.ok(jsonEqual({ a: undefined }, {}));
    assert.ok(!jsonEqual(1, '1'));
    assert.ok(!jsonEqual([], {}));
    assert.ok(!jsonEqual(null, {}));
    assert.ok(jsonEqual(JSON.parse('1.0'), 1));
  });

  it('jsonDifference names the first difference', () => {
    assert.equal(jsonDifference({ a: { b: [0, { c: 1 }] } }, { a: { b: [0, { c: 2 }] } }), '$.a.b[1].c');
    assert.equal(jsonDifference({ 'http://x': 1 }, { 'http://x': 2 }), '$["http://x"]');
    assert.equal(jsonDifference({}, { extra: 1 }), '$.extra');
    assert.equal(jsonDifference([1], [1, 2]), '$');
    assert.equal(jsonDifference({ a: 1 }, { a: 1 }), undefined);
  });

  it('canonicalJson sorts keys and agrees with jsonEqual', () => {
    assert.equal(canonicalJson({ b: 1, a: [{ d: 1, c: undefined, b: 'x' }] }), '{"a":[{"b":"x","d":1}],"b":1}');
    assert.equal(canonicalJson({ x: 1, y: 2 }), canonicalJson({ y: 2, x: 1 }));
  });
});
