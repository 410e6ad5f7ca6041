/**
 * Where SQLite's share of a statement write goes: Lectern's schema and insert statements in a
 * tight node:sqlite loop (no HTTP, no validation, key ids cached as the store caches them), with
 * one part left out at a time, each beside the raw one-table limit measured in the same process
 * (bench/baselines.ts). The parts: the two lookups the insert rules need (id taken? voided
 * earlier?), the canonical activity definitions (read, compare, write when changed), the agent and
 * activity link rows, the statements table's secondary indexes (verb, registration, authority,
 * tenant+seq), the JSON itself. Each line also gives the part of a statement's time spent in
 * COMMIT (writing the pages the transaction dirtied to the WAL, and its fsync): run it with 100,
 * 200 and 400 per transaction to see what group size buys.
 *
 *   node bench/ablation.ts [statements=20000] [statements per transaction=1000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { seqBucket } from '../src/store/sql.ts';
import { MIGRATIONS, PAGE_SIZE } from '../src/store/sqlite/migrations.ts';
import { actorKeys } from '../src/xapi/agents.ts';
import { prepareStatement, stamp } from '../src/xapi/statement.ts';
import { statement } from './generate.ts';
const N = Number(process.argv[2] ?? 20000), PER = Number(process.argv[3] ?? 1000);
const AUTH = { objectType: 'Agent', mbox: 'mailto:bench@example.com' } as const;
const iso = new Date().toISOString();
const data = Array.from({ length: N }, (_, i) => { const p = prepareStatement(statement(20261123, i) as never, AUTH as never, '1.0.3'); return { p, full: JSON.stringify(stamp(p, iso)), authority: actorKeys(AUTH as never)[0] }; });
const ub = (u: string | null) => (u === null ? null : Buffer.from(u.replaceAll('-', ''), 'hex'));
function run(label: string, skip: Set<string>) {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-ablation-')); const db = new DatabaseSync(join(dir, 'x.db'));
  db.exec(`PRAGMA page_size = ${PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;`);
  for (const m of MIGRATIONS) db.exec(m.sql);
  if (skip.has('idx')) db.exec('DROP INDEX statements_verb; DROP INDEX statements_registration; DROP INDEX statements_authority; DROP INDEX statements_seq;');
  const q = new Map<string, StatementSync>(); const st = (s: string) => q.get(s) ?? (q.set(s, db.prepare(s)), q.get(s)!);
  const ids = new Map<string, number>();
  const defs = new Map<string, string>();
  const key = (k: string) => { let id = ids.get(k); if (id === undefined) { id = Number(st('INSERT INTO keys (tenant, key) VALUES (1, ?)').run(k).lastInsertRowid); ids.set(k, id); } return id; };
  st("INSERT INTO tenants (name) VALUES ('')").run();
  let commit = 0;
  const t0 = performance.now();
  for (let i = 0; i < N; i += PER) {
    db.exec('BEGIN IMMEDIATE');
    for (const { p, full, authority } of data.slice(i, i + PER)) {
      const id = ub(p.id);
      if (!skip.has('lookups')) { st('SELECT full, is_voiding FROM statements WHERE seq = (SELECT seq FROM statement_seqs WHERE tenant = ? AND id = ?)').get(1, id); st('SELECT 1 FROM statements WHERE tenant = ? AND ref_id = ? AND is_voiding = 1 LIMIT 1').get(1, id); }
      const r = st('INSERT INTO statements (tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority, full) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').run(1, id, Date.now(), key(p.verb), ub(p.registration), ub(p.refId), 0, 0, key(authority!), skip.has('json') ? '{}' : full);
      st('INSERT INTO statement_ids_new (tenant, id, seq) VALUES (?, ?, ?)').run(1, id, r.lastInsertRowid);
      if (!skip.has('links')) {
        for (const a of p.agents) st('INSERT INTO statement_agents (tenant, bucket, agent, seq, role) VALUES (?, ?, ?, ?, ?)').run(1, seqBucket(Number(r.lastInsertRowid)), key(a.key), r.lastInsertRowid, a.role);
        for (const a of p.activities) st('INSERT INTO statement_activities (tenant, bucket, activity, seq, direct) VALUES (?, ?, ?, ?, ?)').run(1, seqBucket(Number(r.lastInsertRowid)), key(a.id), r.lastInsertRowid, a.direct ? 1 : 0);
      }
      // As the store: a definition equal to the last one merged into the kept one costs nothing more.
      if (!skip.has('defs')) for (const d of p.definitions) {
        const text = JSON.stringify(d.definition);
        if (defs.get(d.id) === text) continue;
        const kept = st('SELECT definition FROM definitions WHERE key = ?').get(key(d.id)) as { definition: string } | undefined;
        if (kept?.definition !== text) st('INSERT INTO definitions (key, definition) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET definition = excluded.definition').run(key(d.id), text);
        defs.set(d.id, text);
      }
    }
    const c0 = performance.now();
    db.exec('COMMIT');
    commit += performance.now() - c0;
  }
  const rate = N / ((performance.now() - t0) / 1000); db.close(); rmSync(dir, { recursive: true });
  return { rate, commit: (commit * 1000) / N };
}
function raw() {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-ablation-')); const db = new DatabaseSync(join(dir, 'x.db'));
  db.exec(`PRAGMA page_size = ${PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE statements (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stored_ms INTEGER NOT NULL, full TEXT NOT NULL)`);
  const ins = db.prepare('INSERT INTO statements (id, stored_ms, full) VALUES (?, ?, ?)');
  let commit = 0;
  const t0 = performance.now();
  for (let i = 0; i < N; i += PER) {
    db.exec('BEGIN IMMEDIATE');
    for (const r of data.slice(i, i + PER)) ins.run(r.p.id, Date.now(), r.full);
    const c0 = performance.now();
    db.exec('COMMIT');
    commit += performance.now() - c0;
  }
  const rate = N / ((performance.now() - t0) / 1000); db.close(); rmSync(dir, { recursive: true }); return { rate, commit: (commit * 1000) / N };
}
const variants: [string, string[]][] = [['full', []], ['no lookups', ['lookups']], ['no definitions', ['defs']], ['no link rows', ['links']], ['no secondary statement indexes', ['idx']], ['no JSON', ['json']], ['statement row alone', ['lookups', 'defs', 'links', 'idx']]];
for (const rep of [1, 2]) {
  const r0 = raw();
  console.log(`rep ${rep}: raw ${Math.round(r0.rate)}/s at ${PER}/tx, ${(1e6 / r0.rate).toFixed(0)} µs/st of which commit ${r0.commit.toFixed(0)}`);
  for (const [label, skip] of variants) {
    const r = run(label, new Set(skip));
    console.log(`  ${label.padEnd(34)} ${String(Math.round(r.rate)).padStart(6)}/s  ${((100 * r.rate) / r0.rate).toFixed(1)} % of raw  ${(1e6 / r.rate).toFixed(0)} µs/st of which commit ${r.commit.toFixed(0)}`);
  }
}
