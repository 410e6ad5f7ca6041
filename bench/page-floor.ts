/**
 * The floor of a statement page on this machine: a bare node:http handler that reads a page from
 * a loaded Lectern database with one query and writes it as a StatementResult — no routing,
 * authentication, validation or Consistent-Through — beside the same handler serving a canned
 * page, under the bench's query load (8 clients, autocannon in this process, the server in its
 * own). Without a filter the page is the plain one (the newest 101 statements of the tenant, not
 * voided); with one of the bench's filter names (bench/generate.ts queryFilters), it is that
 * filter's first page as Lectern's own query builder writes it (src/store/sql.ts: its values'
 * ids and its driver resolved once, before the clock), so the floor of that filter.
 *
 *   node bench/page-floor.ts sqlite FILE              # a file loaded by `npm run bench -- --keep DIR`
 *   node bench/page-floor.ts postgres URL             # a database loaded by Lectern
 *   node bench/page-floor.ts postgres URL 'agent (busy learner)' 'verb (34 %)'
 *
 * Prints req/s and latency of each; Lectern's own pages under the same load are in the bench's
 * queries table.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { filterKeyIds, SESSION_OPTIONS } from '../src/store/postgres/store.ts';
import { cacheSize } from '../src/store/sqlite/migrations.ts';
import { type Driver, DRIVER_COUNT_CAP, driverCountsSql, drivers, POSTGRES, rarestDriver, SQLITE, statementPageSql } from '../src/store/sql.ts';
import { parseStatementRequest, type StatementQuery } from '../src/xapi/query.ts';
import { queryFilters } from './generate.ts';

const args = process.argv.slice(2);
const serving = args[0] === 'serve';
const [backend, target, ...filters] = serving ? args.slice(1) : args;
const PLAIN = 'SELECT seq, stored_ms, "full" FROM statements WHERE tenant = $1 AND voided = 0 ORDER BY seq DESC LIMIT 101';
const SEED = 20261123;

function page(rows: string[]): string {
  return `{"statements":[${rows.slice(0, 100).join(',')}],"more":"${rows.length > 100 ? '/xAPI/statements?more=x' : ''}"}`;
}

/** A bench filter as the request parser makes it. */
function queryOf(name: string): StatementQuery {
  const parsed = parseStatementRequest({ ...queryFilters(SEED)[name], limit: '100' }, { maxLimit: 100, maxBytes: 4 * 1024 * 1024, onlyMine: false });
  if (parsed.kind !== 'query') throw new Error(`${name}: not a query`);
  return parsed.query;
}

/** The page query of a bench filter, as the store builds it (the default tenant's id is 1). */
async function filterPage(q: StatementQuery, count: (sql: string, params: unknown[]) => Promise<Record<string, unknown>>, ids?: Map<string, number>) {
  const dialect = backend === 'sqlite' ? SQLITE : POSTGRES;
  let driver: Driver | undefined;
  if (drivers(q.filter).length > 1) {
    const c = driverCountsSql(1, q.filter, DRIVER_COUNT_CAP, dialect);
    driver = rarestDriver(await count(c.sql, c.params));
  }
  return statementPageSql(1, q, {}, dialect, { ids, driver });
}

async function serve(): Promise<void> {
  let read: () => Promise<string[]>;
  const [name] = filters;
  if (backend === 'sqlite') {
    const db = new DatabaseSync(target, { readOnly: true });
    db.exec(`PRAGMA cache_size = ${cacheSize()}`); // as Lectern's connections (LECTERN_SQLITE_CACHE_SIZE's default)
    const { sql, params } = name ? await filterPage(queryOf(name), async (s, p) => db.prepare(s).get(...(p as never[])) as Record<string, unknown>) : { sql: PLAIN.replace('$1', '?').replace('"full"', 'full'), params: [1] };
    const q = db.prepare(sql);
    q.setReturnArrays(true);
    read = async () => (q.all(...(params as never[])) as unknown as [number, number, string][]).map((r) => r[2]);
  } else {
    const pool = new pg.Pool({ connectionString: target, max: 10, options: SESSION_OPTIONS, types: { getTypeParser: () => (v: string) => v } as never });
    let sql = PLAIN;
    let params: unknown[] = [1];
    if (name) {
      const q = queryOf(name);
      const ids = await filterKeyIds((text, values) => pool.query<{ id: number; key: string }>(text, values), 1, q.filter);
      ({ sql, params } = await filterPage(q, async (s, p) => (await pool.query(s, p)).rows[0] as Record<string, unknown>, ids));
    }
    read = async () => (await pool.query<[string, string, string]>({ text: sql, values: params, rowMode: 'array' })).rows.map((r) => r[2]);
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
  for (const name of filters.length ? filters : ['']) await measureOne(name);
}

async function measureOne(name: string): Promise<void> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'serve', backend, target, ...(name ? [name] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => child.stdout!.on('data', (d: Buffer) => /listening (\d+)/.test(d.toString()) && resolve(Number(/listening (\d+)/.exec(d.toString())![1]))));
  try {
    for (const path of ['/canned', '/page', '/canned', '/page']) {
      const r = await autocannon({ url: `http://127.0.0.1:${port}${path}`, connections: 8, duration: 8 });
      console.log(`${backend} ${(name || 'plain').padEnd(42)} ${path.padEnd(8)} ${Math.round(r.requests.average)} req/s  p50 ${r.latency.p50} ms  p99 ${r.latency.p99} ms  (${r.non2xx} non-2xx)`);
    }
  } finally {
    child.kill();
  }
}

await (serving ? serve() : measure());
