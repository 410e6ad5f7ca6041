/**
 * Lectern benchmark: statement writes and reads through the real HTTP server (a child process,
 * SQLite backend), each reported against a baseline measured in the same run on the same machine:
 * a raw node:sqlite insert loop of the same statement JSON into a one-table schema.
 *
 *   npm run bench                # default sizes
 *   BENCH_STATEMENTS=50000 npm run bench
 *
 * Prints a table; the figures that matter are the ratios (Lectern / raw), which are stable across
 * machines far more than absolute rates.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import bcrypt from 'bcrypt';
import { questionActivity, SCORED_RESULT } from './fixtures.ts';

const TOTAL = Number(process.env.BENCH_STATEMENTS ?? 20000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const SYNC = process.env.BENCH_SQLITE_SYNCHRONOUS ?? 'FULL';
const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

/** A realistic ~1 KB statement. */
function makeStatement(i: number): Record<string, unknown> {
  return {
    id: randomUUID(),
    actor: { objectType: 'Agent', name: `Learner ${i % 500}`, mbox: `mailto:learner${i % 500}@example.com` },
    verb: { id: 'http://adlnet.gov/expapi/verbs/answered', display: { 'en-US': 'answered' } },
    object: questionActivity(`http://example.com/course/q${i % 200}`, `Question ${i % 200}`),
    result: SCORED_RESULT,
    context: {
      registration: randomUUID(),
      contextActivities: { parent: [{ id: 'http://example.com/course' }], grouping: [{ id: 'http://example.com/program' }] },
      platform: 'bench',
      language: 'en-US',
    },
    timestamp: new Date(1_700_000_000_000 + i * 1000).toISOString(),
  };
}

/** Baseline: the fastest plain way to put the same JSON in SQLite (same pragmas, same batches). */
function rawSqlite(dir: string, statements: Record<string, unknown>[], batch: number): number {
  const db = new DatabaseSync(join(dir, `raw-${batch}.sqlite`));
  db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = ${SYNC};`);
  db.exec('CREATE TABLE statements (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stored_ms INTEGER NOT NULL, full TEXT NOT NULL)');
  const ins = db.prepare('INSERT INTO statements (id, stored_ms, full) VALUES (?, ?, ?)');
  const t0 = performance.now();
  for (let i = 0; i < statements.length; i += batch) {
    db.exec('BEGIN');
    for (const s of statements.slice(i, i + batch)) ins.run(s.id as string, Date.now(), JSON.stringify(s));
    db.exec('COMMIT');
  }
  const secs = (performance.now() - t0) / 1000;
  db.close();
  return statements.length / secs;
}

async function startServer(dir: string): Promise<{ url: string; child: ChildProcess }> {
  const authFile = join(dir, 'auth.json');
  writeFileSync(authFile, JSON.stringify([{ username: 'bench', hash: bcrypt.hashSync('bench', 4), scopes: ['all'], agent: { mbox: 'mailto:bench@example.com' } }]));
  const child = spawn(process.execPath, [CLI, 'runserver', '--port', '0'], {
    env: {
      PATH: process.env.PATH ?? '',
      LECTERN_SQLITE_PATH: join(dir, 'lectern.sqlite'),
      LECTERN_SQLITE_SYNCHRONOUS: SYNC,
      LECTERN_AUTH_FILE: authFile,
      LECTERN_LOG_LEVEL: 'info',
      // Request logs go to a pipe nobody reads quickly: keep them, they are part of the real cost.
      LECTERN_RUNSERVER_MAX_SEARCH_HITS_COUNT: '500',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // The port comes from the server's 'listening' log line (port 0 picks a free one).
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (c) => reject(new Error(`server exited ${c}: ${out}`)));
    const poll = setInterval(() => {
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) {
        clearInterval(poll);
        resolve(Number(m[1]));
      }
    }, 20);
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

const HEADERS = {
  authorization: `Basic ${Buffer.from('bench:bench').toString('base64')}`,
  'x-experience-api-version': '1.0.3',
  'content-type': 'application/json',
};

/** POSTs all statements in batches of `batch`, `CONCURRENCY` requests in flight; statements/s. */
async function postAll(url: string, statements: Record<string, unknown>[], batch: number): Promise<number> {
  const bodies: string[] = [];
  for (let i = 0; i < statements.length; i += batch) bodies.push(JSON.stringify(statements.slice(i, i + batch)));
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++];
        const res = await fetch(`${url}/xAPI/statements`, { method: 'POST', headers: HEADERS, body });
        if (res.status !== 200) throw new Error(`POST ${res.status}: ${await res.text()}`);
        await res.arrayBuffer();
      }
    }),
  );
  return statements.length / ((performance.now() - t0) / 1000);
}

/** Pages through every statement with `limit`, following `more`; statements/s read. */
async function readAll(url: string, query: string, limit: number): Promise<{ rate: number; count: number }> {
  let next = `/xAPI/statements?limit=${limit}${query}`;
  let count = 0;
  const t0 = performance.now();
  while (next) {
    const res = await fetch(`${url}${next}`, { headers: HEADERS });
    const body = (await res.json()) as { statements: unknown[]; more: string };
    count += body.statements.length;
    next = body.more;
  }
  return { rate: count / ((performance.now() - t0) / 1000), count };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-bench-'));
  const rows: string[][] = [];
  try {
    console.log(`Lectern benchmark: ${TOTAL} statements, ${CONCURRENCY} concurrent requests, SQLite synchronous=${SYNC}`);
    console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}\n`);
    const { url, child } = await startServer(dir);
    try {
      for (const batch of [1, 10, 100]) {
        const n = batch === 1 ? Math.min(TOTAL, 5000) : TOTAL;
        const raw = rawSqlite(dir, Array.from({ length: n }, (_, i) => makeStatement(i)), batch);
        const lectern = await postAll(url, Array.from({ length: n }, (_, i) => makeStatement(i)), batch);
        rows.push([`POST batches of ${batch}`, fmt(lectern), fmt(raw), (lectern / raw).toFixed(2)]);
      }
      const all = await readAll(url, '', 500);
      const agent = await readAll(url, `&agent=${encodeURIComponent(JSON.stringify({ mbox: 'mailto:learner7@example.com' }))}`, 100);
      const db = new DatabaseSync(join(dir, 'raw-100.sqlite'));
      const t0 = performance.now();
      let n = 0;
      for (const r of db.prepare('SELECT full FROM statements ORDER BY seq DESC').iterate()) n += (r as { full: string }).full.length > 0 ? 1 : 0;
      const rawRead = n / ((performance.now() - t0) / 1000);
      db.close();
      rows.push([`GET all, pages of 500 (${all.count})`, fmt(all.rate), fmt(rawRead), (all.rate / rawRead).toFixed(2)]);
      rows.push([`GET agent filter, pages of 100 (${agent.count})`, fmt(agent.rate), fmt(rawRead), (agent.rate / rawRead).toFixed(2)]);
    } finally {
      child.kill('SIGTERM');
    }
    const head = ['workload', 'Lectern statements/s', 'raw SQLite statements/s', 'ratio'];
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
    console.log(line(head));
    console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
    for (const r of rows) console.log(line(r));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
