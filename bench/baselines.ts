/**
 * The limits Lectern is measured against, each run as its own process by the runner:
 *
 *   node bench/baselines.ts sqlite <file> <seed> <count> <rowsPerTransaction>   # raw database limit
 *   node bench/baselines.ts postgres <url> <seed> <count> <rowsPerCopy>         # raw database limit
 *   node bench/baselines.ts http                                                # HTTP limit (a server)
 *
 * The database limits put the same statement JSON (made before the clock starts) into one table
 * with an integer key and a unique id — the least any LRS must write — in a tight loop: a
 * node:sqlite transaction with Lectern's pragmas, or PostgreSQL COPY (pg-copy-streams). They print
 * one JSON line: { rowsPerSec, seconds, bytesOnDisk }.
 *
 * The HTTP limit is a bare node:http handler on the same Node: it reads the body, decodes it as
 * UTF-8, JSON.parses it and answers 204; GETs get a canned body of the size Lectern's would be.
 * It prints `listening <port>` and serves until SIGTERM.
 */
import { statSync } from 'node:fs';
import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { PAGE_SIZE, WAL_AUTOCHECKPOINT } from '../src/store/sqlite/migrations.ts';
import { statement } from './generate.ts';
import { bytesWritten, type DbLimit } from './harness.ts';

function rows(seed: number, count: number): { id: string; json: string }[] {
  return Array.from({ length: count }, (_, i) => {
    const s = statement(seed, i);
    return { id: s.id, json: JSON.stringify(s) };
  });
}

function sqlite(file: string, seed: number, count: number, perTx: number): DbLimit {
  const data = rows(seed, count);
  const db = new DatabaseSync(file);
  // Lectern's pragmas (page size, WAL, FULL, the checkpoint interval), so the limit is measured as Lectern writes.
  db.exec(`PRAGMA page_size = ${PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = ${WAL_AUTOCHECKPOINT};`);
  db.exec('CREATE TABLE statements (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stored_ms INTEGER NOT NULL, full TEXT NOT NULL)');
  const ins = db.prepare('INSERT INTO statements (id, stored_ms, full) VALUES (?, ?, ?)');
  const written = bytesWritten('self');
  const t0 = performance.now();
  for (let i = 0; i < data.length; i += perTx) {
    db.exec('BEGIN');
    for (let k = i; k < Math.min(i + perTx, data.length); k++) ins.run(data[k].id, Date.now(), data[k].json);
    db.exec('COMMIT');
  }
  const seconds = (performance.now() - t0) / 1000;
  const writtenPerRow = (bytesWritten('self') - written) / count;
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  db.close();
  return { rowsPerSec: count / seconds, seconds, bytesOnDisk: statSync(file).size, writtenPerRow };
}

/** COPY text format: escape backslash and the control characters COPY treats specially. */
const cell = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r');

async function postgres(url: string, seed: number, count: number, perCopy: number): Promise<DbLimit> {
  const data = rows(seed, count);
  const chunks: string[] = [];
  for (let i = 0; i < data.length; i += perCopy) {
    let text = '';
    for (let k = i; k < Math.min(i + perCopy, data.length); k++) text += `${k + 1}\t${data[k].id}\t${Date.now()}\t${cell(data[k].json)}\n`;
    chunks.push(text);
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('DROP TABLE IF EXISTS raw_statements');
    await c.query('CREATE TABLE raw_statements (seq bigint PRIMARY KEY, id uuid NOT NULL UNIQUE, stored_ms bigint NOT NULL, "full" json NOT NULL)');
    const t0 = performance.now();
    for (const text of chunks) {
      await c.query('BEGIN');
      await pipeline(Readable.from([text]), c.query(copyFrom('COPY raw_statements (seq, id, stored_ms, "full") FROM STDIN')));
      await c.query('COMMIT');
    }
    const seconds = (performance.now() - t0) / 1000;
    const size = await c.query<{ n: string }>("SELECT pg_total_relation_size('raw_statements') AS n");
    await c.query('DROP TABLE raw_statements');
    return { rowsPerSec: count / seconds, seconds, bytesOnDisk: Number(size.rows[0].n) };
  } finally {
    await c.end();
  }
}

function http(seed: number): void {
  // A canned page of 100 statements (what a query answers) and a small state document.
  const page = Buffer.from(JSON.stringify({ statements: Array.from({ length: 100 }, (_, i) => statement(seed, i)), more: '/xAPI/statements?limit=100&search_after=1' }));
  const doc = Buffer.from(JSON.stringify({ location: 'page-3', progress: 40, savedAt: '2026-05-01T00:00:00.000Z', answers: { q1: 'lrs', q2: 'lms' } }));
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      if (req.method === 'GET') {
        const body = req.url?.startsWith('/xAPI/statements') ? page : doc;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length, 'x-experience-api-version': '1.0.3' });
        res.end(body);
        return;
      }
      try {
        JSON.parse(utf8.decode(Buffer.concat(parts)));
        res.writeHead(204, { 'x-experience-api-version': '1.0.3' });
      } catch {
        res.writeHead(400);
      }
      res.end();
    });
  });
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address();
    process.stdout.write(`listening ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
  });
  process.once('SIGTERM', () => server.close(() => process.exit(0)));
}

if (import.meta.main) {
  const [mode, target, seed, count, per] = process.argv.slice(2);
  if (mode === 'http') http(Number(target ?? 1));
  else if (mode === 'sqlite') process.stdout.write(`${JSON.stringify(sqlite(target, Number(seed), Number(count), Number(per)))}\n`);
  else if (mode === 'postgres') process.stdout.write(`${JSON.stringify(await postgres(target, Number(seed), Number(count), Number(per)))}\n`);
  else {
    process.stderr.write('usage: baselines.ts sqlite|postgres|http …\n');
    process.exit(2);
  }
}
