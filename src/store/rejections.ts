/**
 * Kept rejections (RejectionStore in ./types.ts) once for every backend, as programs
 * (./program.ts). The SQL is the same on both but for how parameters are numbered.
 */
import { type Program, row, rows, run } from './program.ts';
import type { KeptRejection, NewRejection, RejectionFilter, RejectionReason } from './types.ts';

type Row = Record<string, unknown>;

/** How a backend spells its parameters: SQLite `?`, PostgreSQL `$1, $2, …`. */
export interface RejectionDialect {
  numbered: boolean;
}

const sql = (d: RejectionDialect, text: string): string => {
  if (!d.numbered) return text;
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
};

const COLUMNS = 'tenant, at_ms, username, method, path, query, status, reasons, types, headers, version, body, body_bytes, writer';
const SELECT = `SELECT id, ${COLUMNS} FROM rejections`;

/** ` a b c `: reason types between spaces, so that LIKE finds a whole type or a prefix ending at a dot. */
const typesText = (reasons: RejectionReason[]): string => ` ${[...new Set(reasons.map((r) => r.type))].join(' ')} `;
const likeEscape = (s: string): string => s.replace(/[\\%_]/g, (c) => `\\${c}`);

const asBuffer = (u: unknown): Buffer | undefined => {
  if (u === null || u === undefined) return undefined;
  const bytes = u as Uint8Array;
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
};

function toRejection(r: Row): KeptRejection {
  return {
    id: String(r.id),
    tenant: String(r.tenant),
    atMs: Number(r.at_ms),
    username: String(r.username),
    method: String(r.method),
    path: String(r.path),
    query: JSON.parse(String(r.query)) as Record<string, string>,
    status: Number(r.status),
    reasons: JSON.parse(String(r.reasons)) as RejectionReason[],
    headers: JSON.parse(String(r.headers)) as Record<string, string>,
    version: String(r.version),
    body: asBuffer(r.body),
    bodyBytes: Number(r.body_bytes),
    writer: String(r.writer),
  };
}

/**
 * Inserts the rejections, then trims each store written to its newest `max` (ids grow with time)
 * and drops every row older than `keepSinceMs`: the table never holds more than `max` rows per
 * store after a keep, whatever arrives.
 */
export function* keepRejections(d: RejectionDialect, items: NewRejection[], bounds: { max: number; keepSinceMs: number }): Program<void> {
  const tenants = new Set<string>();
  for (const r of items) {
    tenants.add(r.tenant);
    yield* run({
      text: sql(d, `INSERT INTO rejections (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      values: [r.tenant, r.atMs, r.username, r.method, r.path, JSON.stringify(r.query), r.status, JSON.stringify(r.reasons), typesText(r.reasons), JSON.stringify(r.headers), r.version, r.body ?? null, r.bodyBytes, r.writer],
    });
  }
  for (const tenant of tenants) {
    yield* run({
      text: sql(d, 'DELETE FROM rejections WHERE tenant = ? AND id <= (SELECT id FROM rejections WHERE tenant = ? ORDER BY id DESC LIMIT 1 OFFSET ?)'),
      values: [tenant, tenant, bounds.max],
    });
  }
  yield* run({ text: sql(d, 'DELETE FROM rejections WHERE at_ms < ?'), values: [bounds.keepSinceMs] });
}

export function* listRejections(d: RejectionDialect, f: RejectionFilter): Program<KeptRejection[]> {
  const where: string[] = [];
  const values: unknown[] = [];
  const add = (cond: string, ...v: unknown[]) => {
    where.push(cond);
    values.push(...v);
  };
  if (f.tenant !== undefined) add('tenant = ?', f.tenant);
  if (f.sinceMs !== undefined) add('at_ms >= ?', f.sinceMs);
  if (f.afterId !== undefined) add('id > ?', Number(f.afterId));
  if (f.reason !== undefined) {
    const t = likeEscape(f.reason);
    add("(types LIKE ? ESCAPE '\\' OR types LIKE ? ESCAPE '\\')", `% ${t} %`, `% ${t}.%`);
  }
  values.push(f.limit);
  const found = yield* rows({ text: sql(d, `${SELECT}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ?`), values });
  return found.map(toRejection);
}

export function* getRejection(d: RejectionDialect, id: string): Program<KeptRejection | undefined> {
  const r = yield* row({ text: sql(d, `${SELECT} WHERE id = ?`), values: [Number(id)] });
  return r && toRejection(r);
}

export function* updateRejection(d: RejectionDialect, id: string, change: { status: number; reasons: RejectionReason[]; atMs: number }): Program<void> {
  yield* run({
    text: sql(d, 'UPDATE rejections SET status = ?, reasons = ?, types = ?, at_ms = ? WHERE id = ?'),
    values: [change.status, JSON.stringify(change.reasons), typesText(change.reasons), change.atMs, Number(id)],
  });
}

export function* deleteRejections(d: RejectionDialect, ids: string[]): Program<number> {
  let n = 0;
  for (const id of ids) n += yield* run({ text: sql(d, 'DELETE FROM rejections WHERE id = ?'), values: [Number(id)] });
  return n;
}

export function* clearRejections(d: RejectionDialect, tenant?: string): Program<number> {
  return tenant === undefined
    ? yield* run({ text: 'DELETE FROM rejections', values: [] })
    : yield* run({ text: sql(d, 'DELETE FROM rejections WHERE tenant = ?'), values: [tenant] });
}
