/**
 * The PostgreSQL statement write's SQL and its parameters: the read a group's decisions rest on
 * (INSERT_READ), the dictionary ids (RESOLVE_KEYS, resolveKeys), the one statement that writes a
 * group (INSERT_WRITE), whose parameters are named (W) and filled from a record (writeValues).
 */
import { mergeDefinition } from '../../xapi/activity.ts';
import type { InsertPlan } from '../../xapi/insert.ts';
import type { ActivityDefinition } from '../../xapi/types.ts';
import { type Program, rows } from '../program.ts';
import { FOLD_TO, MINUTES_KEPT, OTHER_VERB, VERBS_PER_DAY } from '../overview.ts';
import { isVoidingValue } from '../sql.ts';

/** The database clock in epoch milliseconds (every process sharing the database agrees on it). */
export const NOW_MS = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

/**
 * Numbered placeholders by name: `ph.x` is `$n`, n the position of `x` in `names`, and `values`
 * lays a record of every name's value out in that order (the statement's text is the same as
 * with `$n` written by hand; the names keep a long parameter list readable).
 */
export function namedParams<const N extends readonly string[]>(names: N): { ph: Record<N[number], string>; values(v: Record<N[number], unknown>): unknown[] } {
  const ph = Object.fromEntries(names.map((n, i) => [n, `$${i + 1}`])) as Record<N[number], string>;
  return { ph, values: (v) => names.map((n: N[number]) => v[n]) };
}

/** INSERT_WRITE's parameters, in the order of their numbers. */
const WRITE_PARAMS = namedParams([
  'tenant',
  'storedMs',
  'count',
  'ids',
  'verbs',
  'registrations',
  'refs',
  'isVoiding',
  'voided',
  'authorities',
  'fulls',
  'agentKeys',
  'agentOrdinals',
  'agentRoles',
  'activityKeys',
  'activityOrdinals',
  'activityDirect',
  'linkOrdinals',
  'linkHashes',
  'voids',
  'definitionIds',
  'definitions',
  'blobHashes',
  'blobTypes',
  'blobContents',
  'snapSeq',
  'checkIds',
  'reliedSeqs',
  'reliedXmins',
  'defIds',
  'keptDefIds',
  'keptDefXmins',
  'tenantName',
  'epoch',
  'flightDefIds',
  'flightDefTexts',
  'carriers',
  'violationOrdinals',
  'violations',
] as const);
const W = WRITE_PARAMS.ph;

/**
 * INSERT_WRITE's Overview counts (src/store/overview.ts): one upsert per verb of the group (one
 * day: one stored), one for its minute, the minutes gone by deleted. The day's verb rows (at most
 * VERBS_PER_DAY) are read with what the group adds to each (cd); when the group's new verbs do not
 * fit, the day is folded (cr ranks the rows and the new verbs, as fold() does): the FOLD_TO
 * heaviest keep or get a row, the others' rows go (cx) and their statements are added to "other".
 */
const DAY = `(${W.storedMs}::bigint / 86400000)::int`;
const COUNTS = `cg AS (SELECT v AS verb, count(*) AS n FROM unnest(${W.verbs}::int[]) AS t(v) WHERE (SELECT ok FROM ok) GROUP BY v),
cd AS (SELECT c.verb, c.n + coalesce(g.n, 0) AS n, true AS held FROM statement_counts c LEFT JOIN cg g ON g.verb = c.verb
  WHERE c.tenant = ${W.tenant} AND c.day = ${DAY} AND c.verb > 0
  UNION ALL SELECT g.verb, g.n, false FROM cg g
  WHERE NOT EXISTS (SELECT 1 FROM statement_counts c WHERE c.tenant = ${W.tenant} AND c.day = ${DAY} AND c.verb = g.verb)),
cr AS (SELECT verb, n, held, count(*) OVER () > ${VERBS_PER_DAY} AND row_number() OVER (ORDER BY n DESC, verb) > ${FOLD_TO} AS folded FROM cd),
cn AS (INSERT INTO statement_counts (tenant, day, verb, n)
  SELECT ${W.tenant}, ${DAY}, g.verb, g.n FROM cg g JOIN cr ON cr.verb = g.verb AND NOT cr.folded
  UNION ALL SELECT ${W.tenant}, ${DAY}, ${OTHER_VERB}, sum(n) FROM cr WHERE folded HAVING count(*) > 0
  ON CONFLICT (tenant, day, verb) DO UPDATE SET n = statement_counts.n + excluded.n),
cx AS (DELETE FROM statement_counts c USING cr WHERE cr.folded AND cr.held AND c.tenant = ${W.tenant} AND c.day = ${DAY} AND c.verb = cr.verb)`;

