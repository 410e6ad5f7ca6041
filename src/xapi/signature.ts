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
 *   shorter than 2048 bits and the spec's Appendix D example is signed with a 1024-bit key. `jose`
 *   still decodes the protected header.
 * - Without `x5c` there is nothing the spec asks to verify the signature against, and the LRS must
 *   not fetch keys (`x5u`, `jku`) from client-supplied URLs: only the structural checks (decoding,
 *   algorithm, JSON payload, equivalence) are made. The bytes are stored, so a consumer can verify
 *   later — "Clients MUST NOT assume a signature is valid simply because an LRS has accepted it"
 *   (§2.6.s6.b2).
 * - A `crit` header is rejected: no JWS extension is understood here (RFC 7515 §4.1.11).
 * - Only the statement's own attachments are examined; a SubStatement cannot be signed separately.
 */

import { X509Certificate, verify as cryptoVerify } from 'node:crypto';
import { base64url, decodeProtectedHeader } from 'jose';
import { LrsError } from '../errors.ts';
import { mediaTypeOf } from '../http/multipart.ts';
import { canonicalJson, jsonDifference } from './compare.ts';
import { SIGNATURE_USAGE_TYPE } from './types.ts';
import type { Statement } from './types.ts';

const bad = (message: string): LrsError => new LrsError('bad_request', message);

/** RS256/RS384/RS512 (§2.6.s4.b4) and the digest each one signs with (RSASSA-PKCS1-v1_5). */
const ALGORITHMS: Record<string, string> = { RS256: 'sha256', RS384: 'sha384', RS512: 'sha512' };

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Verifies every signature attachment of `statement` (xAPI-Data §2.6), given the attachment parts
 * received with it (lower-case hex sha2 → part, as returned by `extractStatementParts`). Statements
 * without a signature attachment pass untouched. Throws `LrsError('bad_request')` naming what is
 * wrong.
 *
 * `statement` should be the statement as received. It may already carry the id, authority, stored,
 * timestamp and version the LRS assigns; other rewriting is only tolerated where
 * {@link statementDifference} says so.
 */
export async function verifySignedStatement(
  statement: Statement,
  parts: Map<string, { contentType: string; body: Buffer }>,
): Promise<void> {
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
    await verifyJws(part.body, statement, where);
  }
}

