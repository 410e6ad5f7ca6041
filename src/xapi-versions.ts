/**
 * The xAPI versions this build implements and the version strings that name each. They sit below
 * both the settings (LECTERN_XAPI_VERSIONS) and the xAPI rules (src/xapi/versions.ts, which
 * re-exports them with everything that differs between the versions), which read them both.
 */

export type XapiVersion = '1.0.3' | '2.0.0';

/** Every version Lectern implements, newest first. */
export const KNOWN_VERSIONS: readonly XapiVersion[] = ['2.0.0', '1.0.3'];

/** Strings served under 1.0.3 (`1.0`, `1.0.0` … any `1.0.x`), and under 2.0.0 (`2.0`, any `2.0.x`). */
export const NAMES_1_0 = /^1\.0(?:\.\d+)?$/;
export const NAMES_2_0 = /^2\.0(?:\.\d+)?$/;

/** The rules a version string names (a header value or a configured version), if any. */
export function versionNamed(value: string): XapiVersion | undefined {
  const v = value.trim();
  if (NAMES_2_0.test(v)) return '2.0.0';
  if (NAMES_1_0.test(v)) return '1.0.3';
  return undefined;
}

/** Parses `LECTERN_XAPI_VERSIONS`-style lists: the versions named (newest first) and the values naming none. */
export function parseServed(values: string[]): { served: XapiVersion[]; unknown: string[] } {
  const served = new Set<XapiVersion>();
  const unknown: string[] = [];
  for (const v of values) {
    const r = versionNamed(v);
    if (r) served.add(r);
    else unknown.push(v);
  }
  // Newest first, whatever order the setting lists them in.
  return { served: KNOWN_VERSIONS.filter((v) => served.has(v)), unknown };
}