/**
 * Every write of a statement batch in one statement (data-modifying CTEs), each table fed by
 * unnest() of arrays: a fixed parameter count whatever the batch size. Voiding updates only rows
 * stored earlier (the batch's own rows are inserted with their voided flag already set).
 *
 * The group was decided on a snapshot read before the tenant lock (see insertGroup); `ok` checks,
 * under the lock, that nothing the decisions rested on has changed since: no row of the tenant
 * committed after the snapshot (seq > snapSeq) with one of the group's ids or voiding one of them, the
 * rows that were read unchanged (xmin), the activity definitions unchanged (xmin; those the group
 * before it was writing, by their text: see DefinitionsInFlight), `stored` not behind the
 * tenant's last. When it fails nothing is written and the group is decided again under the
 * lock. `seq` is taken here, under the lock, in statement order: the link rows name their
 * statement by its ordinal in the group.
 *
 * Arrays are joined as unnest() rows, one index probe each, never matched by `= ANY($n)`: the
 * group's transaction runs generic plans (groupBegin), and a generic plan matched `id = ANY($30)` (defIds)
 * by reading every activity of the tenant (8,195 rows for 30 ids: 5.8 ms under the tenant lock).
 * Each probe is a LATERAL subquery fenced by LIMIT (OFFSET 0 where several rows may match):
 * joined plainly, generic plans read the tenant's whole ref_id index, or merge-joined the ids
 * with the tenant's whole activities index.
 */
