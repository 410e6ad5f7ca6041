/**
 * The xAPI statement validator (xAPI-Data §2.2, §2.4, §4; 9274.1.1 §4.2), for the request's
 * version (the only differences: 2.0's contextAgents/contextGroups and statement versions): a hand-written recursive
 * validator that reports every problem it finds with a precise location, and returns deep,
 * normalised copies of the statements (a single context activity becomes a one-element array,
 * §2.4.6.2.s4.b3).
 *
 * Conventions:
 * - Every issue's `loc` is the path to the offending value (for a missing property, the path to
 *   where it belongs); for statements it starts with the index of the statement in the batch.
 * - Unknown properties are rejected at every level (§2.2.s4.b1.b7, §2.2.s4.b8), keys are
 *   case-sensitive, `null` is rejected everywhere except inside extension values (§2.2.s4.b1.b1),
 *   and JSON types are exact (§2.2.s4.b1.b2).
 * - A value whose type is wrong is not descended into.
 *
 * Performance: one pass over each object's own keys with a `switch`, a shared path stack that is
 * only copied when an issue is reported, no regex compiled at run time, no try/catch, no JSON
 * round-trips.
 */
import { MAX_ISSUES, type ValidationIssue } from '../errors.ts';
import { isLanguageTag } from './langtag.ts';
import type { Actor, Statement } from './types.ts';
import { VOIDED_VERB } from './types.ts';
import { acceptsStatementVersion, is2, statementVersionHint, type XapiVersion } from './versions.ts';

export { isLanguageTag };

export type Loc = (string | number)[];

type J = Record<string, unknown>;

interface Ctx {
  /** Path of the value being validated; pushed/popped as the validator descends. */
  path: Loc;
  issues: ValidationIssue[];
  /** Problems found once `issues` holds MAX_ISSUES: counted, not collected. */
  dropped: { count: number };
  /** The request's xAPI version. */
  version: XapiVersion;
}

// ---------------------------------------------------------------------------------------------
// Primitive formats
// ---------------------------------------------------------------------------------------------

const isDigitCode = (c: number): boolean => c >= 48 && c <= 57;
const isAlphaCode = (c: number): boolean => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const isHexCode = (c: number): boolean =>
  (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);

function isHex(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (!isHexCode(s.charCodeAt(i))) return false;
  return true;
}

/**
 * A UUID in the standard 8-4-4-4-12 hex string form (§2.4.1, §4.4). Any version and variant is
 * accepted (the spec's own example `12345678-1234-5678-1234-567812345678` is not RFC 4122
 * variant 2); hex digits may be upper or lower case.
 */
export function isUuid(s: unknown): s is string {
  if (typeof s !== 'string' || s.length !== 36) return false;
  for (let i = 0; i < 36; i++) {
    const c = s.charCodeAt(i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return false;
    } else if (!isHexCode(c)) return false;
  }
  return true;
}

/**
 * True for an absolute IRI (RFC 3987, best effort as §2.2.s4.b6 allows): a scheme
 * (`ALPHA *(ALPHA / DIGIT / "+" / "-" / ".")`), a colon and a non-empty remainder that contains
 * no whitespace, control characters or characters IRIs never allow (`<>"{}|\^` and backtick),
 * only well-formed percent-escapes and at most one `#`. `http`/`https` IRIs must have a
 * non-empty authority (`http://host...`). Relative references and fragments are rejected.
 */
export function isIri(s: unknown): s is string {
  if (typeof s !== 'string') return false;
  const n = s.length;
  if (n < 3 || !isAlphaCode(s.charCodeAt(0))) return false;
  let i = 1;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c === 58) break; // ':'
    if (!isAlphaCode(c) && !isDigitCode(c) && c !== 43 && c !== 45 && c !== 46) return false;
  }
  if (i >= n - 1) return false; // no ':' or nothing after it
  let hashes = 0;
  for (let j = i + 1; j < n; j++) {
    const c = s.charCodeAt(j);
    if (c <= 0x20 || (c >= 0x7f && c <= 0x9f)) return false;
    switch (c) {
      case 34: // "
      case 60: // <
      case 62: // >
      case 92: // \
      case 94: // ^
      case 96: // `
      case 123: // {
      case 124: // |
      case 125: // }
        return false;
      case 35: // #
        if (++hashes > 1) return false;
        break;
      case 37: // %
        if (j + 2 >= n || !isHexCode(s.charCodeAt(j + 1)) || !isHexCode(s.charCodeAt(j + 2))) return false;
        j += 2;
        break;
    }
  }
  if (i === 4 || i === 5) {
    const scheme = s.slice(0, i).toLowerCase();
    if (scheme === 'http' || scheme === 'https') {
      if (s.charCodeAt(i + 1) !== 47 || s.charCodeAt(i + 2) !== 47) return false;
      const h = s.charCodeAt(i + 3);
      if (Number.isNaN(h) || h === 47 || h === 63 || h === 35) return false; // empty authority
    }
  }
  return true;
}

/** An IRL is an IRI that is expected to resolve; syntactically validated as an absolute IRI. */
const isIrl = isIri;

/** `mailto:` followed by a single email address `local@domain` (§2.4.2.3 "mailto IRI"). */
function isMbox(s: string): boolean {
  if (!s.startsWith('mailto:') || !isIri(s)) return false;
  const n = s.length;
  const at = s.indexOf('@', 7);
  if (at <= 7 || at >= n - 1 || s.indexOf('@', at + 1) !== -1) return false;
  for (let i = 7; i < n; i++) {
    const c = s.charCodeAt(i);
    // '?', '#', ',' would make it a query, a fragment or several addresses.
    if (c === 63 || c === 35 || c === 44) return false;
  }
  const dot0 = s.charCodeAt(at + 1);
  const dotN = s.charCodeAt(n - 1);
  return dot0 !== 46 && dotN !== 46 && s.indexOf('..', at) === -1;
}