async function verifyJws(data: Buffer, statement: Statement, where: string): Promise<void> {
  // §2.6.s5.b3.b1: decode the JWS signature.
  const text = data.toString('latin1').trim();
  if (text.startsWith('{')) {
    throw bad(`${where}: JWS JSON Serialization is not supported; use JWS Compact Serialization (xAPI-Data 2.6.s4.b2)`);
  }
  if (!COMPACT_JWS.test(text)) {
    throw bad(`${where}: the signature is not a JWS in Compact Serialization (three base64url segments separated by dots, with a payload)`);
  }
  const [encodedHeader, encodedPayload, encodedSignature] = text.split('.') as [string, string, string];
  let header: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(text) as Record<string, unknown>;
  } catch {
    throw bad(`${where}: the JWS protected header is not base64url-encoded JSON`);
  }

  // §2.6.s4.b4: "The JWS signature MUST use an algorithm of RS256, RS384, or RS512."
  const alg = header['alg'];
  const digest = typeof alg === 'string' ? ALGORITHMS[alg] : undefined;
  if (digest === undefined) {
    throw bad(`${where}: JWS algorithm ${JSON.stringify(alg ?? null)} is not allowed; a signed statement must use RS256, RS384 or RS512`);
  }
  if (header['crit'] !== undefined) {
    throw bad(`${where}: the JWS header has critical extensions ("crit"), which are not supported`);
  }

  // §2.6.s4.b3: "The JWS signature MUST have a payload of a valid JSON serialization of the
  // complete Statement before the signature was added."
  let original: unknown;
  try {
    const json = new TextDecoder('utf-8', { fatal: true }).decode(base64url.decode(encodedPayload));
    original = JSON.parse(json);
  } catch {
    throw bad(`${where}: the JWS payload is not a JSON serialization of a statement`);
  }
  if (original === null || typeof original !== 'object' || Array.isArray(original)) {
    throw bad(`${where}: the JWS payload is not a JSON serialization of a statement (expected a JSON object)`);
  }

  // §2.6.s5.b3.b2: the original statement must be logically equivalent to the received one.
  const difference = statementDifference(original as Record<string, unknown>, statement as unknown as Record<string, unknown>);
  if (difference !== undefined) {
    throw bad(`${where}: the statement in the JWS payload does not match the received statement (they differ at ${difference})`);
  }

  // §2.6.s5.b3.b3: "If the JWS header includes an X.509 certificate, validate the signature
  // against that certificate as defined in JWS."
  if (header['x5c'] !== undefined) {
    const x5c = header['x5c'];
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
    let valid: boolean;
    try {
      valid = cryptoVerify(
        digest,
        Buffer.from(`${encodedHeader}.${encodedPayload}`, 'latin1'),
        key,
        Buffer.from(encodedSignature, 'base64url'),
      );
    } catch {
      valid = false;
    }
    if (!valid) {
      throw bad(`${where}: the JWS signature does not verify with the public key of its x5c certificate`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Statement comparison (xAPI-Data §2.3.1)
// ---------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;

/**
 * Where the statement signed in a JWS payload and the received statement differ, or `undefined`
 * when they are logically equivalent.
 *
 * xAPI-Data §2.3.1 "Statement Comparison Requirements": "Differences which could have been caused by
 * exceptions to Statement immutability MUST be ignored" and "Differences relating to a different
 * serialization of any properties not listed as exceptions MUST not be ignored". The exceptions
 * (§2.3.1.b1–b7), and how each is applied to both sides before a structural comparison:
 *
 * - b1 "Potential or required assignments of properties during LRS processing ('id', 'authority',
 *   'stored', 'timestamp', 'version')": `authority` and `stored` are ignored (the LRS overwrites
 *   them); `id`, `timestamp` and `version` are only assigned when absent, so they are ignored when
 *   either side lacks them and compared otherwise.
 * - b2 Activity Definitions are not part of the statement: `definition` is dropped from every
 *   Activity (object, context activities, SubStatement ones).
 * - b3 A Verb's `display` is not part of the statement: dropped.
 * - b4 Timestamps may be serialized in another timezone: `timestamp` (statement and SubStatement)
 *   is compared as a point in time.
 * - b5 A Group's `member` list is unordered: compared as a multiset.
 * - b6 Attachments are not part of the statement (and the payload predates the signature
 *   attachment): `attachments` is ignored.
 * - b7 Case-insensitive properties, e.g. the domain of an e-mail address: the `mailto:` IRI's scheme
 *   and domain, UUIDs (ids, registration) and the context language tag are compared
 *   case-insensitively.
 *
 * Also treated as equivalent: a defaulted `objectType` written or omitted (Activity for objects and
 * context activities, Agent for actors) and a single context Activity written as an object or as a
 * one-element array (the 0.95 form xAPI-Data §2.4.6.2 keeps for compatibility) — they denote the same
 * statement. Everything else, including Result `duration` (§2.3.1.b8), is compared as it is.
 */
export function statementDifference(signed: Json, received: Json): string | undefined {
  const a = normalizeStatement(signed, false);
  const b = normalizeStatement(received, false);
  // b1: id, timestamp and version may be assigned by the LRS when absent.
  for (const key of ['id', 'timestamp', 'version']) {
    if (a[key] === undefined || b[key] === undefined) {
      delete a[key];
      delete b[key];
    }
  }
  return jsonDifference(a, b);
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

const lower = (value: unknown): unknown => (typeof value === 'string' ? value.toLowerCase() : value);

function normalizeStatement(statement: Json, isSubStatement: boolean): Json {
  const out: Json = { ...statement };
  if (!isSubStatement) {
    delete out['authority']; // b1
    delete out['stored']; // b1
    if (out['id'] !== undefined) out['id'] = lower(out['id']); // b7 (UUID)
  }
  delete out['attachments']; // b6
  if (out['timestamp'] !== undefined) out['timestamp'] = instant(out['timestamp']); // b4
  if (out['actor'] !== undefined) out['actor'] = normalizeActor(out['actor']);
  if (isObject(out['verb'])) {
    const verb: Json = { ...out['verb'] };
    delete verb['display']; // b3
    out['verb'] = verb;
  }
  if (out['object'] !== undefined) out['object'] = normalizeObject(out['object'], isSubStatement);
  if (isObject(out['context'])) out['context'] = normalizeContext(out['context']);
  return out;
}

function normalizeObject(object: unknown, insideSubStatement: boolean): unknown {
  if (!isObject(object)) return object;
  const type = object['objectType'];
  if (type === undefined || type === 'Activity') return normalizeActivity(object);
  if (type === 'Agent' || type === 'Group') return normalizeActor(object);
  if (type === 'StatementRef') return { ...object, id: lower(object['id']) };
  if (type === 'SubStatement' && !insideSubStatement) return normalizeStatement(object, true);
  return object;
}

function normalizeActivity(activity: unknown): unknown {
  if (!isObject(activity)) return activity;
  const out: Json = { ...activity, objectType: 'Activity' };
  delete out['definition']; // b2
  return out;
}

function normalizeActor(actor: unknown): unknown {
  if (!isObject(actor)) return actor;
  const out: Json = { ...actor };
  out['objectType'] ??= 'Agent';
  if (typeof out['mbox'] === 'string') out['mbox'] = normalizeMbox(out['mbox']);
  if (Array.isArray(out['member'])) {
    // b5: members are unordered.
    out['member'] = out['member']
      .map(normalizeActor)
      .map((m) => [canonicalJson(m), m] as const)
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
      .map(([, m]) => m);
  }
  return out;
}

/** b7: "the domain portion an e-mail address is case insensitive" (and so is the URI scheme). */
function normalizeMbox(mbox: string): string {
  const at = mbox.lastIndexOf('@');
  const colon = mbox.indexOf(':');
  const scheme = colon === -1 ? '' : mbox.slice(0, colon + 1).toLowerCase();
  const local = mbox.slice(colon + 1, at === -1 ? mbox.length : at);
  const domain = at === -1 ? '' : mbox.slice(at).toLowerCase();
  return scheme + local + domain;
}

function normalizeContext(context: Json): Json {
  const out: Json = { ...context };
  if (out['registration'] !== undefined) out['registration'] = lower(out['registration']);
  if (out['language'] !== undefined) out['language'] = lower(out['language']);
  if (out['instructor'] !== undefined) out['instructor'] = normalizeActor(out['instructor']);
  if (out['team'] !== undefined) out['team'] = normalizeActor(out['team']);
  if (isObject(out['statement'])) out['statement'] = { ...out['statement'], id: lower(out['statement']['id']) };
  if (isObject(out['contextActivities'])) {
    const activities: Json = {};
    for (const [kind, value] of Object.entries(out['contextActivities'])) {
      const list = Array.isArray(value) ? value : value === undefined ? undefined : [value];
      activities[kind] = list?.map(normalizeActivity);
    }
    out['contextActivities'] = activities;
  }
  return out;
}

const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}(?::?\d{2})?)?$/;

/**
 * b4: an ISO 8601 timestamp as the point in time it denotes (whole UTC seconds since the epoch and
 * the fraction digits, trailing zeros dropped) — so that `2013-04-01T12:00:00Z`,
 * `2013-04-01T14:00:00.000+02:00` compare equal, at any sub-second precision. Anything else is
 * compared as it is.
 */
function instant(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const m = TIMESTAMP.exec(value);
  if (m === null) return value;
  const [, y, mo, d, h, mi, s, fraction = '', zone = 'Z'] = m;
  let offsetMinutes = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone[0] === '-' ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    offsetMinutes = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || '0'));
  }
  const seconds = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)) / 1000 - offsetMinutes * 60;
  const frac = fraction.replace(/0+$/, '');
  return frac === '' ? `@${seconds}` : `@${seconds}.${frac}`;
}
