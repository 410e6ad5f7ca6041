/**
 * The syntax of xAPI's value formats (xAPI-Data §4): UUIDs, IRIs, mailto IRIs, digests, media
 * types, ISO 8601 timestamps and durations. Plain predicates over strings, no allocation on the
 * accepting path; the statement validator (validate.ts) reports what they reject.
 */

const isDigitCode = (c: number): boolean => c >= 48 && c <= 57;
const isAlphaCode = (c: number): boolean => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
/** 1 for the ASCII codes of hex digits. */
const HEX_DIGIT = new Uint8Array(128);
for (const ch of '0123456789abcdefABCDEF') HEX_DIGIT[ch.charCodeAt(0)] = 1;
const isHexCode = (c: number): boolean => c < 128 && HEX_DIGIT[c] === 1;

/** Whether `s` holds only hex digits from `from` to `to`. */
function hexRun(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || HEX_DIGIT[c] === 0) return false;
  }
  return true;
}

const isHex = (s: string): boolean => hexRun(s, 0, s.length);

/**
 * A UUID in the standard 8-4-4-4-12 hex string form (§2.4.1, §4.4). Any version and variant is
 * accepted (the spec's own example `12345678-1234-5678-1234-567812345678` is not RFC 4122
 * variant 2); hex digits may be upper or lower case.
 */
export function isUuid(s: unknown): s is string {
  return (
    typeof s === 'string' &&
    s.length === 36 &&
    s.charCodeAt(8) === 45 &&
    s.charCodeAt(13) === 45 &&
    s.charCodeAt(18) === 45 &&
    s.charCodeAt(23) === 45 &&
    hexRun(s, 0, 8) &&
    hexRun(s, 9, 13) &&
    hexRun(s, 14, 18) &&
    hexRun(s, 19, 23) &&
    hexRun(s, 24, 36)
  );
}

/** What an ASCII character after an IRI's scheme is: allowed, never allowed, `#` or `%`. */
const IRI_OK = 0;
const IRI_NEVER = 1;
const IRI_HASH = 2;
const IRI_PERCENT = 3;
const IRI_ASCII = new Uint8Array(128);
for (let c = 0; c <= 0x20; c++) IRI_ASCII[c] = IRI_NEVER; // controls and space
IRI_ASCII[0x7f] = IRI_NEVER;
for (const ch of '"<>\\^`{|}') IRI_ASCII[ch.charCodeAt(0)] = IRI_NEVER;
IRI_ASCII[35] = IRI_HASH;
IRI_ASCII[37] = IRI_PERCENT;

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
    if (c >= 128) {
      if (c <= 0x9f) return false; // C1 controls
      continue;
    }
    const kind = IRI_ASCII[c];
    if (kind === IRI_OK) continue;
    if (kind === IRI_NEVER) return false;
    if (kind === IRI_HASH) {
      if (++hashes > 1) return false;
    } else {
      if (j + 2 >= n || !isHexCode(s.charCodeAt(j + 1)) || !isHexCode(s.charCodeAt(j + 2))) return false;
      j += 2;
    }
  }
  // An http or https scheme (any case; `| 32` lower-cases the letters, and no other scheme character
  // becomes one of these): a non-empty authority.
  if (
    (i === 4 || i === 5) &&
    (s.charCodeAt(0) | 32) === 104 && // h
    (s.charCodeAt(1) | 32) === 116 && // t
    (s.charCodeAt(2) | 32) === 116 && // t
    (s.charCodeAt(3) | 32) === 112 && // p
    (i === 4 || (s.charCodeAt(4) | 32) === 115) // s
  ) {
    if (s.charCodeAt(i + 1) !== 47 || s.charCodeAt(i + 2) !== 47) return false;
    const h = s.charCodeAt(i + 3);
    if (Number.isNaN(h) || h === 47 || h === 63 || h === 35) return false; // empty authority
  }
  return true;
}

/** An IRL is an IRI that is expected to resolve; syntactically validated as an absolute IRI. */
export const isIrl = isIri;

/** `mailto:` followed by a single email address `local@domain` (§2.4.2.3 "mailto IRI"). */
export function isMbox(s: string): boolean {
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

export const isSha1Hex = (s: string): boolean => s.length === 40 && isHex(s);
/** Hex SHA-2 digest: SHA-224/512-224 (56), SHA-256/512-256 (64), SHA-384 (96), SHA-512 (128). */
export const isSha2Hex = (s: string): boolean => (s.length === 64 || s.length === 128 || s.length === 96 || s.length === 56) && isHex(s);

// RFC 2045 / RFC 7231 media type: type "/" subtype *( OWS ";" OWS name "=" (token / quoted-string) )
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE_RE = new RegExp(`^${TOKEN}/${TOKEN}(?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|"(?:[^"\\\\\\r\\n]|\\\\.)*"))*[ \\t]*$`);
export const isMediaType = (s: string): boolean => MEDIA_TYPE_RE.test(s);

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
  if (typeof s !== 'string' || s.length < 11) return undefined;
  const ext = s.charCodeAt(4) === 45; // '-': the extended format
  const days = calendarDay(s, ext);
  if (days === undefined) return undefined;
  const i = ext ? 10 : 8;
  const t = s.charCodeAt(i);
  if (t !== 84 && t !== 116) return undefined; // 'T' / 't'
  const time = timeOfDay(s, i + 1, ext);
  if (time === undefined) return undefined;
  const offset = offsetMinutes(s, partEnd);
  if (offset === undefined) return undefined;
  return days * 86_400_000 + time - offset * 60_000;
}