const isSha1Hex = (s: string): boolean => s.length === 40 && isHex(s);
/** Hex SHA-2 digest: SHA-224/512-224 (56), SHA-256/512-256 (64), SHA-384 (96), SHA-512 (128). */
const isSha2Hex = (s: string): boolean =>
  (s.length === 64 || s.length === 128 || s.length === 96 || s.length === 56) && isHex(s);

// RFC 2045 / RFC 7231 media type: type "/" subtype *( OWS ";" OWS name "=" (token / quoted-string) )
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE_RE = new RegExp(
  `^${TOKEN}/${TOKEN}(?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|"(?:[^"\\\\\\r\\n]|\\\\.)*"))*[ \\t]*$`,
);
const isMediaType = (s: string): boolean => MEDIA_TYPE_RE.test(s);

/** Two ASCII digits at `i` as a number, or -1. */
function d2(s: string, i: number): number {
  const a = s.charCodeAt(i);
  const b = s.charCodeAt(i + 1);
  return isDigitCode(a) && isDigitCode(b) ? (a - 48) * 10 + (b - 48) : -1;
}

function daysInMonth(y: number, m: number): number {
  if (m === 2) return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
  return m === 4 || m === 6 || m === 9 || m === 11 ? 30 : 31;
}

/** Days since 1970-01-01 of a proleptic Gregorian date (works for years 0000-9999). */
function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m > 2 ? m - 3 : m + 9) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

/**
 * Parses an ISO 8601 timestamp (§4.5) into epoch milliseconds, or undefined when it is not one.
 *
 * Accepted: a complete calendar date and a time of day, `YYYY-MM-DDThh[:mm[:ss[.f+]]]` (extended)
 * or `YYYYMMDDThh[mm[ss[.f+]]]` (basic), decimal mark `.` or `,`, `T` or `t` (RFC 3339), followed
 * by `Z`/`z`, `±hh:mm`, `±hhmm`, `±hh` or no offset (the spec only says SHOULD include a time
 * zone; an offset-less timestamp is read as UTC). Rejected: a date alone or a time alone (a
 * Timestamp is a point in time), out-of-range fields (month 13, Feb 30, hour 24, ...) and the
 * "unknown local offset" `-00:00` / `-0000` / `-00` (RFC 3339 §4.3, rejected by the ADL suite),
 * and an instant outside years 0000–9999 in UTC (see {@link timestampOutOfRange}). Fractions
 * beyond milliseconds are truncated.
 */
export function parseTimestamp(s: unknown): number | undefined {
  const ms = localTimestamp(s);
  return ms === undefined || ms < MIN_INSTANT || ms > MAX_INSTANT ? undefined : ms;
}

/** 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: the instants a four-digit year in UTC can write. */
const MIN_INSTANT = daysFromCivil(0, 1, 1) * 86_400_000;
const MAX_INSTANT = daysFromCivil(10_000, 1, 1) * 86_400_000 - 1;

/**
 * True for a timestamp well-formed but for its instant: its offset takes it out of years
 * 0000–9999 in UTC (`9999-12-31T23:59:59-23:59` is 10000-01-01T23:58:59Z). Such a timestamp has
 * no UTC form a timestamp can write (under 2.0 it would be stored as `+010000-…`, which no LRS
 * accepts back), so it is refused under every version.
 */
export function timestampOutOfRange(s: unknown): boolean {
  const ms = localTimestamp(s);
  return ms !== undefined && (ms < MIN_INSTANT || ms > MAX_INSTANT);
}

/** {@link parseTimestamp} without the range check. */
function localTimestamp(s: unknown): number | undefined {
  if (typeof s !== 'string') return undefined;
  const n = s.length;
  if (n < 11) return undefined;
  let y = 0;
  for (let k = 0; k < 4; k++) {
    const c = s.charCodeAt(k);
    if (!isDigitCode(c)) return undefined;
    y = y * 10 + (c - 48);
  }
  let mo: number;
  let d: number;
  let i: number;
  const ext = s.charCodeAt(4) === 45; // '-'
  if (ext) {
    mo = d2(s, 5);
    if (s.charCodeAt(7) !== 45) return undefined;
    d = d2(s, 8);
    i = 10;
  } else {
    mo = d2(s, 4);
    d = d2(s, 6);
    i = 8;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) return undefined;
  const t = s.charCodeAt(i);
  if (t !== 84 && t !== 116) return undefined; // 'T' / 't'
  i++;
  const h = d2(s, i);
  if (h < 0 || h > 23) return undefined;
  i += 2;
  let mi = 0;
  let sec = 0;
  let ms = 0;
  if (ext ? s.charCodeAt(i) === 58 : isDigitCode(s.charCodeAt(i))) {
    if (ext) i++;
    mi = d2(s, i);
    if (mi < 0 || mi > 59) return undefined;
    i += 2;
    if (ext ? s.charCodeAt(i) === 58 : isDigitCode(s.charCodeAt(i))) {
      if (ext) i++;
      sec = d2(s, i);
      if (sec < 0 || sec > 60) return undefined; // 60: leap second
      i += 2;
      const dm = s.charCodeAt(i);
      if (dm === 46 || dm === 44) {
        i++;
        const start = i;
        while (i < n && isDigitCode(s.charCodeAt(i))) {
          if (i - start < 3) ms = ms * 10 + (s.charCodeAt(i) - 48);
          i++;
        }
        const digits = i - start;
        if (digits === 0) return undefined;
        if (digits === 1) ms *= 100;
        else if (digits === 2) ms *= 10;
      }
    }
  }
  let offset = 0;
  if (i < n) {
    const c = s.charCodeAt(i);
    if (c === 90 || c === 122) {
      i++; // 'Z' / 'z'
    } else if (c === 43 || c === 45) {
      i++;
      const oh = d2(s, i);
      if (oh < 0 || oh > 23) return undefined;
      i += 2;
      let om = 0;
      if (i < n) {
        if (s.charCodeAt(i) === 58) i++;
        om = d2(s, i);
        if (om < 0 || om > 59) return undefined;
        i += 2;
      }
      if (c === 45 && oh === 0 && om === 0) return undefined; // -00:00 "unknown local offset"
      offset = (c === 45 ? -1 : 1) * (oh * 60 + om);
    } else {
      return undefined;
    }
    if (i !== n) return undefined;
  }
  return (
    daysFromCivil(y, mo, d) * 86_400_000 + h * 3_600_000 + mi * 60_000 + sec * 1000 + ms - offset * 60_000
  );
}

