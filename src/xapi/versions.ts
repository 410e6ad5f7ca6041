/**
 * xAPI versions: which ones Lectern speaks, how a request's `X-Experience-API-Version` maps to the
 * rules it is served under, what the response says, and what differs between them. Every other
 * module receives the negotiated version as an argument and asks here (or branches on it); there is
 * no copy of any rule set per version.
 *
 * - `1.0.3`: xAPI 1.0.3 (the ADL text); requests saying `1.0`, `1.0.0` … `1.0.3` (any `1.0.x`).
 * - `2.0.0`: IEEE 9274.1.1-2023 (xAPI 2.0); requests saying `2.0` or `2.0.0` (any `2.0.x`).
 */
import { LrsError } from '../errors.ts';
import { KNOWN_VERSIONS, NAMES_1_0, NAMES_2_0, parseServed, versionNamed, type XapiVersion } from '../xapi-versions.ts';

// Below the settings, which read them too (see src/xapi-versions.ts).
export { KNOWN_VERSIONS, parseServed, type XapiVersion };

/** The served version a header names, if it names one. */
export function namedVersion(header: string | undefined, served: readonly XapiVersion[]): XapiVersion | undefined {
  const v = header === undefined ? undefined : versionNamed(header);
  return v !== undefined && served.includes(v) ? v : undefined;
}

/**
 * The version a request is served under, from its X-Experience-API-Version header (Communication
 * §3.3 / 9274.1.1 §4.1.2): 400 when it is missing or names a version this server does not serve.
 */
export function negotiate(header: string | undefined, served: readonly XapiVersion[]): XapiVersion {
  const list = served.join(', ');
  if (header === undefined || header.trim() === '') {
    throw new LrsError('bad_request', `the X-Experience-API-Version header is required (this LRS serves ${list})`);
  }
  const v = namedVersion(header, served);
  if (v === undefined) {
    throw new LrsError('bad_request', `X-Experience-API-Version ${JSON.stringify(header)} is not supported: send one of ${list}`);
  }
  return v;
}

/**
 * The X-Experience-API-Version of a response: the negotiated version; for a request that named
 * none this server serves (an error, /about, heartbeats) the newest one served. The two ADL suites
 * disagree here (each expects its own version): see docs/conformance.md.
 */
export const responseVersion = (negotiated: XapiVersion | undefined, served: readonly XapiVersion[]): XapiVersion => negotiated ?? served[0] ?? '1.0.3';

/** The About resource's `version` list (every version string the server accepts), newest first. */
export function aboutVersions(served: readonly XapiVersion[]): string[] {
  const out: string[] = [];
  if (served.includes('2.0.0')) out.push('2.0.0');
  if (served.includes('1.0.3')) out.push('1.0.3', '1.0.2', '1.0.1', '1.0.0');
  return out;
}

export const is2 = (v: XapiVersion): boolean => v === '2.0.0';

/** The statement `version` the LRS sets when a statement arrives without one. */
export const defaultStatementVersion = (v: XapiVersion): string => (is2(v) ? '2.0.0' : '1.0.0');

/** Whether a statement's own `version` property is acceptable under request version `v`. */
export const acceptsStatementVersion = (v: XapiVersion, value: string): boolean => NAMES_1_0.test(value) || (is2(v) && NAMES_2_0.test(value));

/** The `version` values a statement may carry under `v`, for error messages. */
export const statementVersionHint = (v: XapiVersion): string => (is2(v) ? '1.0.x or 2.0.x' : '1.0.x');

/** True for a statement `version` written by a 2.0 client (or set by this LRS under 2.0). */
const isVersion2Statement = (value: string | undefined): boolean => value !== undefined && NAMES_2_0.test(value);

/** What only 2.0 statements have: context agents or groups, in the statement or its SubStatement. */
const CONTEXT_2_0 = /"context(?:Agents|Groups)"\s*:/;

/**
 * True for a statement written under 2.0: its `version` says 2.0.x, or it carries what only 2.0
 * has (a 2.0 request may send `"version": "1.0.0"` with contextAgents). Forwarding, strict-version
 * reads and imports ask this.
 */
export function writtenUnder2(statement: unknown): boolean {
  if (typeof statement !== 'object' || statement === null) return false;
  const s = statement as { version?: unknown; context?: object; object?: { context?: object } };
  if (typeof s.version === 'string' && isVersion2Statement(s.version)) return true;
  const has = (c: object | undefined) => c !== undefined && c !== null && ('contextAgents' in c || 'contextGroups' in c);
  return has(s.context) || has(s.object?.context);
}

/** The same test on a statement's stored JSON text, without parsing it unless it may say so. */
export const textWrittenUnder2 = (json: string): boolean => (json.includes('"version":"2.0') || CONTEXT_2_0.test(json)) && writtenUnder2(JSON.parse(json));

/**
 * The rules a statement that arrives without a request (an import, a rewrite) is read under: 2.0
 * when it was written under 2.0 (writtenUnder2), otherwise 1.0.3.
 */
export const statementRules = (statement: unknown): XapiVersion => (writtenUnder2(statement) ? '2.0.0' : '1.0.3');