/**
 * Where the last of timeOfDay and fraction stopped reading: they return their value and leave
 * their end here, so that the accepting path allocates nothing.
 */
let partEnd = 0;

/** `YYYY-MM-DD` or `YYYYMMDD` at the start of `s`, as days since 1970-01-01; undefined when it is no date. */
function calendarDay(s: string, ext: boolean): number | undefined {
  let y = 0;
  for (let k = 0; k < 4; k++) {
    const c = s.charCodeAt(k);
    if (!isDigitCode(c)) return undefined;
    y = y * 10 + (c - 48);
  }
  if (ext && s.charCodeAt(7) !== 45) return undefined;
  const mo = d2(s, ext ? 5 : 4);
  const d = d2(s, ext ? 8 : 6);
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) return undefined;
  return daysFromCivil(y, mo, d);
}

/** `hh[:mm[:ss[.f+]]]` (or without colons) from `i`, as milliseconds into the day; its end in partEnd. */
function timeOfDay(s: string, i: number, ext: boolean): number | undefined {
  const h = d2(s, i);
  if (h < 0 || h > 23) return undefined;
  i += 2;
  let mi = 0;
  let sec = 0;
  let ms = 0;
  if (fieldFollows(s, i, ext)) {
    if (ext) i++;
    mi = d2(s, i);
    if (mi < 0 || mi > 59) return undefined;
    i += 2;
    if (fieldFollows(s, i, ext)) {
      if (ext) i++;
      sec = d2(s, i);
      if (sec < 0 || sec > 60) return undefined; // 60: leap second
      i += 2;
      const dm = s.charCodeAt(i);
      if (dm === 46 || dm === 44) {
        ms = fraction(s, i + 1);
        if (ms < 0) return undefined;
        i = partEnd;
      }
    }
  }
  partEnd = i;
  return h * 3_600_000 + mi * 60_000 + sec * 1000 + ms;
}

/** True when another field of the time begins at `at`: ':' in the extended format, a digit in the basic one. */
const fieldFollows = (s: string, at: number, ext: boolean): boolean => (ext ? s.charCodeAt(at) === 58 : isDigitCode(s.charCodeAt(at)));

/** A second's decimal fraction from `i` (at least one digit), in whole milliseconds (-1: no digit); its end in partEnd. */
function fraction(s: string, i: number): number {
  const start = i;
  let ms = 0;
  while (i < s.length && isDigitCode(s.charCodeAt(i))) {
    if (i - start < 3) ms = ms * 10 + (s.charCodeAt(i) - 48);
    i++;
  }
  partEnd = i;
  const digits = i - start;
  return digits === 0 ? -1 : digits === 1 ? ms * 100 : digits === 2 ? ms * 10 : ms;
}

/** What follows the time: nothing, `Z`/`z`, `±hh:mm`, `±hhmm` or `±hh`, and then the end; in minutes east of UTC. */
function offsetMinutes(s: string, i: number): number | undefined {
  const n = s.length;
  if (i === n) return 0;
  const c = s.charCodeAt(i);
  let offset = 0;
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
  return i === n ? offset : undefined;
}

/** True when `s` is a timestamp {@link parseTimestamp} accepts. */
export const isTimestamp = (s: unknown): s is string => parseTimestamp(s) !== undefined;

/**
 * A time an operator gives (a command's option, a credential's expiry), as epoch ms, or undefined.
 * One rule everywhere: a date alone, `YYYY-MM-DD`, is that day's start in UTC; a date-time is a
 * timestamp {@link parseTimestamp} accepts that ends with its offset (`Z`, `±hh:mm`, `±hhmm`,
 * `±hh`): without one it would be read in some zone the operator did not choose.
 */
export function parseGivenTime(s: string): number | undefined {
  if (/^\d{4}-\d{2}-\d{2}$/.test(s)) return parseTimestamp(`${s}T00:00:00Z`);
  // In a timestamp, a sign after the date can only begin its offset.
  return /(?:[zZ]|[+-]\d{2}(?::?\d{2})?)$/.test(s) ? parseTimestamp(s) : undefined;
}

/** What {@link parseGivenTime} accepts, as every command's help and error say it. */
export const GIVEN_TIME = "a date, 2026-12-01 (that day's start in UTC), or a date-time with its offset, 2026-12-01T18:00:00Z or 2026-12-01T20:00:00+02:00";

/** The refusal of a time that {@link parseGivenTime} does not accept, naming the option or field. */
export const givenTimeError = (name: string, value: string): string => `${name} must be ${GIVEN_TIME}, not ${JSON.stringify(value)}`;

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
    if (!inTime)
      r = c === 89 ? 1 : c === 77 ? 2 : c === 87 ? 3 : c === 68 ? 4 : 0; // Y M W D
    else r = c === 72 ? 5 : c === 77 ? 6 : c === 83 ? 7 : 0; // H M S
    if (r === 0 || r <= rank) return false;
    if (r === 3) week = true;
    rank = r;
    count++;
    i++;
  }
  return count > 0 && (!week || count === 1);
}
