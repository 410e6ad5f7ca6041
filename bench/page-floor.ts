/**
 * The floor of a statement page on this machine: a bare node:http handler that reads the plain
 * page (the newest 101 statements of the tenant, not voided) from a loaded Lectern database with
 * one query and writes it as a StatementResult — no routing, authentication, validation or
 * Consistent-Through — beside the same handler serving a canned page, under the bench's query
 * load (8 clients, autocannon in this process, the server in its own).
 *
 *   node bench/page-floor.ts sqlite FILE              # a file loaded by `npm run bench -- --keep DIR`
 *   node bench/page-floor.ts postgres URL             # a database loaded by Lectern
 *
 * Prints req/s and latency of each; Lectern's own plain page under the same load is in the
 * bench's queries table.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';

const args = process.argv.slice(2);
const serving = args[0] === 'serve';
const [backend, target] = serving ? args.slice(1) : args;
const PAGE = 'SELECT seq, stored_ms, "full" FROM statements WHERE tenant = $1 AND voided = 0 ORDER BY seq DESC LIMIT 101';

function page(rows: string[]): string {
  return `{"statements":[${rows.slice(0, 100).join(',')}],"more":"${rows.length > 100 ? '/xAPI/statements?more=x' : ''}"}`;
}

async function serve(): Promise<void> {
  let read: () => Promise<string[]>;
  if (backend === 'sqlite') {
    const db = new DatabaseSync(target, { readOnly: true });
    const q = db.prepare(PAGE.replace('$1', '?').replace('"full"', 'full'));
    q.setReturnArrays(true);
    read = async () => (q.all(1) as unknown as [number, number, string][]).map((r) => r[2]);
  } else {
    const pool = new pg.Pool({ connectionString: target, max: 10, types: { getTypeParser: () => (v: string) => v } as never });
    read = async () => (await pool.query<[string, string, string]>({ text: PAGE, values: [1], rowMode: 'array' })).rows.map((r) => r[2]);
  }
  const canned = Buffer.from(page(await read()));
  createServer((req, res) => {
    if (req.url === '/canned') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(canned);
      return;
    }
    read().then(
      (rows) => res.writeHead(200, { 'content-type': 'application/json' }).end(page(rows)),
      (err: Error) => res.writeHead(500).end(err.message),
    );
  }).listen(0, '127.0.0.1', function (this: import('node:net').Server) {
    process.stdout.write(`listening ${(this.address() as import('node:net').AddressInfo).port}\n`);
  });
}

async function measure(): Promise<void> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'serve', backend, target], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => child.stdout!.on('data', (d: Buffer) => /listening (\d+)/.test(d.toString()) && resolve(Number(/listening (\d+)/.exec(d.toString())![1]))));
  try {
    for (const path of ['/canned', '/page', '/canned', '/page']) {
      const r = await autocannon({ url: `http://127.0.0.1:${port}${path}`, connections: 8, duration: 8 });
      console.log(`${backend} ${path.padEnd(8)} ${Math.round(r.requests.average)} req/s  p50 ${r.latency.p50} ms  p99 ${r.latency.p99} ms  (${r.non2xx} non-2xx)`);
    }
  } finally {
    child.kill();
  }
}

await (serving ? serve() : measure());