/** True when `s` is a timestamp {@link parseTimestamp} accepts. */
export const isTimestamp = (s: unknown): s is string => parseTimestamp(s) !== undefined;

/**
 * An ISO 8601:2004 §4.4.3.2 duration (§4.6): `PnYnMnDTnHnMnS` with components in that order, at
 * least one component, `T` only before at least one time component, a decimal fraction (`.` or
 * `,`) only on the last component, or `PnW` alone. The alternative format (`P0003-01-29T...`,
 * §4.4.3.3) is rejected as the spec requires, and so is the spec's own example `P16559.14S`,
 * which lacks the `T` that ISO 8601 requires before seconds (the ADL suite uses `PT16559.14S`).
 */
export function isDuration(s: unknown): s is string {
  if (typeof s !== 'string') return false;
  const n = s.length;
  if (n < 3 || s.charCodeAt(0) !== 80) return false; // 'P'
  let i = 1;
  let rank = 0;
  let count = 0;
  let inTime = false;
  let fraction = false;
  let week = false;
  while (i < n) {
    let c = s.charCodeAt(i);
    if (c === 84) {
      // 'T'
      if (inTime) return false;
      inTime = true;
      i++;
      if (i === n) return false;
      continue;
    }
    if (fraction) return false; // only the last component may have a fraction
    const start = i;
    while (i < n && isDigitCode(s.charCodeAt(i))) i++;
    if (i === start) return false;
    c = s.charCodeAt(i);
    if (c === 46 || c === 44) {
      i++;
      const fs = i;
      while (i < n && isDigitCode(s.charCodeAt(i))) i++;
      if (i === fs) return false;
      fraction = true;
      c = s.charCodeAt(i);
    }
    let r: number;
    if (!inTime) r = c === 89 ? 1 : c === 77 ? 2 : c === 87 ? 3 : c === 68 ? 4 : 0; // Y M W D
    else r = c === 72 ? 5 : c === 77 ? 6 : c === 83 ? 7 : 0; // H M S
    if (r === 0 || r <= rank) return false;
    if (r === 3) week = true;
    rank = r;
    count++;
    i++;
  }
  return count > 0 && (!week || count === 1);
}

// ---------------------------------------------------------------------------------------------
// Reporting helpers
// ---------------------------------------------------------------------------------------------

const isObject = (v: unknown): v is J => typeof v === 'object' && v !== null && !Array.isArray(v);

function report(c: Ctx, msg: string, type: string): void {
  if (c.issues.length >= MAX_ISSUES) c.dropped.count++;
  else c.issues.push({ loc: c.path.slice(), msg, type });
}

function reportAt(c: Ctx, key: string | number, msg: string, type: string): void {
  if (c.issues.length >= MAX_ISSUES) {
    c.dropped.count++;
    return;
  }
  const loc = c.path.slice();
  loc.push(key);
  c.issues.push({ loc, msg, type });
}

const extra = (c: Ctx): void => report(c, 'extra field not permitted', 'value_error.extra');
const missing = (c: Ctx, key: string, why?: string): void =>
  reportAt(c, key, why ? `field required: ${why}` : 'field required', 'value_error.missing');

function jsonTypeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

const WHAT: Record<string, string> = {
  object: 'a JSON object',
  array: 'an array',
  string: 'a string',
  number: 'a number',
  boolean: 'a boolean',
  integer: 'a non-negative integer',
};

/** Reports a value of the wrong JSON type (null gets its own message and code). */
function wrongType(c: Ctx, v: unknown, expected: string, what?: string): void {
  if (v === null) report(c, 'null is not allowed here (only extension values may be null)', 'type_error.null');
  else report(c, `must be ${what ?? WHAT[expected]}, got ${jsonTypeName(v)}`, `type_error.${expected}`);
}

function str(c: Ctx, v: unknown): v is string {
  if (typeof v === 'string') return true;
  wrongType(c, v, 'string');
  return false;
}

function bool(c: Ctx, v: unknown): v is boolean {
  if (typeof v === 'boolean') return true;
  wrongType(c, v, 'boolean');
  return false;
}

function num(c: Ctx, v: unknown): v is number {
  if (typeof v === 'number' && Number.isFinite(v)) return true;
  wrongType(c, v, 'number');
  return false;
}

function iri(c: Ctx, v: unknown): v is string {
  if (!str(c, v)) return false;
  if (isIri(v)) return true;
  report(c, 'must be an absolute IRI (with a scheme, e.g. "http://example.com/x")', 'value_error.iri');
  return false;
}

function irl(c: Ctx, v: unknown): v is string {
  if (!str(c, v)) return false;
  if (isIrl(v)) return true;
  report(c, 'must be an absolute IRL (with a scheme, e.g. "http://example.com/x")', 'value_error.irl');
  return false;
}

function uuid(c: Ctx, v: unknown): v is string {
  if (!str(c, v)) return false;
  if (isUuid(v)) return true;
  report(c, 'must be a UUID in standard form (8-4-4-4-12 hex digits)', 'value_error.uuid');
  return false;
}

