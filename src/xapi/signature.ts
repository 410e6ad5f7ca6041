/**
 * Signed statements (xAPI-Data.md §2.6).
 *
 * A signed statement carries, as an attachment with usageType
 * `http://adlnet.gov/expapi/attachments/signature`, a JWS (RFC 7515) whose payload is the JSON
 * serialization of the statement "before the signature was added". The LRS MUST reject malformed
 * signatures with 400 (§2.6.s5.b1) and, to check they are well formed, MUST (§2.6.s5.b3):
 *
 *  1. decode the JWS and load the statement from its payload;
 *  2. validate that this original statement is logically equivalent to the received statement
 *     (xAPI-Data §2.3.1 "Statement Comparison Requirements");
 *  3. if the JWS header includes an X.509 certificate, validate the signature against it;
 *  4. validate the signature requirements (§2.6.s4): contentType `application/octet-stream`,
 *     algorithm RS256/RS384/RS512, payload a valid JSON serialization of the statement.
 *
 * Decisions:
 *
 * - Only JWS Compact Serialization is accepted. §2.6.s4.b2 says it SHOULD* be used and that the JSON
 *   serialization "is strongly discouraged ... and will be forbidden in a future version".
 * - With `x5c`, the signature is checked with the public key of the first certificate (RFC 7515
 *   §4.1.6: the one "containing the public key corresponding to the key used to digitally sign").
 *   The chain is not validated (no trust anchors, no expiry check): the spec says this step "is
 *   intended as a way to catch mistakes in the signature, not as a security measure" (§2.6.s5 note),
 *   and its own example (Appendix D) uses a certificate that expired in 2014.
 * - That check uses `node:crypto` rather than `jose.compactVerify`, because jose refuses RSA keys
 *   shorter than 2048 bits and the spec's Appendix D example is signed with a 1024-bit key.
 * - Without `x5c` there is nothing the spec asks to verify the signature against, and the LRS must
 *   not fetch keys (`x5u`, `jku`) from client-supplied URLs: only the structural checks (decoding,
 *   algorithm, JSON payload, equivalence) are made. The bytes are stored, so a consumer can verify
 *   later — "Clients MUST NOT assume a signature is valid simply because an LRS has accepted it"
 *   (§2.6.s6.b2).
 * - A `crit` header is rejected: no JWS extension is understood here (RFC 7515 §4.1.11).
 * - Only the statement's own attachments are examined; a SubStatement cannot be signed separately.
 * - A statement may carry several signature attachments (neither the specification nor the ADL
 *   suite limits them to one, and countersignatures are a use): each must verify. Each distinct
 *   JWS (by its part's hash) is decoded and verified once per request however many attachment
 *   objects declare it, and compared once with each statement declaring it (one JWS declared by
 *   every statement of a batch would otherwise be verified as many times).
 * - The x5c key is bounded before it is used: a modulus of at most 8,192 bits and an odd public
 *   exponent from 3 to 2^33 − 1 (BoringSSL's bound; Go's is 2^31 − 1). OpenSSL caps the exponent
 *   at 64 bits only above 3,072-bit moduli, so an RSA-3072 key with a huge exponent costs many
 *   times a normal verification. Within the bounds a verification is cheap, and it runs on
 *   libuv's thread pool, one at a time per request: the event loop serves other requests
 *   meanwhile (docs/security.md, "Input and resources").
 */

import { type KeyObject, X509Certificate, verify as cryptoVerify } from 'node:crypto';
import { LrsError } from '../errors.ts';
import { comparable, comparedDifference, statementDifference } from './statement.ts';
import { mediaTypeOf } from './media.ts';
import { isUuid } from './validate.ts';
import { SIGNATURE_USAGE_TYPE } from './types.ts';
import type { Statement } from './types.ts';
import type { XapiVersion } from './versions.ts';

// The comparison lives with the other statement rules; re-exported for existing callers.
export { statementDifference };

const bad = (message: string): LrsError => new LrsError('bad_request', message);

/** RS256/RS384/RS512 (§2.6.s4.b4) and the digest each one signs with (RSASSA-PKCS1-v1_5). */
const ALGORITHMS: Record<string, string> = { RS256: 'sha256', RS384: 'sha384', RS512: 'sha512' };

/** Largest RSA modulus of an x5c key, in bits. */
export const MAX_RSA_MODULUS_BITS = 8192;
/** Largest RSA public exponent of an x5c key (2^33 − 1). */
export const MAX_RSA_EXPONENT = 2n ** 33n - 1n;

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** A JWS decoded and, with x5c, verified: what it says does not depend on the statement declaring it. */
interface CheckedJws {
  /** The signed statement, {@link comparable}. */
  original: Record<string, unknown>;
  /** Its id, lower-cased, when it has one. */
  id?: string;
}

