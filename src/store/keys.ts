/**
 * A store's own verbs, activities and agents, found in its keys dictionary (the `keys` table: every
 * verb, activity IRI and agent key its statements name), never by reading the statements: what the
 * console suggests as an operator types a filter, and the names it shows beside the IRIs
 * (docs/console.md, "Suggestions"). Each kind is told apart without a link table: agents by their
 * key's prefix (src/xapi/agents.ts, ifiKey), verbs as the store's counted verbs (the Overview's
 * `statement_counts`), activities as the other keys. The names come from the canonical definition
 * (activities) or from the newest statement naming the key (a verb's display, an agent's name),
 * one index probe each; that statement is read only when it is small (NAMED_STATEMENT_BYTES).
 * A search walks the keys in steps (KEYS_CHUNK), so that it never holds SQLite's one connection
 * and the event loop for the whole dictionary.
 */
import type { Actor } from '../xapi/types.ts';
import { ifiKey } from '../xapi/agents.ts';
import { type Program, row, rows } from './program.ts';
import type { KeyMatch, KeyQuery } from './types.ts';

/** The largest statement whose JSON is read for a name: a larger one leaves the key unnamed. */
export const NAMED_STATEMENT_BYTES = 64 * 1024;

/** The most keys one query answers. */
export const KEYS_MAX = 50;

/** What the keys' reads do differently on a backend. */
export interface KeysDialect {
  /** The bytes of statement `alias`'s JSON (QueryDialect.fullBytes). */
  fullBytes(alias: string): string;
  /** The seq of the newest statement whose actor or object (or a member of theirs) is key row `k`, in tenant `tenant` (a placeholder). */
  newestWithAgent(k: string, tenant: string): string;
  /** Whether key row `k`'s key matches the LIKE `pattern` (a placeholder; lower-case), ignoring case. */
  likeIgnoringCase(k: string, pattern: string): string;
  /**
   * The `name` (JSON text) of key row `k`'s canonical activity definition; `tenantName` gives a
   * placeholder of the tenant's name, when the backend needs it (every value given is used).
   */
  activityName(k: string, tenantName: () => string): string;
}

const AGENT_PREFIXES = ['mbox:', 'mbox_sha1sum:', 'openid:', 'account:'];
/** Whether key row `k` is an agent's key (its prefix, compared exactly: LIKE would read `_` as a wildcard). */
const isAgentKey = (k: string): string => `(${AGENT_PREFIXES.map((p) => `substr(${k}.key, 1, ${p.length}) = '${p}'`).join(' OR ')})`;

