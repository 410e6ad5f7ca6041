/**
 * RFC 5646 (BCP 47) language-tag syntax check, hand-written (no regex), used for language-map
 * keys and `context.language` (xAPI-Data §2.2.s4.b2, §4.2).
 *
 *   Language-Tag = langtag / privateuse / grandfathered
 *   langtag      = language ["-" script] ["-" region] *("-" variant) *("-" extension) ["-" privateuse]
 *   language     = 2*3ALPHA ["-" extlang] / 4ALPHA / 5*8ALPHA ; extlang = 3ALPHA *2("-" 3ALPHA)
 *   script       = 4ALPHA ; region = 2ALPHA / 3DIGIT
 *   variant      = 5*8alphanum / (DIGIT 3alphanum)
 *   extension    = singleton 1*("-" (2*8alphanum))     ; singleton = alphanum except "x"
 *   privateuse   = "x" 1*("-" (1*8alphanum))
 *
 * Matching is case-insensitive, as RFC 5646 says. Beyond the grammar, duplicate variants and
 * duplicate extension singletons are rejected (RFC 5646 §2.2.5, §2.2.6). Subtags are not checked
 * against the IANA registry. The regular grandfathered tags (art-lojban, zh-min-nan, ...) already
 * match the langtag production; the irregular ones are listed below.
 */

const IRREGULAR = new Set([
  'en-gb-oed',
  'i-ami',
  'i-bnn',
  'i-default',
  'i-enochian',
  'i-hak',
  'i-klingon',
  'i-lux',
  'i-mingo',
  'i-navajo',
  'i-pwn',
  'i-tao',
  'i-tay',
  'i-tsu',
  'sgn-be-fr',
  'sgn-be-nl',
  'sgn-ch-de',
]);

const isAlphaCode = (c: number): boolean => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const isDigitCode = (c: number): boolean => c >= 48 && c <= 57;

function allAlpha(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (!isAlphaCode(s.charCodeAt(i))) return false;
  return true;
}

function allDigit(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (!isDigitCode(s.charCodeAt(i))) return false;
  return true;
}

function allAlnum(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!isAlphaCode(c) && !isDigitCode(c)) return false;
  }
  return true;
}

const isVariant = (s: string): boolean => (s.length >= 5 && s.length <= 8) || (s.length === 4 && isDigitCode(s.charCodeAt(0)));

function check(tag: string): boolean {
  const parts = tag.split('-');
  const n = parts.length;
  for (let i = 0; i < n; i++) {
    const p = parts[i];
    if (p.length === 0 || p.length > 8 || !allAlnum(p)) return false;
  }
  const lower = tag.toLowerCase();
  if (IRREGULAR.has(lower)) return true;
  const lowerParts = lower.split('-');

  let i = 0;
  if (lowerParts[0] === 'x') {
    // privateuse only
    if (n < 2) return false;
    return true; // every further part is already 1-8 alphanum
  }
  const lang = parts[0];
  if (lang.length < 2 || !allAlpha(lang)) return false;
  i = 1;
  if (lang.length <= 3) {
    for (let e = 0; e < 3 && i < n && parts[i].length === 3 && allAlpha(parts[i]); e++) i++;
  }
  if (i < n && parts[i].length === 4 && allAlpha(parts[i])) i++; // script
  if (i < n && ((parts[i].length === 2 && allAlpha(parts[i])) || (parts[i].length === 3 && allDigit(parts[i])))) i++; // region
  let variants: string[] | undefined;
  while (i < n && isVariant(parts[i])) {
    const v = lowerParts[i];
    if (variants === undefined) variants = [v];
    else if (variants.includes(v)) return false;
    else variants.push(v);
    i++;
  }
  let singletons: string | undefined;
  while (i < n && parts[i].length === 1 && lowerParts[i] !== 'x') {
    const s = lowerParts[i];
    if (singletons?.includes(s)) return false;
    singletons = (singletons ?? '') + s;
    i++;
    const start = i;
    while (i < n && parts[i].length >= 2) i++;
    if (i === start) return false;
  }
  if (i < n && lowerParts[i] === 'x') {
    i++;
    if (i === n) return false;
    i = n; // every further part is already 1-8 alphanum
  }
  return i === n;
}

const cache = new Map<string, boolean>();

/** True when `tag` is a well-formed RFC 5646 language tag (e.g. `en`, `en-US`, `zh-Hant-TW`, `i-klingon`). */
export function isLanguageTag(tag: unknown): tag is string {
  if (typeof tag !== 'string') return false;
  const hit = cache.get(tag);
  if (hit !== undefined) return hit;
  const ok = tag.length > 0 && tag.length <= 255 && check(tag);
  if (cache.size >= 1024) cache.clear();
  cache.set(tag, ok);
  return ok;
}