/**
 * The JWS of one request already checked, by the lower-case hex sha2 of their part: a request's
 * statements share it so that each JWS is decoded and verified once (see `acceptStatements`).
 */
export type CheckedSignatures = Map<string, CheckedJws>;

/**
 * Verifies every signature attachment of `statement` (xAPI-Data §2.6), given the attachment parts
 * received with it (lower-case hex sha2 → part, as returned by `extractStatementParts`). Statements
 * without a signature attachment pass untouched. Throws `LrsError('bad_request')` naming what is
 * wrong. Returns the (lower-cased) id of the signed statement when a payload carries one, so that
 * a statement received without an id is stored under the id it was signed with.
 *
 * `statement` should be the statement as received. It may already carry the id, authority, stored,
 * timestamp and version the LRS assigns; other rewriting is only tolerated where
 * {@link statementDifference} says so. `checked` carries the JWS already checked across the
 * statements of one request.
 */
export async function verifySignedStatement(
  statement: Statement,
  parts: Map<string, { contentType: string; body: Buffer }>,
  version: XapiVersion,
  checked: CheckedSignatures = new Map(),
): Promise<string | undefined> {
  let signedId: string | undefined;
  let received: Record<string, unknown> | undefined;
  // The JWS this statement was compared with: declaring one again says nothing more.
  const compared = new Set<string>();
  const attachments = Array.isArray(statement.attachments) ? statement.attachments : [];
  for (let i = 0; i < attachments.length; i++) {
    const attachment = attachments[i]!;
    if (attachment.usageType !== SIGNATURE_USAGE_TYPE) continue;
    const where = `attachments[${i}] (signature)`;
    // §2.6.s4.b1: "... as an Attachment with a usageType of .../signature and a contentType of
    // application/octet-stream".
    if (mediaTypeOf(attachment.contentType) !== 'application/octet-stream') {
      throw bad(`${where}: a signature attachment must have contentType application/octet-stream, not ${JSON.stringify(attachment.contentType)}`);
    }
    const sha2 = typeof attachment.sha2 === 'string' ? attachment.sha2.toLowerCase() : '';
    const part = parts.get(sha2);
    if (part === undefined) {
      throw bad(`${where}: the signature must be sent as a multipart/mixed part (X-Experience-API-Hash ${sha2}) so that the LRS can verify it`);
    }
    if (compared.has(sha2)) continue;
    compared.add(sha2);
    let jws = checked.get(sha2);
    if (jws === undefined) {
      jws = await checkJws(part.body, where, version);
      checked.set(sha2, jws);
    }
    // §2.6.s5.b3.b2: the original statement must be logically equivalent to the received one.
    received ??= comparable(statement as unknown as Record<string, unknown>, version);
    const difference = comparedDifference(jws.original, received);
    if (difference !== undefined) {
      throw bad(`${where}: the statement in the JWS payload does not match the received statement (they differ at ${difference})`);
    }
    // Two signatures of one statement without an id could name different ids: which one is it?
    if (jws.id !== undefined && signedId !== undefined && jws.id !== signedId) {
      throw bad(`${where}: signs the statement under the id ${jws.id}, another signature of it under ${signedId}`);
    }
    signedId ??= jws.id;
  }
  return signedId;
}

/** A JWS segment's JSON (RFC 7515 §7.1: base64url of UTF-8); undefined when it is not that. */
function decodeJson(segment: string): unknown {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(segment, 'base64url')));
  } catch {
    return undefined;
  }
}

/**
 * RSASSA-PKCS1-v1_5 verification on libuv's thread pool (node:crypto's callback form): the event
 * loop serves other requests meanwhile, and a request awaiting its verifications one at a time
 * holds at most one of the pool's threads.
 */
const verifyInPool = (digest: string, data: Buffer, key: KeyObject, signature: Buffer): Promise<boolean> =>
  new Promise((resolve) => {
    try {
      cryptoVerify(digest, data, key, signature, (err, valid) => resolve(!err && valid));
    } catch {
      resolve(false);
    }
  });

/** Refuses an x5c key whose size would make verifying it costly (see the module's decisions). */
function checkKeySize(key: KeyObject, where: string): void {
  const { modulusLength, publicExponent } = key.asymmetricKeyDetails ?? {};
  if (modulusLength === undefined || modulusLength > MAX_RSA_MODULUS_BITS) {
    throw bad(`${where}: the x5c certificate's RSA key has a ${modulusLength ?? 'unknown'}-bit modulus; this LRS verifies keys of at most ${MAX_RSA_MODULUS_BITS} bits`);
  }
  if (publicExponent === undefined || publicExponent > MAX_RSA_EXPONENT || publicExponent < 3n || publicExponent % 2n === 0n) {
    const size = publicExponent === undefined ? 'an unknown' : `a ${publicExponent.toString(2).length}-bit`;
    throw bad(`${where}: the x5c certificate's RSA key has ${size} public exponent; this LRS verifies keys whose exponent is odd and from 3 to 2^33 - 1 (65537 is usual)`);
  }
}