function timestamp(c: Ctx, v: unknown): v is string {
  if (!str(c, v)) return false;
  if (parseTimestamp(v) !== undefined) return true;
  if (timestampOutOfRange(v)) {
    report(c, 'the instant it denotes is outside years 0000-9999 once converted to UTC (its offset takes it across a year boundary)', 'value_error.datetime_range');
    return false;
  }
  report(
    c,
    'must be an ISO 8601 date-time such as "2013-05-18T05:32:34.804Z" (a full date and time; offset "-00:00" is not allowed)',
    'value_error.datetime',
  );
  return false;
}

// ---------------------------------------------------------------------------------------------
// Generic JSON: language maps, extensions
// ---------------------------------------------------------------------------------------------

/**
 * Nesting limit for extension values. Not a spec rule but a resource limit: V8's JSON.stringify
 * (which the store needs) overflows the stack a few thousand levels down, so deeper values are
 * reported as a 400 here rather than failing later as a 500.
 */
export const MAX_JSON_DEPTH = 512;
const TOO_DEEP: unique symbol = Symbol('too deep');

/** Deep copy of an arbitrary JSON value (extension values), safe against `__proto__` keys. */
function copyJson(v: unknown, depth: number): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (depth >= MAX_JSON_DEPTH) return TOO_DEEP;
  if (Array.isArray(v)) {
    const out = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) {
      const x = copyJson(v[i], depth + 1);
      if (x === TOO_DEEP) return TOO_DEEP;
      out[i] = x;
    }
    return out;
  }
  const out: J = {};
  for (const k in v as J) {
    const x = copyJson((v as J)[k], depth + 1);
    if (x === TOO_DEEP) return TOO_DEEP;
    if (k === '__proto__') Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
    else out[k] = x;
  }
  return out;
}

/** Language map (§4.2): RFC 5646 tags as keys, strings as values, at least one entry. */
function languageMap(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object', 'a language map (JSON object of language tag to string)');
    return undefined;
  }
  const out: J = {};
  let n = 0;
  for (const k in v) {
    n++;
    const x = v[k];
    c.path.push(k);
    const okKey = isLanguageTag(k);
    if (!okKey) report(c, `"${k}" is not a valid RFC 5646 language tag`, 'value_error.language_tag');
    if (str(c, x) && okKey) out[k] = x;
    c.path.pop();
  }
  if (n === 0) report(c, 'a language map must have at least one entry', 'value_error.empty');
  return out;
}

/** Extensions (§4.1): keys are absolute IRIs, values any JSON (null included). */
function extensions(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object', 'an extensions map (JSON object of IRI to any value)');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    if (!isIri(k)) {
      reportAt(c, k, 'an extension key must be an absolute IRI', 'value_error.iri');
      continue;
    }
    const x = copyJson(v[k], 0);
    if (x === TOO_DEEP) reportAt(c, k, `extension value nested too deeply (more than ${MAX_JSON_DEPTH} levels)`, 'value_error.too_deep');
    else out[k] = x;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Agents and Groups (§2.4.2)
// ---------------------------------------------------------------------------------------------

/** Where an Agent/Group appears; decides what is allowed. */
const AS_ACTOR = 0; // actor, context.instructor: Agent (objectType optional) or Group
const AS_OBJECT = 1; // statement object: objectType required (checked by the object dispatcher)
const AS_TEAM = 2; // context.team: a Group
const AS_MEMBER = 3; // group member: an Agent
const AS_AUTHORITY = 4; // authority: Agent, or anonymous Group of exactly two Agents
const AS_PARAM = 5; // `agent` query parameter: Agent or identified Group
const AS_CONTEXT_GROUP = 6; // 2.0 contextGroups[].group: a Group (objectType required)
const AS_CONTEXT_AGENT = 7; // 2.0 contextAgents[].agent: an Agent

const IFI_HINT = 'mbox, mbox_sha1sum, openid or account';

function ifiMessage(who: string, found: string[]): string {
  if (found.length === 0) return `${who} must have exactly one inverse functional identifier (${IFI_HINT}), found none`;
  return `${who} must have exactly one inverse functional identifier, found ${found.length}: ${found.join(', ')}`;
}

function account(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'homePage':
        if (irl(c, x)) out.homePage = x;
        break;
      case 'name':
        if (str(c, x)) out.name = x;
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  if (v.homePage === undefined) missing(c, 'homePage');
  if (v.name === undefined) missing(c, 'name');
  return out;
}

function members(c: Ctx, v: unknown): unknown[] | undefined {
  if (!Array.isArray(v)) {
    wrongType(c, v, 'array', 'an array of Agents');
    return undefined;
  }
  const out = new Array<unknown>(v.length);
  for (let i = 0; i < v.length; i++) {
    c.path.push(i);
    out[i] = agentOrGroup(c, v[i], AS_MEMBER);
    c.path.pop();
  }
  return out;
}