/** `text` as a LIKE pattern matching it anywhere, its own `%`, `_` and `\` taken literally. */
const containing = (text: string): string => `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** The JSON text of a column read by name (SQLite and PostgreSQL both spell `->` and CAST alike). */
const jsonText = (column: string, ...path: string[]): string => `CAST(${column}${path.map((p) => ` -> '${p}'`).join('')} AS text)`;

/** A parsed JSON text, or undefined (absent, or not JSON). */
function parsed(v: unknown): unknown {
  if (typeof v !== 'string') return v ?? undefined;
  try {
    return JSON.parse(v) as unknown;
  } catch {
    return undefined;
  }
}

/** A language map's entries that are strings, or undefined when it has none. */
function languageMap(v: unknown): Record<string, string> | undefined {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const out = Object.fromEntries(Object.entries(v).filter(([, s]) => typeof s === 'string')) as Record<string, string>;
  return Object.keys(out).length ? out : undefined;
}

/** The name of the agent of `key` among an actor and an object (either may be a Group whose member it is). */
function agentName(key: string, ...actors: unknown[]): string | undefined {
  for (const a of actors) {
    if (!a || typeof a !== 'object') continue;
    const actor = a as Actor & { member?: unknown };
    const candidates = [actor, ...(Array.isArray(actor.member) ? (actor.member as Actor[]) : [])];
    for (const c of candidates) if (c && typeof c === 'object' && ifiKey(c) === key && typeof c.name === 'string') return c.name;
  }
  return undefined;
}

const named = (key: string, display: Record<string, string> | undefined): KeyMatch => (display ? { key, display } : { key });

/** Keys one step of a search reads: between two steps the event loop is given back (SQLite reads on it). */
export const KEYS_CHUNK = 10_000;

/** The keys of `kind` matching `match` (a condition on key row `k`), among `range` of the tenant's keys in key order, each with its name. */
function* matching(d: KeysDialect, tenant: { id: unknown; name: string }, q: KeyQuery, limit: number, range: { after?: string; upper?: string }): Program<KeyMatch[]> {
  const values: unknown[] = [];
  const add = (v: unknown) => `$${values.push(v)}`;
  const id = add(tenant.id);
  const conds = [
    q.keys ? `k.key IN (${q.keys.map(add).join(', ')})` : d.likeIgnoringCase('k', add(containing(q.contains ?? ''))),
    ...(range.after === undefined ? [] : [`k.key > ${add(range.after)}`]),
    ...(range.upper === undefined ? [] : [`k.key <= ${add(range.upper)}`]),
  ].join(' AND ');
  const last = add(limit);
  const small = (alias: string) => `${d.fullBytes(alias)} <= ${NAMED_STATEMENT_BYTES}`;
  const counted = `(SELECT DISTINCT verb FROM statement_counts WHERE tenant = ${id})`;
  if (q.kind === 'verb') {
    // From the store's counted verbs (a few rows per day), not from every key.
    const display = `(SELECT CASE WHEN ${small('s')} THEN ${jsonText('s.full', 'verb', 'display')} END FROM statements s WHERE s.tenant = ${id} AND s.verb = k.id ORDER BY s.seq DESC LIMIT 1)`;
    const found = yield* rows({ text: `SELECT k.key, ${display} AS name FROM ${counted} c JOIN keys k ON k.id = c.verb WHERE ${conds} ORDER BY k.key LIMIT ${last}`, values });
    return found.map((r) => named(String(r.key), languageMap(parsed(r.name))));
  }
  if (q.kind === 'activity') {
    const name = d.activityName('k', () => add(tenant.name));
    const found = yield* rows({
      text: `SELECT k.key, ${name} AS name FROM keys k WHERE k.tenant = ${id} AND ${conds} AND NOT ${isAgentKey('k')} AND k.id NOT IN ${counted} ORDER BY k.key LIMIT ${last}`,
      values,
    });
    return found.map((r) => named(String(r.key), languageMap(parsed(r.name))));
  }
  const keysFound = `SELECT k.key, ${d.newestWithAgent('k', id)} AS seq FROM keys k WHERE k.tenant = ${id} AND ${conds} AND ${isAgentKey('k')} ORDER BY k.key LIMIT ${last}`;
  const found = yield* rows({
    text:
      `SELECT m.key, CASE WHEN ${small('s')} THEN ${jsonText('s.full', 'actor')} END AS actor, CASE WHEN ${small('s')} THEN ${jsonText('s.full', 'object')} END AS object ` +
      `FROM (${keysFound}) m LEFT JOIN statements s ON s.seq = m.seq ORDER BY m.key`,
    values,
  });
  return found.map((r) => {
    const key = String(r.key);
    const name = agentName(key, parsed(r.actor), parsed(r.object));
    return { key, ...(name !== undefined && { name }) };
  });
}

/** The KEYS_CHUNK-th of the tenant's keys after `after`, in key order: where a step of a search ends (undefined: the last step). */
function* chunkEnd(tenantId: unknown, after: string | undefined): Program<string | undefined> {
  const r =
    after === undefined
      ? yield* row({ text: `SELECT key FROM keys WHERE tenant = $1 ORDER BY key LIMIT 1 OFFSET ${KEYS_CHUNK - 1}`, values: [tenantId] })
      : yield* row({ text: `SELECT key FROM keys WHERE tenant = $1 AND key > $2 ORDER BY key LIMIT 1 OFFSET ${KEYS_CHUNK - 1}`, values: [tenantId, after] });
  return r ? String(r.key) : undefined;
}

/**
 * The store's verbs, activities or agents whose key contains `q.contains` (ignoring case), or
 * those among `q.keys`, by key, each with its name. Verbs are read from the counted verbs and
 * exact keys probed at once; a search of activities or agents walks the store's keys KEYS_CHUNK
 * at a time, each step a program of its own (`run`), until it has `q.limit` or has read them all.
 */
export async function findKeys(run: <T>(p: Program<T>) => Promise<T>, d: KeysDialect, tenant: string, q: KeyQuery): Promise<KeyMatch[]> {
  const t = await run(row({ text: 'SELECT id FROM tenants WHERE name = $1', values: [tenant] }));
  if (!t || (q.keys && !q.keys.length)) return [];
  const limit = Math.min(Math.max(1, q.limit), KEYS_MAX);
  const self = { id: t.id, name: tenant };
  if (q.kind === 'verb' || q.keys) return run(matching(d, self, q, limit, {}));
  const out: KeyMatch[] = [];
  for (let after: string | undefined; ; ) {
    const upper = await run(chunkEnd(t.id, after));
    out.push(...(await run(matching(d, self, q, limit - out.length, { after, upper }))));
    if (out.length >= limit || upper === undefined) return out;
    after = upper;
    await new Promise((resolve) => setImmediate(resolve));
  }
}
