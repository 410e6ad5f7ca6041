/**
 * What the admin API reads and writes in the database, once for every backend as programs
 * (./program.ts, placeholders spelled `$n` on both): each store's figures, and the audit log of
 * admin actions (who did what, when, from where). The audit is append-only: nothing here updates
 * or deletes an entry.
 */
import { type Program, row, rows } from './program.ts';
import type { ActorKind, AuditEntry, AuditFilter, AuditRecord, ChangeAudit, StoreSummary } from './types.ts';

type Row = Record<string, unknown>;

const summary = (name: string): StoreSummary => ({ target: name, statements: 0, documents: 0, lastStoredMs: null });

/**
 * Every store the database holds data of (and the default store, always), or only `only` (then
 * exactly one summary, zeros when it holds nothing). Statements count voided ones too: all the
 * rows a store keeps, as the Overview counts them. The last statement is the newest by stored order (`stored` never goes back).
 */
export function* storeSummaries(only?: string): Program<StoreSummary[]> {
  const byName = new Map<string, StoreSummary>();
  const of = (name: string) => {
    let s = byName.get(name);
    if (!s) byName.set(name, (s = summary(name)));
    return s;
  };
  if (only === undefined) of('');
  else of(only);
  const tenants = yield* rows(only === undefined ? { text: 'SELECT id, name FROM tenants', values: [] } : { text: `SELECT id, name FROM tenants WHERE name = $1`, values: [only] });
  for (const t of tenants) {
    const s = of(String(t.name));
    // The Overview's counts (./overview.ts, kept by every write and deletion): no scan of a large store.
    const n = yield* row({ text: `SELECT coalesce(sum(n), 0) AS n FROM statement_counts WHERE tenant = $1`, values: [t.id] });
    s.statements = Number(n?.n ?? 0);
    const last = yield* row({ text: `SELECT stored_ms FROM statements WHERE tenant = $1 ORDER BY seq DESC LIMIT 1`, values: [t.id] });
    s.lastStoredMs = last ? Number(last.stored_ms) : null;
  }
  const docs = yield* rows(
    only === undefined
      ? { text: 'SELECT tenant, count(*) AS n FROM documents GROUP BY tenant', values: [] }
      : { text: `SELECT tenant, count(*) AS n FROM documents WHERE tenant = $1 GROUP BY tenant`, values: [only] },
  );
  for (const r of docs) of(String(r.tenant)).documents = Number(r.n);
  return [...byName.values()].sort((a, b) => a.target.localeCompare(b.target));
}

/** Every store's key, the default store ('') always: no counting, for jobs that visit each store. */
export function* storeNames(): Program<string[]> {
  const found = yield* rows({ text: 'SELECT name FROM tenants', values: [] });
  return [...new Set(['', ...found.map((t) => String(t.name))])].sort();
}

const AUDIT_COLS = 'id, time_ms, actor, actor_kind, role, via, client, action, target, details';

function toEntry(r: Row): AuditEntry {
  return {
    id: String(r.id),
    time: new Date(Number(r.time_ms)).toISOString(),
    actor: String(r.actor),
    actorKind: String(r.actor_kind) as ActorKind,
    role: String(r.role),
    via: String(r.via),
    client: String(r.client),
    action: String(r.action),
    target: r.target === null || r.target === undefined ? null : String(r.target),
    details: JSON.parse(String(r.details)) as Record<string, unknown>,
  };
}

/** Appends one entry; returns it as listed. */
export function* appendAudit(rec: AuditRecord): Program<AuditEntry> {
  const values = [rec.timeMs, rec.actor, rec.actorKind, rec.role, rec.via, rec.client, rec.action, rec.target, JSON.stringify(rec.details)];
  const r = yield* row({
    text: `INSERT INTO admin_audit (time_ms, actor, actor_kind, role, via, client, action, target, details) VALUES (${values.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING ${AUDIT_COLS}`,
    values,
  });
  return toEntry(r!);
}

/**
 * A change and its audit entry as one program (run in one transaction): the entry after the
 * change, with what it came to under `details[audit.outcome]`; none when it changed nothing
 * (answered false).
 */
export function* audited<T>(change: Program<T>, audit: ChangeAudit): Program<T> {
  const value = yield* change;
  if (value !== false) {
    const { outcome, ...record } = audit;
    yield* appendAudit(outcome === undefined ? record : { ...record, details: { ...record.details, [outcome]: value } });
  }
  return value;
}

/** Entries matching the filter, newest first, at most `limit`, older than the entry `before` when given. */
export function* listAudit(f: AuditFilter): Program<AuditEntry[]> {
  const where: string[] = [];
  const values: unknown[] = [];
  const add = (sql: (p: string) => string, v: unknown) => {
    values.push(v);
    where.push(sql(`$${values.length}`));
  };
  if (f.target !== undefined) add((p) => `target = ${p}`, f.target);
  if (f.action !== undefined) add((p) => `action = ${p}`, f.action);
  if (f.actor !== undefined) add((p) => `actor = ${p}`, f.actor);
  if (f.sinceMs !== undefined) add((p) => `time_ms >= ${p}`, f.sinceMs);
  if (f.untilMs !== undefined) add((p) => `time_ms <= ${p}`, f.untilMs);
  if (f.before !== undefined) add((p) => `id < ${p}`, f.before);
  values.push(f.limit);
  const text = `SELECT ${AUDIT_COLS} FROM admin_audit${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${values.length}`;
  return (yield* rows({ text, values })).map(toEntry);
}
