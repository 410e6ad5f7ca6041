/**
 * The storage experiment behind the lean storage layout (docs/performance.md, "Disk"): the same statements,
 * indexed exactly as Lectern indexes them (src/xapi/statement.ts prepareStatement), written in a
 * tight node:sqlite loop (no HTTP, no validation) into
 *
 *   raw       the benchmark's raw limit (one table), for a ratio measured in the same process;
 *   current   Lectern's schema (src/store/sqlite/migrations.ts: since version 6 the lean one,
 *             integer dictionary ids and 16-byte UUIDs), Lectern's insert statements;
 *   lean+zstd a lean schema with the statement JSON compressed by zstd with a raw-content
 *             dictionary (redesign step 6, not adopted);
 *
 * each at 100 statements per transaction (one request) and 1,000 (a group commit), with
 * synchronous=FULL. Prints statements/s and bytes per statement (file, and per table/index).
 *
 *   node bench/storage.ts [statements=100000]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { deflateRawSync, inflateRawSync, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { seqBucket } from '../src/store/sql.ts';
import { MIGRATIONS, PAGE_SIZE } from '../src/store/sqlite/migrations.ts';
import { actorKeys } from '../src/xapi/agents.ts';
import { type PreparedStatement, prepareStatement, stamp } from '../src/xapi/statement.ts';
import type { Actor, Statement } from '../src/xapi/types.ts';
import { statement } from './generate.ts';

const N = Number(process.argv[2] ?? 100_000);
const SEED = 20261123;
const AUTHORITY: Actor = { objectType: 'Agent', mbox: 'mailto:bench@example.com' };

interface Row {
  p: PreparedStatement;
  full: string;
  authority: string | null;
}

function rows(n: number): Row[] {
  const iso = new Date().toISOString();
  return Array.from({ length: n }, (_, i) => {
    const p = prepareStatement(statement(SEED, i) as unknown as Statement, AUTHORITY, '1.0.3');
    return { p, full: JSON.stringify(stamp(p, iso)), authority: actorKeys(AUTHORITY)[0] ?? null };
  });
}

const LEAN_SCHEMA = `
CREATE TABLE keys (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);   -- tenants, IRIs, agent keys
CREATE TABLE statements (
  seq INTEGER PRIMARY KEY,
  tenant INTEGER NOT NULL,
  id BLOB NOT NULL,                   -- 16 bytes
  stored_ms INTEGER NOT NULL,         -- never decreases with seq: since/until find seq by bisecting the rowid
  verb INTEGER NOT NULL,
  registration BLOB,
  ref_id BLOB,
  flags INTEGER NOT NULL,             -- 1 voiding, 2 voided
  authority INTEGER,
  full BLOB NOT NULL
);
CREATE UNIQUE INDEX statements_id ON statements(tenant, id);
CREATE INDEX statements_verb ON statements(tenant, verb, seq);
CREATE INDEX statements_registration ON statements(tenant, registration, seq) WHERE registration IS NOT NULL;
CREATE INDEX statements_ref ON statements(tenant, ref_id) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_authority ON statements(tenant, authority, seq);
CREATE TABLE statement_agents (tenant INTEGER NOT NULL, agent INTEGER NOT NULL, seq INTEGER NOT NULL, direct INTEGER NOT NULL, PRIMARY KEY (tenant, agent, seq)) WITHOUT ROWID;
CREATE INDEX statement_agents_seq ON statement_agents(seq, agent);
CREATE TABLE statement_activities (tenant INTEGER NOT NULL, activity INTEGER NOT NULL, seq INTEGER NOT NULL, direct INTEGER NOT NULL, PRIMARY KEY (tenant, activity, seq)) WITHOUT ROWID;
CREATE INDEX statement_activities_seq ON statement_activities(seq, activity);
CREATE TABLE activities (tenant INTEGER NOT NULL, activity INTEGER NOT NULL, definition TEXT NOT NULL, PRIMARY KEY (tenant, activity)) WITHOUT ROWID;
`;

const uuidBytes = (u: string | null): Uint8Array | null => (u === null ? null : Buffer.from(u.replaceAll('-', ''), 'hex'));

interface Result {
  variant: string;
  perTx: number;
  rate: number;
  bytesPerStatement: number;
  jsonBytesPerStatement: number;
  parts: Record<string, number>;
}

function open(file: string): DatabaseSync {
  const db = new DatabaseSync(file);
  db.exec(`PRAGMA page_size = ${PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;`);
  return db;
}

function finish(db: DatabaseSync, file: string, variant: string, perTx: number, seconds: number, jsonBytes: number): Result {
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  const parts: Record<string, number> = {};
  for (const r of db.prepare('SELECT name, sum(pgsize) AS s FROM dbstat GROUP BY name ORDER BY 2 DESC').all() as { name: string; s: number }[]) parts[r.name] = Math.round(r.s / N);
  db.close();
  return { variant, perTx, rate: N / seconds, bytesPerStatement: statSync(file).size / N, jsonBytesPerStatement: jsonBytes / N, parts };
}

/** The raw limit of the benchmark (bench/baselines.ts): the JSON into one table with a unique id. */
function raw(dir: string, data: Row[], perTx: number): Result {
  const file = join(dir, `raw-${perTx}.sqlite`);
  const db = open(file);
  db.exec('CREATE TABLE statements (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stored_ms INTEGER NOT NULL, full TEXT NOT NULL)');
  const ins = db.prepare('INSERT INTO statements (id, stored_ms, full) VALUES (?, ?, ?)');
  const t0 = performance.now();
  for (let i = 0; i < data.length; i += perTx) {
    db.exec('BEGIN IMMEDIATE');
    for (let k = i; k < Math.min(i + perTx, data.length); k++) ins.run(data[k].p.id, Date.now(), data[k].full);
    db.exec('COMMIT');
  }
  return finish(db, file, 'raw limit (one table)', perTx, (performance.now() - t0) / 1000, data.reduce((a, r) => a + Buffer.byteLength(r.full), 0));
}

