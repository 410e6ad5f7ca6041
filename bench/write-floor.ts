/**
 * The floor of a durable single-statement write on this machine: a bare node:http handler that
 * parses the statement and stores it in one table (integer key, unique id, JSON) before answering,
 * requests arriving together committed in one transaction (group commit, as Lectern does), beside
 * the same handler answering without storing — the bench's "bare handler" limit. 32 autocannon
 * clients POST the bench's statements, as the bench's single-statement workload does.
 *
 *   node bench/write-floor.ts sqlite
 *   node bench/write-floor.ts postgres URL     # a database the script may create a table in
 *
 * SQLite: WAL, synchronous=FULL and Lectern's page size and checkpoint interval; PostgreSQL:
 * one INSERT … unnest per group on one connection, committed with the server's defaults.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { PAGE_SIZE, WAL_AUTOCHECKPOINT } from '../src/store/sqlite/migrations.ts';
import { statement } from './generate.ts';

const args = process.argv.slice(2);
const serving = args[0] === 'serve';
const [backend, target] = serving ? args.slice(1) : args;

interface Pending {
  id: string;
  json: string;
  res: ServerResponse;
}

async function serve(): Promise<void> {
  let write: (group: Pending[]) => Promise<void>;
  let cleanup = () => undefined as void;
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'lectern-write-floor-'));
    const db = new DatabaseSync(join(dir, 'floor.sqlite'));
    db.exec(`PRAGMA page_size = ${PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = ${WAL_AUTOCHECKPOINT};`);
    db.exec('CREATE TABLE statements (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stored_ms INTEGER NOT NULL, full TEXT NOT NULL)');
    const ins = db.prepare('INSERT INTO statements (id, stored_ms, full) VALUES (?, ?, ?)');
    write = async (group) => {
      db.exec('BEGIN IMMEDIATE');
      for (const p of group) ins.run(p.id, Date.now(), p.json);
      db.exec('COMMIT');
    };
    cleanup = () => rmSync(dir, { recursive: true, force: true });
  } else {
    const c = new pg.Client({ connectionString: target });
    await c.connect();
    await c.query('DROP TABLE IF EXISTS write_floor');
    await c.query('CREATE TABLE write_floor (seq bigserial PRIMARY KEY, id uuid NOT NULL UNIQUE, stored_ms bigint NOT NULL, "full" json NOT NULL)');
    write = async (group) => {
      await c.query({
        name: 'floor_insert',
        text: 'INSERT INTO write_floor (id, stored_ms, "full") SELECT i, $1::bigint, f FROM ROWS FROM (unnest($2::uuid[]), json_array_elements($3::json)) AS t(i, f)',
        values: [Date.now(), group.map((p) => p.id), `[${group.map((p) => p.json).join(',')}]`],
      });
    };
  }
  // Group commit: what arrives while a group is written is the next group.
  let queue: Pending[] = [];
  let writing = false;
  const drain = async () => {
    while (queue.length) {
      const group = queue;
      queue = [];
      await write(group);
      for (const p of group) p.res.writeHead(200, { 'content-type': 'application/json' }).end(`["${p.id}"]`);
    }
    writing = false;
  };
  createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const s = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      // A fresh id per request (as a POST without one): the load repeats its statements.
      const id = randomUUID();
      const p = { id, json: JSON.stringify({ ...s, id }), res };
      if (req.url === '/bare') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(`["${id}"]`);
        return;
      }
      queue.push(p);
      if (!writing) {
        writing = true;
        setImmediate(() => void drain());
      }
    });
  }).listen(0, '127.0.0.1', function (this: import('node:net').Server) {
    process.stdout.write(`listening ${(this.address() as AddressInfo).port}\n`);
  });
  process.on('SIGTERM', () => {
    cleanup();
    process.exit(0);
  });
}

async function measure(): Promise<void> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'serve', backend, target ?? ''], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) =>
    child.stdout!.on('data', (d: Buffer) => {
      const m = /listening (\d+)/.exec(d.toString());
      if (m) resolve(Number(m[1]));
    }),
  );
  const bodies = Array.from({ length: 2000 }, (_, i) => JSON.stringify(statement(20261123, i)));
  let n = 0;
  try {
    for (const path of ['/bare', '/store', '/bare', '/store']) {
      const r = await autocannon({
        url: `http://127.0.0.1:${port}${path}`,
        connections: 32,
        duration: 8,
        requests: [{ method: 'POST', headers: { 'content-type': 'application/json' }, setupRequest: (req) => ({ ...req, body: bodies[n++ % bodies.length] }) }],
      });
      console.log(`${backend} ${path.padEnd(7)} ${Math.round(r.requests.average)} req/s  p50 ${r.latency.p50} ms  p99 ${r.latency.p99} ms  (${r.non2xx} non-2xx, ${r.errors} errors)`);
    }
  } finally {
    child.kill('SIGTERM');
  }
}

await (serving ? serve() : measure());
