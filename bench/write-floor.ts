/**
 * The floor of a durable single-statement write on this machine: a bare node:http handler that
 * parses the statement and stores it in one table (integer key, unique id, JSON) before answering,
 * requests arriving together committed in one transaction (group commit, as Lectern does), beside
 * the same handler answering without storing — the bench's "bare handler" limit. 32 autocannon
 * clients POST the bench's statements, as the bench's single-statement workload does.
 *
 * `/lectern`: the same handler storing through Lectern's own store (src/store: its layout, insert
 * rules and group commit) after Lectern's statement preparation (src/xapi/statement.ts): the
 * ceiling of a single write with Lectern's storage, with no HTTP framework, validation, auth,
 * logging or metrics.
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
import type { Store } from '../src/store/types.ts';
import { prepareStatement } from '../src/xapi/statement.ts';
import type { Actor, Statement } from '../src/xapi/types.ts';
import { statement } from './generate.ts';
import { AUTHORIZATION, startLectern } from './harness.ts';

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
  let store: Store;
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'lectern-write-floor-'));
    store = new (await import('../src/store/sqlite/store.ts')).SqliteStore({ path: join(dir, 'lectern.sqlite') });
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
    const { PostgresStore } = await import('../src/store/postgres/store.ts');
    store = new PostgresStore({ url: target, poolSize: 10, statementTimeoutMs: 0, connectTimeoutMs: 5000, connectRetries: 0, connectBackoffMs: 100 });
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
  await store.migrate();
  const authority: Actor = { objectType: 'Agent', mbox: 'mailto:bench@example.com' };
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
      if (req.url === '/bare') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(`["${id}"]`);
        return;
      }
      if (req.url === '/lectern') {
        store.insertStatements('', [prepareStatement({ ...s, id } as unknown as Statement, authority, '1.0.3')], []).then(
          (o) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(o.ids)),
          (err: Error) => res.writeHead(500).end(err.message),
        );
        return;
      }
      queue.push({ id, json: JSON.stringify({ ...s, id }), res });
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
  // Without their ids: every request stores a new statement (each handler, and Lectern, assigns one).
  const bodies = Array.from({ length: 2000 }, (_, i) => JSON.stringify({ ...statement(20261123, i), id: undefined }));
  const dir = mkdtempSync(join(tmpdir(), 'lectern-write-floor-server-'));
  const lectern = await startLectern({ backend: backend as 'sqlite' | 'postgres', dir, sqlitePath: join(dir, 'lectern.sqlite'), postgresUrl: target });
  const headers = { 'content-type': 'application/json', authorization: AUTHORIZATION, 'x-experience-api-version': '1.0.3' };
  let n = 0;
  try {
    for (const round of [1, 2]) {
      for (const url of [`http://127.0.0.1:${port}/bare`, `http://127.0.0.1:${port}/store`, `http://127.0.0.1:${port}/lectern`, `${lectern.url}/xAPI/statements`]) {
        const r = await autocannon({
          url,
          connections: 32,
          duration: 8,
          requests: [{ method: 'POST', headers, setupRequest: (req) => ({ ...req, body: bodies[n++ % bodies.length] }) }],
        });
        const what = url.startsWith(lectern.url) ? 'lectern runserver' : new URL(url).pathname;
        console.log(`${backend} round ${round} ${what.padEnd(17)} ${String(Math.round(r.requests.average)).padStart(6)} req/s  p50 ${r.latency.p50} ms  p99 ${r.latency.p99} ms  (${r.non2xx} non-2xx, ${r.errors} errors)`);
      }
    }
  } finally {
    child.kill('SIGTERM');
    await lectern.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await (serving ? serve() : measure());
