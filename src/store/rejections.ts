/**
 * Kept rejections (RejectionStore in ./types.ts) once for every backend, as programs
 * (./program.ts): the same SQL on both.
 */
import { type Program, row, rows, run } from './program.ts';
import type { KeptRejection, NewRejection, RejectionClaim, RejectionFilter, RejectionReason } from './types.ts';

type Row = Record<string, unknown>;

const COLUMNS = 'tenant, at_ms, username, method, path, query, status, reasons, types, headers, version, body, body_bytes, writer';
const INSERT = `INSERT INTO rejections (${COLUMNS}) VALUES (${COLUMNS.split(', ')
  .map((_, i) => `$${i + 1}`)
  .join(', ')})`;
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
 * How many rows each credential (its kept `username`) keeps of a store holding more than `max`:
 * max-min fair. Taken from the fewest held up, each keeps what it holds up to an equal share of
 * what is left; a credential under its share leaves the rest to the others. A flooder is trimmed
 * to the share, a quiet producer's few are kept whole; the shares add up to `max` (the remainder
 * of a division goes to those holding the most).
 */
export function fairShares(held: ReadonlyMap<string, number>, max: number): Map<string, number> {
  const fewestFirst = [...held].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const shares = new Map<string, number>();
  let left = max;
  fewestFirst.forEach(([user, n], i) => {
    const keep = Math.min(n, Math.floor(left / (fewestFirst.length - i)));
    shares.set(user, keep);
    left -= keep;
  });
  return shares;
}

/**
 * Inserts the rejections, drops every row older than `keepSinceMs`, then trims each store written
 * to that holds more than `max` rows to `max`, each credential to its fair share (fairShares), its
 * oldest rows first (ids grow with time): the table never holds more than `max` rows per store
 * after a keep, and one producer's flood evicts its own rows, not another's. One grouped read of
 * the store's rows and one ranged delete per credential trimmed, on rejections_writer
 * (tenant, username, id).
 */
export function* keepRejections(items: NewRejection[], bounds: { max: number; keepSinceMs: number }): Program<void> {
  const tenants = new Set<string>();
  for (const r of items) {
    tenants.add(r.tenant);
    yield* run({
      text: INSERT,
      values: [
        r.tenant,
        r.atMs,
        r.username,
        r.method,
        r.path,
        JSON.stringify(r.query),
        r.status,
        JSON.stringify(r.reasons),
        typesText(r.reasons),
        JSON.stringify(r.headers),
        r.version,
        r.body ?? null,
        r.bodyBytes,
        r.writer,
      ],
    });
  }
  yield* run({ text: 'DELETE FROM rejections WHERE at_ms < $1', values: [bounds.keepSinceMs] });
  for (const tenant of tenants) {
    const found = yield* rows({ text: 'SELECT username, count(*) AS n FROM rejections WHERE tenant = $1 GROUP BY username', values: [tenant] });
    const held = new Map(found.map((r) => [String(r.username), Number(r.n)]));
    if ([...held.values()].reduce((a, b) => a + b, 0) <= bounds.max) continue;
    for (const [username, keep] of fairShares(held, bounds.max)) {
      if (keep >= held.get(username)!) continue;
      yield* run({
        text: 'DELETE FROM rejections WHERE tenant = $1 AND username = $2 AND id <= (SELECT id FROM rejections WHERE tenant = $1 AND username = $2 ORDER BY id DESC LIMIT 1 OFFSET $3)',
        values: [tenant, username, keep],
      });
    }
  }
}

export function* listRejections(f: RejectionFilter): Program<KeptRejection[]> {
  const where: string[] = [];
  const values: unknown[] = [];
  const p = (v: unknown) => `$${values.push(v)}`;
  if (f.tenant !== undefined) where.push(`tenant = ${p(f.tenant)}`);
  if (f.sinceMs !== undefined) where.push(`at_ms >= ${p(f.sinceMs)}`);
  if (f.afterId !== undefined) where.push(`id > ${p(Number(f.afterId))}`);
  if (f.reason !== undefined) {
    const t = likeEscape(f.reason);
    where.push(`(types LIKE ${p(`% ${t} %`)} ESCAPE '\\' OR types LIKE ${p(`% ${t}.%`)} ESCAPE '\\')`);
  }
  const found = yield* rows({ text: `${SELECT}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ${p(f.limit)}`, values });
  return found.map(toRejection);
}

export function* getRejection(id: string): Program<KeptRejection | undefined> {
  const r = yield* row({ text: `${SELECT} WHERE id = $1`, values: [Number(id)] });
  return r && toRejection(r);
}

export function* updateRejection(id: string, change: { status: number; reasons: RejectionReason[]; atMs: number }): Program<void> {
  yield* run({
    text: 'UPDATE rejections SET status = $1, reasons = $2, types = $3, at_ms = $4 WHERE id = $5',
    values: [change.status, JSON.stringify(change.reasons), typesText(change.reasons), change.atMs, Number(id)],
  });
}

export function* deleteRejections(ids: string[]): Program<number> {
  let n = 0;
  for (const id of ids) n += yield* run({ text: 'DELETE FROM rejections WHERE id = $1', values: [Number(id)] });
  return n;
}

export function* clearRejections(tenant?: string): Program<number> {
  return tenant === undefined ? yield* run({ text: 'DELETE FROM rejections', values: [] }) : yield* run({ text: 'DELETE FROM rejections WHERE tenant = $1', values: [tenant] });
}

/**
 * Claims for one replay the rows of `ids` no other replay holds, one row at a time in id order:
 * two replays claiming at once lock rows in the same order (PostgreSQL: no deadlock), and the
 * second, once the first commits, finds its claims. Returns the ids claimed.
 */
export function* claimRejections(ids: string[], claim: RejectionClaim): Program<string[]> {
  const claimed: string[] = [];
  for (const id of [...new Set(ids)].sort((a, b) => Number(a) - Number(b))) {
    const n = yield* run({
      text: 'UPDATE rejections SET claim = $1, claimed_until_ms = $2 WHERE id = $3 AND (claim IS NULL OR claim = $1 OR claimed_until_ms < $4)',
      values: [claim.token, claim.untilMs, Number(id), claim.nowMs],
    });
    if (n) claimed.push(id);
  }
  return claimed;
}

export function* renewRejectionClaim(token: string, untilMs: number): Program<number> {
  return yield* run({ text: 'UPDATE rejections SET claimed_until_ms = $2 WHERE claim = $1', values: [token, untilMs] });
}

export function* releaseRejections(token: string): Program<number> {
  return yield* run({ text: 'UPDATE rejections SET claim = NULL, claimed_until_ms = NULL WHERE claim = $1', values: [token] });
}