export const INSERT_WRITE = `WITH
ok AS (SELECT
    NOT EXISTS (SELECT 1 FROM unnest(${W.checkIds}::uuid[]) AS q(id) CROSS JOIN LATERAL (SELECT 1 FROM statements WHERE tenant = ${W.tenant} AND id = q.id AND seq > ${W.snapSeq}::bigint LIMIT 1) s)
    AND NOT EXISTS (SELECT 1 FROM unnest(${W.checkIds}::uuid[]) AS q(id) CROSS JOIN LATERAL (SELECT 1 FROM statements
      WHERE tenant = ${W.tenant} AND ref_id = q.id AND is_voiding <> 0 AND seq > ${W.snapSeq}::bigint LIMIT 1) s)
    AND coalesce((SELECT stored_ms FROM statements WHERE tenant = ${W.tenant} ORDER BY tenant DESC, seq DESC LIMIT 1), 0) <= ${W.storedMs}::bigint
    AND (SELECT count(*) FROM unnest(${W.reliedSeqs}::bigint[], ${W.reliedXmins}::text[]) AS r(q, x) JOIN statements s ON s.seq = r.q AND s.xmin::text = r.x) = cardinality(${W.reliedSeqs}::bigint[])
    AND (SELECT count(*) FROM (SELECT DISTINCT unnest(${W.defIds}::text[])) AS q(id) CROSS JOIN LATERAL (SELECT 1 FROM activities WHERE tenant = ${W.tenantName} AND id = q.id LIMIT 1) a)
      = cardinality(${W.keptDefIds}::text[]) + cardinality(${W.flightDefIds}::text[])
    AND (SELECT count(*) FROM unnest(${W.keptDefIds}::text[], ${W.keptDefXmins}::text[]) AS k(i, x) JOIN activities a ON a.tenant = ${W.tenantName} AND a.id = k.i AND a.xmin::text = k.x) = cardinality(${W.keptDefIds}::text[])
    AND (SELECT count(*) FROM unnest(${W.flightDefIds}::text[], ${W.flightDefTexts}::text[]) AS k(i, x) JOIN activities a ON a.tenant = ${W.tenantName} AND a.id = k.i AND a.definition::text = k.x) = cardinality(${W.flightDefIds}::text[])
    AND (SELECT n FROM keys_epoch) = ${W.epoch}::bigint
    AS ok),
sq AS (SELECT n, nextval('statements_seq') AS seq FROM generate_series(1, ${W.count}::int) AS n WHERE (SELECT ok FROM ok)),
st AS (INSERT INTO statements (seq, tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority, "full", full_bytes)
  SELECT sq.seq, ${W.tenant}, i, ${W.storedMs}::bigint, v, r, ref, iv, vd, a, f, octet_length(f::text)
  FROM ROWS FROM (unnest(${W.ids}::uuid[]), unnest(${W.verbs}::int[]), unnest(${W.registrations}::uuid[]), unnest(${W.refs}::uuid[]), unnest(${W.isVoiding}::smallint[]), unnest(${W.voided}::smallint[]),
    unnest(${W.authorities}::int[]), json_array_elements(${W.fulls}::json)) WITH ORDINALITY AS t(i, v, r, ref, iv, vd, a, f, n) JOIN sq USING (n)),
ag AS (INSERT INTO statement_agents (agent, role, seq) SELECT k, d, sq.seq FROM unnest(${W.agentKeys}::int[], ${W.agentOrdinals}::int[], ${W.agentRoles}::smallint[]) AS t(k, n, d) JOIN sq USING (n)),
ac AS (INSERT INTO statement_activities (activity, direct, seq) SELECT k, d, sq.seq FROM unnest(${W.activityKeys}::int[], ${W.activityOrdinals}::int[], ${W.activityDirect}::smallint[]) AS t(k, n, d) JOIN sq USING (n)),
sa AS (INSERT INTO statement_attachments (seq, sha2, carrier) SELECT sq.seq, h, cr FROM unnest(${W.linkOrdinals}::int[], ${W.linkHashes}::text[], ${W.carriers}::int[]) AS t(n, h, cr) JOIN sq USING (n) ON CONFLICT DO NOTHING),
vi AS (INSERT INTO statement_violations (seq, violations) SELECT sq.seq, x FROM ROWS FROM (unnest(${W.violationOrdinals}::int[]), json_array_elements(${W.violations}::json)) AS t(n, x) JOIN sq USING (n)),
vo AS (UPDATE statements s SET voided = 1
  FROM (SELECT DISTINCT x.seq FROM unnest(${W.voids}::uuid[]) AS q(id) CROSS JOIN LATERAL (SELECT seq FROM statements WHERE tenant = ${W.tenant} AND id = q.id LIMIT 1) x) v
  WHERE s.seq = v.seq AND s.is_voiding = 0 AND s.voided = 0 AND (SELECT ok FROM ok)),
de AS (INSERT INTO activities (tenant, id, definition) SELECT ${W.tenantName}, i, d FROM ROWS FROM (unnest(${W.definitionIds}::text[]), json_array_elements(${W.definitions}::json)) AS t(i, d)
  WHERE (SELECT ok FROM ok) ON CONFLICT (tenant, id) DO UPDATE SET definition = excluded.definition),
${COUNTS},
mi AS (INSERT INTO statement_minutes (tenant, minute, n)
  SELECT ${W.tenant}, (${W.storedMs}::bigint / 60000)::int, ${W.count}::int WHERE (SELECT ok FROM ok) AND ${W.count}::int > 0
  ON CONFLICT (tenant, minute) DO UPDATE SET n = statement_minutes.n + excluded.n),
mg AS (DELETE FROM statement_minutes WHERE tenant = ${W.tenant} AND minute < (${W.storedMs}::bigint / 60000)::int - ${MINUTES_KEPT}),
at AS (INSERT INTO attachments (tenant, sha2, content_type, length, content)
  SELECT ${W.tenantName}, h, ct, octet_length(b), b FROM unnest(${W.blobHashes}::text[], ${W.blobTypes}::text[], ${W.blobContents}::bytea[]) AS t(h, ct, b) WHERE (SELECT ok FROM ok) ON CONFLICT DO NOTHING)
SELECT (SELECT ok FROM ok) AS ok, ARRAY(SELECT seq FROM sq ORDER BY n) AS seqs,
  -- Statements stored earlier that target a new one: they reach it now (src/store/reach.ts).
  ARRAY(SELECT s.seq FROM unnest(${W.ids}::uuid[]) AS q(id) CROSS JOIN LATERAL (SELECT seq FROM statements WHERE tenant = ${W.tenant} AND ref_id = q.id OFFSET 0) s
    WHERE (SELECT ok FROM ok)) AS referrers`;

