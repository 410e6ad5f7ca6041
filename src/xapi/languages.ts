/**
 * Accept-Language (RFC 2616 §14.4) and the choice of one language per language map that
 * `format=canonical` makes (xAPI-Communication §2.1.3.s4.b5). Pure.
 *
 * A request's ranges are read once into a tree of subtags (`languagePreferences`), so that
 * choosing a map's language costs O(its keys' length) whatever the header holds: compared
 * range by range, a long header multiplied every key of every map of a statement.
 */
import type { LanguageMap } from './types.ts';

export interface LanguageRange {
  /** Lower-cased language range, or `*`. */
  range: string;
  q: number;
}

/**
 * Ranges of one header used at most, the first ones (browsers send fewer than ten): the others
 * are ignored, as malformed ones are.
 */
export const ACCEPT_LANGUAGE_MAX_RANGES = 32;

const RANGE = /^(?:\*|[a-z]{1,8}(?:-[a-z0-9]{1,8})*)$/;
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

/**
 * Parses an Accept-Language header into its first ACCEPT_LANGUAGE_MAX_RANGES well-formed
 * ranges; malformed entries are skipped (a header is no reason to fail).
 */
export function parseAcceptLanguage(header: string | undefined): LanguageRange[] {
  if (!header) return [];
  const out: LanguageRange[] = [];
  for (const item of header.split(',')) {
    if (out.length >= ACCEPT_LANGUAGE_MAX_RANGES) break;
    const [rawRange, ...params] = item.split(';');
    const range = rawRange.trim().toLowerCase();
    if (!RANGE.test(range)) continue;
    let q = 1;
    let ok = true;
    for (const p of params) {
      const m = /^\s*q\s*=\s*(\S+)\s*$/i.exec(p);
      if (!m) continue; // accept-extensions carry no meaning here
      if (QVALUE.test(m[1])) q = Number(m[1]);
      else ok = false;
    }
    if (ok) out.push({ range, q });
  }
  return out;
}

/** A range's quality and its position among the header's specific (non-`*`) ranges: earlier wins a tie. */
interface Rank {
  q: number;
  index: number;
}

/** One subtag of the ranges' tree: the range ending here, if any, and the longer ones. */
interface RangeNode {
  rank?: Rank;
  next?: Map<string, RangeNode>;
}

/** A request's Accept-Language, read once for every map of its response. */
export interface LanguagePreferences {
  /** The specific ranges by subtag. */
  readonly tree: RangeNode;
  /** Per primary language, the best rank above q=0 of the ranges with it. */
  readonly primaries: ReadonlyMap<string, Rank>;
  /** `*;q=0`: keys no range names are excluded. */
  readonly starRefuses: boolean;
}

const better = (a: Rank, b: Rank | undefined): boolean => !b || a.q > b.q || (a.q === b.q && a.index < b.index);
const primaryOf = (tag: string): string => {
  const dash = tag.indexOf('-');
  return dash < 0 ? tag : tag.slice(0, dash);
};

/** Reads `ranges` (the parsed header) once: O(their length). */
export function languagePreferences(ranges: readonly LanguageRange[]): LanguagePreferences {
  const tree: RangeNode = {};
  const primaries = new Map<string, Rank>();
  let star: LanguageRange | undefined;
  let index = 0;
  for (const r of ranges) {
    if (r.range === '*') {
      star ??= r;
      continue;
    }
    const rank = { q: r.q, index: index++ };
    let node = tree;
    for (const subtag of r.range.split('-')) {
      node.next ??= new Map();
      let child = node.next.get(subtag);
      if (!child) node.next.set(subtag, (child = {}));
      node = child;
    }
    // The same range twice: the first one counts.
    node.rank ??= rank;
    const primary = primaryOf(r.range);
    if (rank.q > 0 && better(rank, primaries.get(primary))) primaries.set(primary, rank);
  }
  return { tree, primaries, starRefuses: star?.q === 0 };
}

/** The rank of the longest range equal to `tag` or a prefix of it at a `-`: one walk down the tree. */
function longestMatch(tag: string, tree: RangeNode): Rank | undefined {
  let node = tree;
  let found: Rank | undefined;
  for (let start = 0; ; ) {
    const dash = tag.indexOf('-', start);
    const child = node.next?.get(dash < 0 ? tag.slice(start) : tag.slice(start, dash));
    if (!child) return found;
    node = child;
    if (node.rank) found = node.rank;
    if (dash < 0) return found;
    start = dash + 1;
  }
}

/**
 * Reduces a language map to the one entry the client prefers (§2.1.3.s4.b5: Accept-Language
 * applied to each map on its own), in this order:
 * 1. RFC 2616 matching: a key's quality is that of the longest range equal to it or a prefix of it
 *    at a `-`; the best quality above 0 wins (ties: the range listed first, then map order);
 * 2. the same primary language (`en-US` accepted, only `en-GB` or `en` available), even when
 *    `*;q=0` refuses everything else: a close language beats an arbitrary one;
 * 3. `und`, then the first entry: the client gets one language whatever it asked for.
 * Keys given q=0 are only chosen when nothing else is left.
 */
export function pickLanguage(map: LanguageMap, prefs: LanguagePreferences): LanguageMap {
  return pickAmong(map, Object.keys(map), prefs);
}

/** pickLanguage with the map's keys already listed (its cost is theirs: the caller counts them). */
export function pickAmong(map: LanguageMap, keys: readonly string[], prefs: LanguagePreferences): LanguageMap {
  if (keys.length <= 1) return { ...map };
  const one = (key: string): LanguageMap => ({ [key]: map[key] });
  const tags = keys.map((k) => k.toLowerCase());
  // q=0 for a key: by a range naming it (never chosen while anything else is left), or by `*`.
  const refused = new Array<boolean>(keys.length).fill(false);
  const excluded = new Array<boolean>(keys.length).fill(false);

  let exact: { key: string; rank: Rank } | undefined;
  for (let i = 0; i < keys.length; i++) {
    const rank = longestMatch(tags[i], prefs.tree);
    if (!rank) excluded[i] = prefs.starRefuses;
    else if (rank.q === 0) refused[i] = excluded[i] = true;
    else if (better(rank, exact?.rank)) exact = { key: keys[i], rank };
  }
  if (exact) return one(exact.key);

  let close: { key: string; rank: Rank } | undefined;
  for (let i = 0; i < keys.length; i++) {
    const rank = refused[i] ? undefined : prefs.primaries.get(primaryOf(tags[i]));
    if (rank && better(rank, close?.rank)) close = { key: keys[i], rank };
  }
  if (close) return one(close.key);

  let fallback: string | undefined;
  for (let i = 0; i < keys.length; i++) {
    if (excluded[i]) continue;
    if (tags[i] === 'und') return one(keys[i]);
    fallback ??= keys[i];
  }
  return one(fallback ?? keys[0]);
}