/** Lectern's schema and insert statements (as SqliteStore writes a group: key ids first, then the rows). */
function current(dir: string, data: Row[], perTx: number): Result {
  const file = join(dir, `current-${perTx}.sqlite`);
  const db = open(file);
  for (const m of MIGRATIONS) db.exec(m.sql);
  const q = new Map<string, StatementSync>();
  const st = (sql: string) => q.get(sql) ?? (q.set(sql, db.prepare(sql)), q.get(sql)!);
  // The store caches key ids in memory: a lookup is a Map hit after the first sight.
  const ids = new Map<string, number>();
  const key = (tenant: number, k: string): number => {
    let id = ids.get(k);
    if (id === undefined) {
      const found = st('SELECT id FROM keys WHERE tenant = ? AND key = ?').get(tenant, k) as { id: number } | undefined;
      id = Number(found?.id ?? st('INSERT INTO keys (tenant, key) VALUES (?, ?)').run(tenant, k).lastInsertRowid);
      ids.set(k, id);
    }
    return id;
  };
  const tenant = Number(st("INSERT INTO tenants (name) VALUES ('')").run().lastInsertRowid);
  const t0 = performance.now();
  for (let i = 0; i < data.length; i += perTx) {
    db.exec('BEGIN IMMEDIATE');
    st('SELECT epoch FROM keys_epoch').get();
    const batch = data.slice(i, i + perTx);
    for (const { p, authority } of batch) for (const k of [p.verb, ...(authority === null ? [] : [authority]), ...p.agents.map((a) => a.key), ...p.activities.map((a) => a.id)]) key(tenant, k);
    for (const { p, full, authority } of batch) {
      const id = uuidBytes(p.id);
      st('SELECT full, is_voiding FROM statements WHERE tenant = ? AND id = ?').get(tenant, id);
      if (p.voids) st('SELECT full, is_voiding FROM statements WHERE tenant = ? AND id = ?').get(tenant, uuidBytes(p.voids));
      const voided = !p.voids && st('SELECT 1 FROM statements WHERE tenant = ? AND ref_id = ? AND is_voiding = 1 LIMIT 1').get(tenant, id) !== undefined;
      const r = st('INSERT INTO statements (tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority, full) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').run(
        tenant, id, Date.now(), key(tenant, p.verb), uuidBytes(p.registration), uuidBytes(p.refId), p.voids ? 1 : 0, voided ? 1 : 0, authority === null ? null : key(tenant, authority), full,
      );
      for (const a of p.agents) st('INSERT INTO statement_agents (tenant, bucket, agent, seq, role) VALUES (?, ?, ?, ?, ?)').run(tenant, seqBucket(Number(r.lastInsertRowid)), key(tenant, a.key), r.lastInsertRowid, a.role);
      for (const a of p.activities) st('INSERT INTO statement_activities (tenant, bucket, activity, seq, direct) VALUES (?, ?, ?, ?, ?)').run(tenant, seqBucket(Number(r.lastInsertRowid)), key(tenant, a.id), r.lastInsertRowid, a.direct ? 1 : 0);
      if (p.voids) st('UPDATE statements SET voided = 1 WHERE tenant = ? AND id = ? AND is_voiding = 0').run(tenant, uuidBytes(p.voids));
      for (const d of p.definitions) {
        const kept = st('SELECT definition FROM definitions WHERE key = ?').get(key(tenant, d.id)) as { definition: string } | undefined;
        const text = JSON.stringify(d.definition);
        if (kept?.definition !== text) st('INSERT INTO definitions (key, definition) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET definition = excluded.definition').run(key(tenant, d.id), text);
      }
    }
    db.exec('COMMIT');
  }
  return finish(db, file, 'current', perTx, (performance.now() - t0) / 1000, data.reduce((a, r) => a + Buffer.byteLength(r.full), 0));
}