/**
 * The read a group's decisions rest on, in one statement (one snapshot): the tenant's last row
 * (the snapshot's seq, and `stored`, which never goes backwards), stored voiding statements that
 * target the group's ids, the rows stored under its ids (and its voiding targets), the kept
 * definitions; with seq and xmin of what was found, for the check in INSERT_WRITE.
 */
export const INSERT_READ =
  'WITH last AS (SELECT seq, stored_ms FROM statements WHERE tenant = $1 ORDER BY tenant DESC, seq DESC LIMIT 1) ' +
  `SELECT greatest(${NOW_MS}, coalesce((SELECT stored_ms FROM last), 0)) AS stored_ms, coalesce((SELECT seq FROM last), 0) AS snap_seq, ` +
  // A voiding statement that arrived before its target may void it on arrival (by its writer: planInsert).
  '(SELECT json_agg(json_build_array(s.ref_id, s.seq::text, s.xmin::text, s.is_voiding, (SELECT key FROM keys WHERE id = s.authority))) FROM (SELECT DISTINCT unnest($2::uuid[])) AS q(id) ' +
  'CROSS JOIN LATERAL (SELECT ref_id, seq, xmin, is_voiding, authority FROM statements WHERE tenant = $1 AND ref_id = q.id AND is_voiding <> 0 OFFSET 0) s) AS voided_earlier, ' +
  // One statements_id probe per id (LIMIT 1 keeps the lateral join a nested loop): with the
  // statistics of a growing table, a plan on the tenant alone walked every row of the tenant.
  '(SELECT json_agg(json_build_array(s.id, s.is_voiding, s."full", s.seq::text, s.xmin::text)) FROM unnest($3::uuid[]) AS q(id) ' +
  'CROSS JOIN LATERAL (SELECT id, is_voiding, "full", seq, xmin FROM statements WHERE tenant = $1 AND id = q.id LIMIT 1) s) AS known, ' +
  '(SELECT json_agg(json_build_array(a.id, a.definition, a.xmin::text)) FROM (SELECT DISTINCT unnest($4::text[])) AS q(id) ' +
  'CROSS JOIN LATERAL (SELECT id, definition, xmin FROM activities WHERE tenant = $5 AND id = q.id LIMIT 1) a) AS definitions';

/**
 * The dictionary ids of a tenant's keys, created where missing, and `keys_epoch` (bumped by every
 * erasure that deletes keys), read in one snapshot. Only keys not found are inserted (an identity
 * value is spent even when ON CONFLICT skips the row), in sorted order so that writers creating
 * the same keys lock them in one order. A key another transaction committed after this
 * statement's snapshot is neither found nor inserted: asked again.
 *
 * `own`: the statement is its own transaction, whose commit need not wait for the WAL flush: a
 * statement that refers to a key commits later, durably, and that flush covers the key's earlier
 * commit record too (a crash in between loses only keys nothing refers to yet).
 */
const resolveKeysSql = (own: boolean): string =>
  // One (tenant, key) probe per key (LATERAL … LIMIT 1): `key = ANY($2)` over hundreds of keys
  // was planned as a scan of the tenant's whole dictionary, filtered (O(dictionary) per group).
  'WITH found AS (SELECT k.id, k.key FROM unnest($2::text[]) AS q(key) CROSS JOIN LATERAL (SELECT id, key FROM keys WHERE tenant = $1 AND key = q.key LIMIT 1) k), ' +
  'ins AS (INSERT INTO keys (tenant, key) SELECT $1, k FROM unnest($2::text[]) AS k WHERE k NOT IN (SELECT key FROM found) ORDER BY k ' +
  'ON CONFLICT DO NOTHING RETURNING id, key) ' +
  'SELECT (SELECT n FROM keys_epoch) AS epoch, (SELECT json_agg(json_build_array(id, key)) FROM (SELECT id, key FROM found UNION ALL SELECT id, key FROM ins) u) AS ids' +
  (own ? ", set_config('synchronous_commit', 'off', true) AS async" : '');