function agentOrGroup(c: Ctx, v: unknown, as: number): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const t = v.objectType;
  const groupOnly = as === AS_TEAM || as === AS_CONTEXT_GROUP;
  const what = as === AS_TEAM ? 'a team' : 'a context group';
  let group: boolean;
  if (t === undefined) {
    if (groupOnly) missing(c, 'objectType', `${what} must be a Group with "objectType": "Group"`);
    group = groupOnly;
  } else if (t === 'Agent') {
    if (groupOnly) {
      reportAt(c, 'objectType', `${what} must be a Group, not an Agent`, 'value_error.not_allowed');
      return undefined;
    }
    group = false;
  } else if (t === 'Group') {
    if (as === AS_MEMBER || as === AS_CONTEXT_AGENT) {
      const msg = as === AS_MEMBER ? 'a Group member must be an Agent; Groups cannot contain Groups' : 'a contextAgent\'s agent must be an Agent (a Group goes in contextGroups)';
      reportAt(c, 'objectType', msg, 'value_error.not_allowed');
      return undefined;
    }
    group = true;
  } else {
    c.path.push('objectType');
    if (typeof t !== 'string') wrongType(c, t, 'string');
    else if (as === AS_MEMBER || as === AS_CONTEXT_AGENT) report(c, 'must be "Agent"', 'value_error.enum');
    else if (groupOnly) report(c, 'must be "Group"', 'value_error.enum');
    else report(c, 'must be "Agent" or "Group"', 'value_error.enum');
    c.path.pop();
    return undefined;
  }

  const out: J = {};
  let found: string[] | undefined;
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'objectType':
        out.objectType = x;
        break;
      case 'name':
        if (str(c, x)) out.name = x;
        break;
      case 'mbox':
        (found ??= []).push(k);
        if (str(c, x)) {
          if (isMbox(x)) out.mbox = x;
          else report(c, 'must be a "mailto:" IRI with an email address, e.g. "mailto:someone@example.com"', 'value_error.mbox');
        }
        break;
      case 'mbox_sha1sum':
        (found ??= []).push(k);
        if (str(c, x)) {
          if (isSha1Hex(x)) out.mbox_sha1sum = x;
          else report(c, 'must be the hex-encoded SHA-1 of a mailto IRI (40 hex digits)', 'value_error.sha1');
        }
        break;
      case 'openid':
        (found ??= []).push(k);
        if (str(c, x)) {
          if (isIri(x)) out.openid = x;
          else report(c, 'must be an absolute URI', 'value_error.iri');
        }
        break;
      case 'account':
        (found ??= []).push(k);
        out.account = account(c, x);
        break;
      case 'member':
        if (group) out.member = members(c, x);
        else report(c, 'extra field not permitted ("member" is only allowed on a Group)', 'value_error.extra');
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }

  const nIfi = found === undefined ? 0 : found.length;
  if (!group) {
    if (nIfi !== 1) report(c, ifiMessage('an Agent', found ?? []), 'value_error.ifi');
    return out;
  }
  if (nIfi > 1) {
    report(c, ifiMessage('an identified Group', found ?? []), 'value_error.ifi');
  } else if (as === AS_AUTHORITY) {
    if (nIfi === 1) {
      report(c, 'an authority Group must be an anonymous Group (no inverse functional identifier) of two Agents', 'value_error.authority');
    }
    const m = v.member;
    if (m === undefined) missing(c, 'member', 'an authority Group must list exactly two Agents');
    else if (Array.isArray(m) && m.length !== 2) {
      reportAt(c, 'member', `an authority Group must have exactly two Agent members, found ${m.length}`, 'value_error.authority');
    }
  } else if (nIfi === 0) {
    if (as === AS_PARAM) {
      report(c, `must be an Agent or an identified Group: a Group here needs exactly one inverse functional identifier (${IFI_HINT}), found none`, 'value_error.ifi');
    } else {
      const m = v.member;
      if (m === undefined) missing(c, 'member', 'an anonymous Group (one without an inverse functional identifier) must list its members');
      else if (Array.isArray(m) && m.length === 0) {
        reportAt(c, 'member', 'an anonymous Group must have at least one member', 'value_error.empty');
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Verb (§2.4.3)
// ---------------------------------------------------------------------------------------------

function verb(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'id':
        if (iri(c, x)) out.id = x;
        break;
      case 'display':
        out.display = languageMap(c, x);
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  if (v.id === undefined) missing(c, 'id');
  return out;
}

// ---------------------------------------------------------------------------------------------
// Activities (§2.4.4.1)
// ---------------------------------------------------------------------------------------------

const INTERACTION_TYPES = 'true-false, choice, fill-in, long-fill-in, matching, performance, sequencing, likert, numeric, other';

/** Component lists each interactionType supports (§2.4.4.1.s15 table 2); undefined: not an interactionType. */
function componentListsFor(t: string): string | undefined {
  switch (t) {
    case 'choice':
    case 'sequencing':
      return 'choices';
    case 'likert':
      return 'scale';
    case 'matching':
      return 'source, target';
    case 'performance':
      return 'steps';
    case 'true-false':
    case 'fill-in':
    case 'long-fill-in':
    case 'numeric':
    case 'other':
      return '';
    default:
      return undefined;
  }
}

/** Whether interactionType `t` (a valid one) supports the component list `list`. */
function supportsList(t: string, list: string): boolean {
  switch (list) {
    case 'choices':
      return t === 'choice' || t === 'sequencing';
    case 'scale':
      return t === 'likert';
    case 'source':
    case 'target':
      return t === 'matching';
    case 'steps':
      return t === 'performance';
    default:
      return false;
  }
}

function interactionComponents(c: Ctx, v: unknown): unknown[] | undefined {
  if (!Array.isArray(v)) {
    wrongType(c, v, 'array', 'an array of interaction components');
    return undefined;
  }
  const out = new Array<unknown>(v.length);
  let seen: Set<string> | undefined;
  for (let i = 0; i < v.length; i++) {
    const item = v[i];
    c.path.push(i);
    if (!isObject(item)) {
      wrongType(c, item, 'object');
    } else {
      const comp: J = {};
      for (const k in item) {
        const x = item[k];
        c.path.push(k);
        switch (k) {
          case 'id':
            if (str(c, x)) {
              seen ??= new Set();
              if (seen.has(x)) report(c, `duplicate interaction component id "${x}" (ids must be distinct within a list)`, 'value_error.duplicate');
              else seen.add(x);
              comp.id = x;
            }
            break;
          case 'description':
            comp.description = languageMap(c, x);
            break;
          default:
            extra(c);
        }
        c.path.pop();
      }
      if (item.id === undefined) missing(c, 'id');
      out[i] = comp;
    }
    c.path.pop();
  }
  return out;
}

function definition(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const it = v.interactionType;
  const allowed = typeof it === 'string' ? componentListsFor(it) : undefined;
  const out: J = {};
  let interactionProps: string | undefined;
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'name':
        out.name = languageMap(c, x);
        break;
      case 'description':
        out.description = languageMap(c, x);
        break;
      case 'type':
        if (iri(c, x)) out.type = x;
        break;
      case 'moreInfo':
        if (irl(c, x)) out.moreInfo = x;
        break;
      case 'extensions':
        out.extensions = extensions(c, x);
        break;
      case 'interactionType':
        if (str(c, x)) {
          if (allowed === undefined) report(c, `must be one of ${INTERACTION_TYPES}`, 'value_error.enum');
          else out.interactionType = x;
        }
        break;
      case 'correctResponsesPattern':
        interactionProps ??= k;
        if (!Array.isArray(x)) {
          wrongType(c, x, 'array', 'an array of strings');
        } else {
          const arr = new Array<unknown>(x.length);
          for (let i = 0; i < x.length; i++) {
            c.path.push(i);
            if (str(c, x[i])) arr[i] = x[i];
            c.path.pop();
          }
          out.correctResponsesPattern = arr;
        }
        break;
      case 'choices':
      case 'scale':
      case 'source':
      case 'target':
      case 'steps':
        interactionProps ??= k;
        if (allowed !== undefined && !supportsList(it as string, k)) {
          report(
            c,
            `"${k}" is not allowed for interactionType "${it as string}" (${allowed ? `only ${allowed}` : 'no component lists are supported'})`,
            'value_error.not_allowed',
          );
        }
        out[k] = interactionComponents(c, x);
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  if (interactionProps !== undefined && it === undefined) {
    missing(c, 'interactionType', `an interaction Activity (one with "${interactionProps}") must have an interactionType`);
  }
  return out;
}

/** An Activity object; `v` is already known to be an object. */
function activityBody(c: Ctx, v: J): J | undefined {
  const t = v.objectType;
  if (t !== undefined && t !== 'Activity') {
    c.path.push('objectType');
    if (typeof t !== 'string') wrongType(c, t, 'string');
    else report(c, 'must be "Activity"', 'value_error.enum');
    c.path.pop();
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'objectType':
        out.objectType = x;
        break;
      case 'id':
        if (iri(c, x)) out.id = x;
        break;
      case 'definition':
        out.definition = definition(c, x);
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  if (v.id === undefined) missing(c, 'id');
  return out;
}

function activity(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object', 'an Activity object');
    return undefined;
  }
  return activityBody(c, v);
}

// ---------------------------------------------------------------------------------------------
// Statement references and the statement object (§2.4.4)
// ---------------------------------------------------------------------------------------------

function statementRef(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object', 'a StatementRef object');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'objectType':
        if (str(c, x)) {
          if (x === 'StatementRef') out.objectType = x;
          else report(c, 'must be "StatementRef"', 'value_error.enum');
        }
        break;
      case 'id':
        if (uuid(c, x)) out.id = x;
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  if (v.objectType === undefined) missing(c, 'objectType', 'a Statement Reference must have "objectType": "StatementRef"');
  if (v.id === undefined) missing(c, 'id');
  return out;
}

const OBJECT_TYPES = 'Activity, Agent, Group, StatementRef, SubStatement';

function statementObject(c: Ctx, v: unknown, inSub: boolean): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const t = v.objectType;
  switch (t) {
    case undefined:
    case 'Activity':
      return activityBody(c, v);
    case 'Agent':
    case 'Group':
      return agentOrGroup(c, v, AS_OBJECT);
    case 'StatementRef':
      return statementRef(c, v);
    case 'SubStatement':
      if (inSub) {
        reportAt(c, 'objectType', 'a SubStatement must not contain a SubStatement', 'value_error.not_allowed');
        return undefined;
      }
      return statementBody(c, v, true);
    default:
      c.path.push('objectType');
      if (typeof t !== 'string') wrongType(c, t, 'string');
      else report(c, `must be one of ${OBJECT_TYPES}`, 'value_error.enum');
      c.path.pop();
      return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Result (§2.4.5)
// ---------------------------------------------------------------------------------------------

function score(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'scaled':
        if (num(c, x)) {
          if (x < -1 || x > 1) report(c, 'must be between -1 and 1 inclusive', 'value_error.range');
          out.scaled = x;
        }
        break;
      case 'raw':
      case 'min':
      case 'max':
        if (num(c, x)) out[k] = x;
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  const { raw, min, max } = out as { raw?: number; min?: number; max?: number };
  if (min !== undefined && max !== undefined && !(min < max)) {
    reportAt(c, 'max', `max (${max}) must be greater than min (${min})`, 'value_error.range');
  }
  if (raw !== undefined) {
    if (min !== undefined && raw < min) reportAt(c, 'raw', `raw (${raw}) must not be less than min (${min})`, 'value_error.range');
    if (max !== undefined && raw > max) reportAt(c, 'raw', `raw (${raw}) must not be greater than max (${max})`, 'value_error.range');
  }
  return out;
}

function result(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'score':
        out.score = score(c, x);
        break;
      case 'success':
      case 'completion':
        if (bool(c, x)) out[k] = x;
        break;
      case 'response':
        if (str(c, x)) out.response = x;
        break;
      case 'duration':
        if (str(c, x)) {
          if (isDuration(x)) out.duration = x;
          else report(c, 'must be an ISO 8601 duration such as "PT4H35M59.14S", "P3Y1M29D" or "P4W"', 'value_error.duration');
        }
        break;
      case 'extensions':
        out.extensions = extensions(c, x);
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Context (§2.4.6)
// ---------------------------------------------------------------------------------------------

function contextActivities(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'parent':
      case 'grouping':
      case 'category':
      case 'other':
        if (Array.isArray(x)) {
          const arr = new Array<unknown>(x.length);
          for (let i = 0; i < x.length; i++) {
            c.path.push(i);
            arr[i] = activity(c, x[i]);
            c.path.pop();
          }
          out[k] = arr;
        } else if (isObject(x)) {
          out[k] = [activityBody(c, x)]; // §2.4.6.2.s4.b3: always returned as an array
        } else {
          wrongType(c, x, 'array', 'an Activity object or an array of Activity objects');
        }
        break;
      default:
        report(c, 'extra field not permitted (contextActivities keys are parent, grouping, category and other)', 'value_error.extra');
    }
    c.path.pop();
  }
  return out;
}

function context(c: Ctx, v: unknown, objectIsNotActivity: boolean): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'registration':
        if (uuid(c, x)) out.registration = x;
        break;
      case 'instructor':
        out.instructor = agentOrGroup(c, x, AS_ACTOR);
        break;
      case 'team':
        out.team = agentOrGroup(c, x, AS_TEAM);
        break;
      case 'contextActivities':
        out.contextActivities = contextActivities(c, x);
        break;
      case 'revision':
      case 'platform':
        if (str(c, x)) {
          if (objectIsNotActivity) {
            report(c, `"${k}" must only be used when the statement's object is an Activity`, 'value_error.not_allowed');
          }
          out[k] = x;
        }
        break;
      case 'language':
        if (str(c, x)) {
          if (isLanguageTag(x)) out.language = x;
          else report(c, 'must be an RFC 5646 language tag such as "en" or "en-US"', 'value_error.language_tag');
        }
        break;
      case 'statement':
        out.statement = statementRef(c, x);
        break;
      case 'extensions':
        out.extensions = extensions(c, x);
        break;
      case 'contextAgents':
      case 'contextGroups':
        if (is2(c.version)) out[k] = contextActors(c, x, k === 'contextAgents');
        else report(c, `extra field not permitted ("${k}" is xAPI 2.0: send X-Experience-API-Version: 2.0.0)`, 'value_error.extra');
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  return out;
}

/** 2.0 contextAgents / contextGroups (9274.1.1 §4.2.2.5): arrays of {objectType, agent|group, relevantTypes?}. */
function contextActors(c: Ctx, v: unknown, agents: boolean): unknown[] | undefined {
  const objectType = agents ? 'contextAgent' : 'contextGroup';
  const member = agents ? 'agent' : 'group';
  if (!Array.isArray(v)) {
    wrongType(c, v, 'array', `an array of ${objectType} objects`);
    return undefined;
  }
  const out = new Array<unknown>(v.length);
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    c.path.push(i);
    if (!isObject(x)) wrongType(c, x, 'object', `a ${objectType} object`);
    else {
      const o: J = {};
      for (const k in x) {
        const y = x[k];
        c.path.push(k);
        if (k === 'objectType') {
          if (y === objectType) o.objectType = y;
          else if (typeof y !== 'string') wrongType(c, y, 'string');
          else report(c, `must be "${objectType}"`, 'value_error.enum');
        } else if (k === member) {
          o[k] = agentOrGroup(c, y, agents ? AS_CONTEXT_AGENT : AS_CONTEXT_GROUP);
        } else if (k === 'relevantTypes') {
          if (!Array.isArray(y)) wrongType(c, y, 'array', 'an array of IRIs');
          else if (y.length === 0) report(c, 'relevantTypes, when present, must list at least one IRI', 'value_error.empty');
          else {
            const types: unknown[] = [];
            y.forEach((t, j) => {
              c.path.push(j);
              if (iri(c, t)) types.push(t);
              c.path.pop();
            });
            o.relevantTypes = types;
          }
        } else extra(c);
        c.path.pop();
      }
      if (x.objectType === undefined) missing(c, 'objectType', `must be "${objectType}"`);
      if (x[member] === undefined) missing(c, member);
      out[i] = o;
    }
    c.path.pop();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Attachments (§2.4.11)
// ---------------------------------------------------------------------------------------------

function attachment(c: Ctx, v: unknown): J | undefined {
  if (!isObject(v)) {
    wrongType(c, v, 'object', 'an Attachment object');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    switch (k) {
      case 'usageType':
        if (iri(c, x)) out.usageType = x;
        break;
      case 'display':
      case 'description':
        out[k] = languageMap(c, x);
        break;
      case 'contentType':
        if (str(c, x)) {
          if (isMediaType(x)) out.contentType = x;
          else report(c, 'must be an Internet media type such as "text/plain; charset=utf-8"', 'value_error.media_type');
        }
        break;
      case 'length':
        if (typeof x !== 'number') wrongType(c, x, 'integer');
        else if (!Number.isSafeInteger(x) || x < 0) report(c, 'must be a non-negative integer', 'value_error.integer');
        else out.length = x;
        break;
      case 'sha2':
        if (str(c, x)) {
          if (isSha2Hex(x)) out.sha2 = x;
          else report(c, 'must be a hex-encoded SHA-2 digest (56, 64, 96 or 128 hex digits)', 'value_error.sha2');
        }
        break;
      case 'fileUrl':
        if (irl(c, x)) out.fileUrl = x;
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  if (v.usageType === undefined) missing(c, 'usageType');
  if (v.display === undefined) missing(c, 'display');
  if (v.contentType === undefined) missing(c, 'contentType');
  if (v.length === undefined) missing(c, 'length');
  if (v.sha2 === undefined) missing(c, 'sha2');
  return out;
}

function attachments(c: Ctx, v: unknown): unknown[] | undefined {
  if (!Array.isArray(v)) {
    wrongType(c, v, 'array', 'an array of Attachment objects');
    return undefined;
  }
  const out = new Array<unknown>(v.length);
  for (let i = 0; i < v.length; i++) {
    c.path.push(i);
    out[i] = attachment(c, v[i]);
    c.path.pop();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Statements and SubStatements (§2.4, §2.4.4.3)
// ---------------------------------------------------------------------------------------------

const NON_ACTIVITY_OBJECT_TYPES = new Set(['Agent', 'Group', 'StatementRef', 'SubStatement']);

function statementBody(c: Ctx, s: J, sub: boolean): J {
  const o = s.object;
  const objectIsNotActivity =
    isObject(o) && typeof o.objectType === 'string' && NON_ACTIVITY_OBJECT_TYPES.has(o.objectType);
  const out: J = {};
  for (const k in s) {
    const x = s[k];
    c.path.push(k);
    switch (k) {
      case 'id':
        if (sub) report(c, 'a SubStatement must not have an "id"', 'value_error.not_allowed');
        else if (uuid(c, x)) out.id = x;
        break;
      case 'objectType':
        // Only a SubStatement has one (already checked to be "SubStatement" by the dispatcher).
        if (sub) out.objectType = x;
        else extra(c);
        break;
      case 'actor':
        out.actor = agentOrGroup(c, x, AS_ACTOR);
        break;
      case 'verb':
        out.verb = verb(c, x);
        break;
      case 'object':
        out.object = statementObject(c, x, sub);
        break;
      case 'result':
        out.result = result(c, x);
        break;
      case 'context':
        out.context = context(c, x, objectIsNotActivity);
        break;
      case 'timestamp':
        if (timestamp(c, x)) out.timestamp = x;
        break;
      case 'stored':
        if (sub) report(c, 'a SubStatement must not have "stored"', 'value_error.not_allowed');
        else if (timestamp(c, x)) out.stored = x;
        break;
      case 'authority':
        if (sub) report(c, 'a SubStatement must not have an "authority"', 'value_error.not_allowed');
        else out.authority = agentOrGroup(c, x, AS_AUTHORITY);
        break;
      case 'version':
        if (sub) report(c, 'a SubStatement must not have a "version"', 'value_error.not_allowed');
        else if (str(c, x)) {
          if (acceptsStatementVersion(c.version, x)) out.version = x;
          else report(c, `must be a ${statementVersionHint(c.version)} version such as "1.0.0"`, 'value_error.version');
        }
        break;
      case 'attachments':
        out.attachments = attachments(c, x);
        break;
      default:
        extra(c);
    }
    c.path.pop();
  }
  if (s.actor === undefined) missing(c, 'actor');
  if (s.verb === undefined) missing(c, 'verb');
  if (o === undefined) missing(c, 'object');
  // §2.3.2.s2.b1: a voiding statement's object must be a StatementRef.
  if (!sub && isObject(o) && isObject(s.verb) && s.verb.id === VOIDED_VERB && o.objectType !== 'StatementRef') {
    c.path.push('object');
    if (o.objectType === undefined) missing(c, 'objectType', 'the object of a voiding statement must be a StatementRef');
    else reportAt(c, 'objectType', 'the object of a voiding statement must be a StatementRef', 'value_error.voiding');
    c.path.pop();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/**
 * Validates one statement (not a SubStatement) at `loc`, appending problems to `issues` up to
 * MAX_ISSUES and counting the others in `dropped`. Returns a normalised deep copy (meaningful only
 * when no issue was found), or undefined when `value` is not an object.
 */
export function validateStatement(value: unknown, loc: Loc, issues: ValidationIssue[], version: XapiVersion, dropped = { count: 0 }): Statement | undefined {
  const c: Ctx = { path: loc.slice(), issues, dropped, version };
  if (!isObject(value)) {
    wrongType(c, value, 'object', 'a Statement object');
    return undefined;
  }
  return statementBody(c, value, false) as unknown as Statement;
}

/**
 * Validates a POST/PUT body: one statement or an array of statements. Returns the statements
 * (normalised where the spec allows, e.g. a single context activity becomes an array) and every
 * problem found, each `loc` starting with the statement's index in the batch (0 for a single
 * statement). Two statements of a batch with the same id are reported too (Communication
 * §2.1.2.s2.b6). When there are issues, `statements` is not meaningful. At most MAX_ISSUES are
 * listed: `more` counts the problems found beyond them.
 */
export function validateStatements(body: unknown, version: XapiVersion): { statements: Statement[]; issues: ValidationIssue[]; more: number } {
  const issues: ValidationIssue[] = [];
  const dropped = { count: 0 };
  if (Array.isArray(body)) {
    const statements = new Array<Statement>(body.length);
    let ids: Map<string, number> | undefined;
    for (let i = 0; i < body.length; i++) {
      const s = validateStatement(body[i], [i], issues, version, dropped);
      statements[i] = s as Statement;
      const id = s?.id;
      if (id !== undefined && body.length > 1) {
        ids ??= new Map();
        const key = id.toLowerCase();
        const first = ids.get(key);
        if (first === undefined) ids.set(key, i);
        else if (issues.length >= MAX_ISSUES) dropped.count++;
        else issues.push({ loc: [i, 'id'], msg: `duplicate statement id in batch (same as statement ${first})`, type: 'value_error.duplicate' });
      }
    }
    return { statements, issues, more: dropped.count };
  }
  if (isObject(body)) {
    const s = validateStatement(body, [0], issues, version, dropped);
    return { statements: s ? [s] : [], issues, more: dropped.count };
  }
  issues.push({
    loc: [],
    msg: `the body must be a Statement object or an array of Statements, got ${jsonTypeName(body)}`,
    type: 'type_error.object',
  });
  return { statements: [], issues, more: 0 };
}

/**
 * Validates the `agent` query parameter value (already JSON-parsed): an Agent, or an identified
 * Group (exactly one inverse functional identifier). Returns a normalised copy (meaningful only
 * when no issue was added).
 */
export function validateAgentParam(value: unknown, loc: Loc, issues: ValidationIssue[]): Actor | undefined {
  // An agent parameter is the same under every version.
  const c: Ctx = { path: loc.slice(), issues, dropped: { count: 0 }, version: '1.0.3' };
  if (!isObject(value)) {
    wrongType(c, value, 'object', 'an Agent or identified Group JSON object');
    return undefined;
  }
  return agentOrGroup(c, value, AS_PARAM) as Actor | undefined;
}