/** Integer ids, pruned indexes, and zstd-compressed JSON. */
function lean(dir: string, data: Row[], perTx: number, dictionary: Buffer, precompressed = false): Result {
  const variant = precompressed ? 'lean+zstd, compressed beforehand' : 'lean+zstd';
  // Compressed beforehand: the compression runs elsewhere (request threads), only its bytes reach the writer.
  const ready = precompressed ? data.map((r) => zstdCompressSync(r.full, { dictionary } as never)) : undefined;
  const file = join(dir, `${variant.replace(/\W+/g, '-')}-${perTx}.sqlite`);
  const db = open(file);
  db.exec(LEAN_SCHEMA);
  // The dictionary of keys lives in memory too: a lookup is a Map hit after the first sight.
  const ids = new Map<string, number>();
  const findKey = db.prepare('SELECT id FROM keys WHERE key = ?');
  const addKey = db.prepare('INSERT INTO keys (key) VALUES (?)');
  const key = (k: string): number => {
    let id = ids.get(k);
    if (id === undefined) {
      id = Number((findKey.get(k) as { id: number } | undefined)?.id ?? addKey.run(k).lastInsertRowid);
      ids.set(k, id);
    }
    return id;
  };
  const byId = db.prepare('SELECT full, flags FROM statements WHERE tenant = ? AND id = ?');
  const voidedBy = db.prepare('SELECT 1 FROM statements WHERE tenant = ? AND ref_id = ? AND flags & 1 LIMIT 1');
  const insert = db.prepare('INSERT INTO statements (tenant, id, stored_ms, verb, registration, ref_id, flags, authority, full) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
  const agent = db.prepare('INSERT INTO statement_agents (tenant, agent, seq, direct) VALUES (?, ?, ?, ?)');
  const activity = db.prepare('INSERT INTO statement_activities (tenant, activity, seq, direct) VALUES (?, ?, ?, ?)');
  const voidIt = db.prepare('UPDATE statements SET flags = flags | 2 WHERE tenant = ? AND id = ? AND flags & 1 = 0');
  const keptDef = db.prepare('SELECT definition FROM activities WHERE tenant = ? AND activity = ?');
  const putDef = db.prepare('INSERT INTO activities (tenant, activity, definition) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET definition = excluded.definition');
  let stored = 0;
  const t0 = performance.now();
  for (let i = 0; i < data.length; i += perTx) {
    db.exec('BEGIN IMMEDIATE');
    const tenant = key('');
    for (let k = i; k < Math.min(i + perTx, data.length); k++) {
      const { p, full, authority } = data[k];
      const id = uuidBytes(p.id)!;
      byId.get(tenant, id);
      if (p.voids) byId.get(tenant, uuidBytes(p.voids));
      const voided = !p.voids && voidedBy.get(tenant, id) !== undefined;
      const body = ready ? ready[k] : zstdCompressSync(full, { dictionary } as never);
      stored += body.length;
      const r = insert.run(tenant, id, Date.now(), key(p.verb), uuidBytes(p.registration), uuidBytes(p.refId), (p.voids ? 1 : 0) | (voided ? 2 : 0), authority === null ? null : key(authority), body);
      for (const a of p.agents) agent.run(tenant, key(a.key), r.lastInsertRowid, a.role);
      for (const a of p.activities) activity.run(tenant, key(a.id), r.lastInsertRowid, a.direct ? 1 : 0);
      if (p.voids) voidIt.run(tenant, uuidBytes(p.voids));
      for (const d of p.definitions) {
        const text = JSON.stringify(d.definition);
        const act = key(d.id);
        if ((keptDef.get(tenant, act) as { definition: string } | undefined)?.definition !== text) putDef.run(tenant, act, text);
      }
    }
    db.exec('COMMIT');
  }
  return finish(db, file, variant, perTx, (performance.now() - t0) / 1000, stored);
}

/** A raw-content dictionary: a few statements of another stream, concatenated. */
export function zstdDictionary(): Buffer {
  return Buffer.concat(Array.from({ length: 64 }, (_, i) => Buffer.from(JSON.stringify(statement(SEED + 1, i)))));
}

/** Per-statement compress/decompress cost and size: zstd and raw deflate, by dictionary size. */
function compressionCost(data: Row[]): Record<string, { bytes: number; compressUs: number; decompressUs: number }> {
  const sample = data.slice(0, 3000).map((r) => Buffer.from(r.full));
  const full = zstdDictionary();
  const out: Record<string, { bytes: number; compressUs: number; decompressUs: number }> = {};
  const measure = (name: string, c: (b: Buffer) => Buffer, d: (b: Buffer) => Buffer) => {
    let t = performance.now();
    const packed = sample.map(c);
    const compressUs = ((performance.now() - t) * 1000) / sample.length;
    t = performance.now();
    for (const b of packed) d(b);
    const decompressUs = ((performance.now() - t) * 1000) / sample.length;
    out[name] = { bytes: Math.round(packed.reduce((a, b) => a + b.length, 0) / sample.length), compressUs: Math.round(compressUs), decompressUs: Math.round(decompressUs) };
  };
  measure('none', (b) => b, (b) => b);
  measure('zstd, no dictionary', (b) => zstdCompressSync(b), (b) => zstdDecompressSync(b));
  for (const kb of [8, 32, 80]) {
    const dictionary = full.subarray(0, kb * 1024);
    measure(`zstd, ${kb} KB dictionary`, (b) => zstdCompressSync(b, { dictionary } as never), (b) => zstdDecompressSync(b, { dictionary } as never));
  }
  const dictionary = full.subarray(0, 32 * 1024);
  measure('deflate-raw, 32 KB dictionary', (b) => deflateRawSync(b, { dictionary }), (b) => inflateRawSync(b, { dictionary }));
  return out;
}

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-storage-'));
  try {
    const data = rows(N);
    const dictionary = zstdDictionary();
    const results: Result[] = [];
    for (const perTx of [100, 1000]) {
      results.push(raw(dir, data, perTx));
      results.push(current(dir, data, perTx));
      results.push(lean(dir, data, perTx, dictionary));
      results.push(lean(dir, data, perTx, dictionary, true));
    }
    const cost = compressionCost(data);
    process.stdout.write(`storage experiment: ${N.toLocaleString('en')} statements, synchronous=FULL, load ${(await import('node:os')).loadavg().map((x) => x.toFixed(1)).join(' ')}\n\n`);
    process.stdout.write('| variant | statements/tx | statements/s | vs current@100 | bytes/statement on disk | JSON bytes/statement stored |\n|---|---|---|---|---|---|\n');
    const base = results[1].rate;
    for (const r of results) {
      process.stdout.write(`| ${r.variant} | ${r.perTx} | ${Math.round(r.rate).toLocaleString('en')} | ${(r.rate / base).toFixed(2)}× | ${Math.round(r.bytesPerStatement)} | ${Math.round(r.jsonBytesPerStatement)} |\n`);
    }
    process.stdout.write(`\nbytes per statement by table/index (100/tx):\n`);
    for (const r of results.filter((x) => x.perTx === 100)) process.stdout.write(`${r.variant}: ${JSON.stringify(r.parts)}\n`);
    process.stdout.write('\n| JSON compression (one statement per call, node:zlib) | bytes | compress µs | decompress µs |\n|---|---|---|---|\n');
    for (const [k, v] of Object.entries(cost)) process.stdout.write(`| ${k} | ${v.bytes} | ${v.compressUs} | ${v.decompressUs} |\n`);
    process.stdout.write(`${JSON.stringify({ results, compression: cost })}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