export const RESOLVE_KEYS = resolveKeysSql(false);
export const RESOLVE_KEYS_OWN = resolveKeysSql(true);

/**
 * JSON texts as one `json` array parameter, expanded by json_array_elements: no per-element
 * escaping in the driver (a `json[]` literal escapes every quote and backslash) nor unescaping
 * in the server, which keeps each element's text exactly as given.
 */
const jsonArray = (texts: string[]): string => `[${texts.join(',')}]`;

/** What a group's decisions rested on (INSERT_WRITE's snapSeq … flightDefTexts). */
export interface Basis {
  snapSeq: string;
  checkIds: string[];
  relied: [string, string][];
  defIds: string[];
  keptDefs: [string, string][];
  /** Definitions taken from the group writing before this one: [id, text] as it writes them. */
  flightDefs: [string, string][];
}

/**
 * The activity definitions a tenant's group in flight (decided, waiting for the tenant lock or
 * writing) will store, by id: the text it writes, and the definition. The next group decides
 * meanwhile on a snapshot that cannot see them; merging its own into these instead of the stored
 * ones, it need not be decided again under the lock once they are committed (a quarter of the
 * groups were, under a load that keeps bringing new activities). Its write checks that they were.
 */
export type DefinitionsInFlight = Map<string, { text: string; definition: ActivityDefinition }>;

/** Dictionary ids, and the `keys_epoch` they were read at (no erasure has deleted one while it is unchanged). */
export interface ResolvedKeys {
  ids: Map<string, number>;
  epoch: string;
}

/** The parameters of INSERT_WRITE for the plans of a group (their new statements in order). */
export function writeValues(
  tenant: { id: number; name: string },
  plans: InsertPlan[],
  storedMs: number,
  changed: DefinitionsInFlight,
  basis: Basis,
  keys: ResolvedKeys,
): unknown[] {
  const id = (key: string): number => {
    const found = keys.ids.get(key);
    if (found === undefined) throw new Error('a key of a statement group has no dictionary id');
    return found;
  };
  const st = { id: [] as string[], verb: [] as number[], reg: [] as (string | null)[], ref: [] as (string | null)[] };
  const flags = { isVoiding: [] as number[], voided: [] as number[], authority: [] as (number | null)[], full: [] as string[] };
  const agents: [number[], number[], number[]] = [[], [], []];
  const activities: [number[], number[], number[]] = [[], [], []];
  const links: [number[], string[], (number | null)[]] = [[], [], []];
  const violations: [number[], string[]] = [[], []];
  // One statement writes the group: its UPDATE cannot see the rows it inserts, so a statement a
  // later request of the group voids (that request was decided knowing it) is inserted already
  // voided. One voided by an earlier request was decided so by planInsert (voidedEarlier).
  const voids = new Set(plans.flatMap((p) => p.voids));
  const voidedLater = plans.map(() => new Set<string>());
  for (let i = plans.length - 2; i >= 0; i--) voidedLater[i] = new Set([...voidedLater[i + 1], ...plans[i + 1].voids]);
  const fresh = plans.flatMap((plan, i) => plan.fresh.map((f) => ({ ...f, later: voidedLater[i] })));
  fresh.forEach(({ p, full, voided, later }, i) => {
    const n = i + 1;
    st.id.push(p.id);
    st.verb.push(id(p.verb));
    st.reg.push(p.registration);
    st.ref.push(p.refId);
    flags.isVoiding.push(isVoidingValue(p));
    flags.voided.push(voided || (!p.voids && later.has(p.id)) ? 1 : 0);
    flags.authority.push(p.authorityKey === null ? null : id(p.authorityKey));
    flags.full.push(JSON.stringify(full));
    if (p.violations) {
      violations[0].push(n);
      violations[1].push(JSON.stringify(p.violations));
    }
    for (const a of p.agents) {
      agents[0].push(id(a.key));
      agents[1].push(n);
      agents[2].push(a.role);
    }
    for (const a of p.activities) {
      activities[0].push(id(a.id));
      activities[1].push(n);
      activities[2].push(a.direct ? 1 : 0);
    }
    // The carrier (migration 11): the authority's key id (0 without one) when the statement brought the data.
    for (const h of new Set(p.attachmentHashes)) {
      links[0].push(n);
      links[1].push(h);
      links[2].push(p.carried.includes(h) ? (p.authorityKey === null ? 0 : id(p.authorityKey)) : null);
    }
  });
  const blobs = [...new Map(plans.flatMap((p) => p.attachments).map((a) => [a.sha2, a])).values()];
  return WRITE_PARAMS.values({
    tenant: tenant.id,
    storedMs,
    count: fresh.length,
    ids: st.id,
    verbs: st.verb,
    registrations: st.reg,
    refs: st.ref,
    isVoiding: flags.isVoiding,
    voided: flags.voided,
    authorities: flags.authority,
    fulls: jsonArray(flags.full),
    agentKeys: agents[0],
    agentOrdinals: agents[1],
    agentRoles: agents[2],
    activityKeys: activities[0],
    activityOrdinals: activities[1],
    activityDirect: activities[2],
    linkOrdinals: links[0],
    linkHashes: links[1],
    carriers: links[2],
    violationOrdinals: violations[0],
    violations: jsonArray(violations[1]),
    voids: [...voids],
    definitionIds: [...changed.keys()],
    definitions: jsonArray([...changed.values()].map((d) => d.text)),
    blobHashes: blobs.map((a) => a.sha2),
    blobTypes: blobs.map((a) => a.contentType),
    blobContents: blobs.map((a) => a.content),
    snapSeq: basis.snapSeq,
    checkIds: basis.checkIds,
    reliedSeqs: basis.relied.map(([seq]) => seq),
    reliedXmins: basis.relied.map(([, xmin]) => xmin),
    defIds: basis.defIds,
    keptDefIds: basis.keptDefs.map(([id]) => id),
    keptDefXmins: basis.keptDefs.map(([, xmin]) => xmin),
    tenantName: tenant.name,
    epoch: keys.epoch,
    flightDefIds: basis.flightDefs.map(([id]) => id),
    flightDefTexts: basis.flightDefs.map(([, text]) => text),
  });
}