/** The JWS protected header (§2.6.s4.b4: "MUST use an algorithm of RS256, RS384, or RS512"), its algorithm and that algorithm's digest. */
function protectedHeader(encoded: string, where: string): { header: Record<string, unknown>; alg: string; digest: string } {
  const decoded = decodeJson(encoded);
  if (decoded === null || typeof decoded !== 'object' || Array.isArray(decoded)) {
    throw bad(`${where}: the JWS protected header is not base64url-encoded JSON (a JSON object)`);
  }
  const header = decoded as Record<string, unknown>;
  const alg = header['alg'];
  const digest = typeof alg === 'string' ? ALGORITHMS[alg] : undefined;
  if (digest === undefined) {
    throw bad(`${where}: JWS algorithm ${JSON.stringify(alg ?? null)} is not allowed; a signed statement must use RS256, RS384 or RS512`);
  }
  if (header['crit'] !== undefined) {
    throw bad(`${where}: the JWS header has critical extensions ("crit"), which are not supported`);
  }
  return { header, alg: alg as string, digest };
}

/** The RSA public key of the first certificate of an x5c header, within the bounds checkKeySize sets. */
function x5cKey(x5c: unknown, alg: string, where: string): KeyObject {
  if (!Array.isArray(x5c) || x5c.length === 0 || !x5c.every((c) => typeof c === 'string' && BASE64.test(c))) {
    throw bad(`${where}: the JWS x5c header must be a non-empty array of base64-encoded DER certificates`);
  }
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(Buffer.from(x5c[0] as string, 'base64'));
  } catch {
    throw bad(`${where}: the first certificate of the JWS x5c header is not a valid X.509 certificate`);
  }
  const key = certificate.publicKey;
  if (key.asymmetricKeyType !== 'rsa') {
    throw bad(`${where}: the x5c certificate has a ${key.asymmetricKeyType ?? 'non-RSA'} key, which cannot verify an ${alg} signature`);
  }
  checkKeySize(key, where);
  return key;
}

/** Decodes one JWS and, with x5c, verifies its signature: everything that does not depend on the statement. */
async function checkJws(data: Buffer, where: string, version: XapiVersion): Promise<CheckedJws> {
  // §2.6.s5.b3.b1: decode the JWS signature.
  const text = data.toString('latin1').trim();
  if (text.startsWith('{')) {
    throw bad(`${where}: JWS JSON Serialization is not supported; use JWS Compact Serialization (xAPI-Data 2.6.s4.b2)`);
  }
  if (!COMPACT_JWS.test(text)) {
    throw bad(`${where}: the signature is not a JWS in Compact Serialization (three base64url segments separated by dots, with a payload)`);
  }
  const [encodedHeader, encodedPayload, encodedSignature] = text.split('.') as [string, string, string];
  const { header, alg, digest } = protectedHeader(encodedHeader, where);

  // §2.6.s4.b3: "The JWS signature MUST have a payload of a valid JSON serialization of the
  // complete Statement before the signature was added."
  const original = decodeJson(encodedPayload);
  if (original === undefined) throw bad(`${where}: the JWS payload is not a JSON serialization of a statement`);
  if (original === null || typeof original !== 'object' || Array.isArray(original)) {
    throw bad(`${where}: the JWS payload is not a JSON serialization of a statement (expected a JSON object)`);
  }

  // §2.6.s5.b3.b3: "If the JWS header includes an X.509 certificate, validate the signature
  // against that certificate as defined in JWS."
  if (header['x5c'] !== undefined) {
    const key = x5cKey(header['x5c'], alg, where);
    const valid = await verifyInPool(digest, Buffer.from(`${encodedHeader}.${encodedPayload}`, 'latin1'), key, Buffer.from(encodedSignature, 'base64url'));
    if (!valid) {
      throw bad(`${where}: the JWS signature does not verify with the public key of its x5c certificate`);
    }
  }
  // The payload's id becomes the statement's when it was sent without one: it must be usable.
  const id = (original as Record<string, unknown>)['id'];
  if (id !== undefined && !isUuid(id)) throw bad(`${where}: the id of the statement in the JWS payload is not a UUID`);
  return { original: comparable(original as Record<string, unknown>, version), ...(id !== undefined && { id: (id as string).toLowerCase() }) };
}
