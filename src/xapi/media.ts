/**
 * Content-Type values (RFC 7231 §3.1.1.1, RFC 2045 §5.1): the one parser every layer uses, for
 * statement bodies, multipart parts, documents, attachments and the alternate request syntax.
 */
import { LrsError } from '../errors.ts';

/**
 * Splits a Content-Type value into its lower-cased `type/subtype` and its parameters (names
 * lower-cased, quoted-string values unquoted). Lenient about whitespace; throws on a quoted string
 * that never closes.
 */
export function parseContentType(value: string): { mediaType: string; params: Record<string, string> } {
  const semi = value.indexOf(';');
  const mediaType = (semi === -1 ? value : value.slice(0, semi)).trim().toLowerCase();
  const params: Record<string, string> = {};
  let i = semi === -1 ? value.length : semi + 1;
  while (i < value.length) {
    // name
    while (i < value.length && (value[i] === ' ' || value[i] === '\t' || value[i] === ';')) i++;
    const eq = value.indexOf('=', i);
    const nextSemi = value.indexOf(';', i);
    if (eq === -1 || (nextSemi !== -1 && nextSemi < eq)) {
      // a parameter without a value: skip it
      i = nextSemi === -1 ? value.length : nextSemi + 1;
      continue;
    }
    const name = value.slice(i, eq).trim().toLowerCase();
    i = eq + 1;
    while (i < value.length && (value[i] === ' ' || value[i] === '\t')) i++;
    let val: string;
    if (value[i] === '"') {
      val = '';
      i++;
      let closed = false;
      while (i < value.length) {
        const c = value[i];
        if (c === '\\' && i + 1 < value.length) {
          val += value[i + 1];
          i += 2;
        } else if (c === '"') {
          closed = true;
          i++;
          break;
        } else {
          val += c;
          i++;
        }
      }
      if (!closed) throw new LrsError('bad_request', `Content-Type parameter "${name}" has an unterminated quoted string`);
      const after = value.indexOf(';', i);
      i = after === -1 ? value.length : after + 1;
    } else {
      const end = value.indexOf(';', i);
      val = (end === -1 ? value.slice(i) : value.slice(i, end)).trim();
      i = end === -1 ? value.length : end + 1;
    }
    if (name !== '' && !(name in params)) params[name] = val;
  }
  return { mediaType, params };
}

/** The lower-cased `type/subtype` of a Content-Type value, parameters dropped ('' when absent). */
export function mediaTypeOf(contentType: string | undefined): string {
  if (contentType === undefined) return '';
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

export const isJsonType = (contentType: string | undefined): boolean => mediaTypeOf(contentType) === 'application/json';