/**
 * The definitions a group's accepted statements leave, folded in statement order into the kept
 * ones; only those that differ from the kept one (most statements repeat a definition the LRS
 * already has), as on SQLite.
 */
export function changedDefinitions(plans: InsertPlan[], kept: Map<string, ActivityDefinition>): DefinitionsInFlight {
  const merged = new Map<string, ActivityDefinition>();
  for (const plan of plans) {
    for (const { p } of plan.fresh) for (const d of p.definitions) merged.set(d.id, mergeDefinition(merged.get(d.id) ?? kept.get(d.id), d.definition));
  }
  const changed: DefinitionsInFlight = new Map();
  for (const [id, definition] of merged) {
    const text = JSON.stringify(definition);
    const before = kept.get(id);
    if (!before || JSON.stringify(before) !== text) changed.set(id, { text, definition });
  }
  return changed;
}

/**
 * A tenant's dictionary ids of `keys`, created where missing (RESOLVE_KEYS), asked again for keys
 * another transaction committed meanwhile. `own`: the statement is its own transaction.
 */
export function* resolveKeys(tenantId: number, keys: Set<string>, own: boolean): Program<ResolvedKeys> {
  const ids = new Map<string, number>();
  for (let attempt = 1; ; attempt++) {
    const missing = [...keys].filter((k) => !ids.has(k)).sort();
    const [r] = yield* rows(
      own ? { text: RESOLVE_KEYS_OWN, values: [tenantId, missing], name: 'resolve_keys_own' } : { text: RESOLVE_KEYS, values: [tenantId, missing], name: 'resolve_keys' },
    );
    for (const [id, key] of JSON.parse((r.ids as string | null) ?? '[]') as [number, string][]) ids.set(key, id);
    if (ids.size === keys.size) return { ids, epoch: r.epoch as string };
    if (attempt >= 3) throw new Error('dictionary keys could not be resolved');
  }
}
