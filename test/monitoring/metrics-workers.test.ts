/**
 * GET /metrics of `lectern runserver` with LECTERN_RUNSERVER_WORKERS=2 (the built CLI, PostgreSQL:
 * SQLite runs in one process): one scrape of the shared port answers for the whole server, every
 * time. Counters are the workers' sums, a process's own figures carry a `worker` label, and the
 * database's figures are read once, not added up per worker. The alert rules find their series on
 * it, and `promtool check metrics` accepts it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { credentialEntries, postgresBackend, statement } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { type Runserver, spawnRunserver } from '../helpers/runserver.ts';
import { freePort, requireTool } from '../helpers/tools.ts';

const USER = { username: 'u', password: 'p', scopes: ['all'], agent: { mbox: 'mailto:u@example.com' } };
const AUTH = `Basic ${Buffer.from('u:p').toString('base64')}`;

/** One request on a connection of its own (no keep-alive): the cluster hands each connection to the next worker. */
function fresh(url: string, method: string, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(url, {
      method,
      agent: false,
      headers: { authorization: AUTH, 'x-experience-api-version': '1.0.3', ...(data && { 'content-type': 'application/json' }) },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parse(exposition: string): Sample[] {
  const out: Sample[] = [];
  for (const line of exposition.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

const named = (samples: Sample[], name: string) => samples.filter((s) => s.name === name);

describe('GET /metrics with two worker processes (postgres)', { skip: postgresSkipped() }, () => {
  let srv: Runserver;
  let dir: string;
  const N = 12;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lectern-metrics-workers-'));
    writeFileSync(join(dir, 'auth.json'), JSON.stringify(await credentialEntries([USER])));
    // A target on a closed port: every stored statement stays queued (or dead), a figure of the database.
    const target = { is_active: true, url: `http://127.0.0.1:${await freePort()}/xAPI/statements`, basic_username: 'f', basic_password: 'f', max_retries: 1000, timeout: 1 };
    srv = await spawnRunserver({
      backend: postgresBackend,
      cwd: dir,
      args: ['--port', '0'],
      until: 'workers',
      env: {
        LECTERN_AUTH_FILE: join(dir, 'auth.json'),
        LECTERN_RUNSERVER_WORKERS: '2',
        LECTERN_POSTGRES_POOL_SIZE: '2',
        LECTERN_XAPI_FORWARDINGS: JSON.stringify([target]),
      },
    });
    // Each POST on its own connection: the statements are stored by both workers.
    const posted = await Promise.all(Array.from({ length: N }, () => fresh(`${srv.url}/xAPI/statements`, 'POST', statement())));
    assert.deepEqual(new Set(posted.map((r) => r.status)), new Set([200]), posted.map((r) => r.text).join('\n'));
  });
  after(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const scrape = async () => {
    const r = await fresh(`${srv.url}/metrics`, 'GET');
    assert.equal(r.status, 200, r.text);
    return r.text;
  };

  test('every scrape, whichever worker answers it, counts the statements both stored', async () => {
    for (let i = 0; i < 6; i++) {
      const samples = parse(await scrape());
      const stored = named(samples, 'lectern_statements_stored_total');
      assert.deepEqual(
        stored.map((s) => [s.labels, s.value]),
        [[{}, N]],
        `scrape ${i + 1}`,
      );
      const posts = named(samples, 'lectern_http_requests_total').filter((s) => s.labels.route === '/xAPI/statements' && s.labels.method === 'POST');
      assert.deepEqual(
        posts.map((s) => [s.labels.status, s.value]),
        [['200', N]],
        `scrape ${i + 1}`,
      );
      // Summed series carry no worker label.
      assert.ok(posts.every((s) => !('worker' in s.labels)));
    }
  });

  test("a process's own figures carry a worker label, one series per worker", async () => {
    const samples = parse(await scrape());
    for (const name of ['process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'lectern_request_bodies_max_bytes']) {
      const series = named(samples, name);
      assert.equal(series.length, 2, `${name}: ${JSON.stringify(series)}`);
      assert.equal(new Set(series.map((s) => s.labels.worker)).size, 2, `${name}: ${JSON.stringify(series)}`);
      assert.ok(
        series.every((s) => /^\d+$/.test(s.labels.worker ?? '')),
        name,
      );
    }
  });

  test("the database's figures are read once, not added up per worker; the pools are the server's", async () => {
    const samples = parse(await scrape());
    const waiting = (name: string) => named(samples, name).reduce((sum, s) => sum + s.value, 0);
    assert.equal(waiting('lectern_forwarding_queued') + waiting('lectern_forwarding_dead'), N);
    assert.equal(named(samples, 'lectern_forwarding_queued').length, 1);
    // Two workers of LECTERN_POSTGRES_POOL_SIZE=2: what the server may open against max_connections.
    assert.deepEqual(
      named(samples, 'lectern_db_pool_max').map((s) => [s.labels, s.value]),
      [[{}, 4]],
    );
  });

  test('a worker that dies: scrapes keep answering, its counts stay in the sums, its replacement reports under a new worker id', async () => {
    const before = new Set(named(parse(await scrape()), 'process_start_time_seconds').map((s) => s.labels.worker));
    const pids = [...srv.stdout().matchAll(/"pid":(\d+),[^\n]*"msg":"Lectern LRS listening on http:/g)].map((m) => Number(m[1])).filter((pid) => pid !== srv.child.pid);
    assert.equal(pids.length, 2, srv.stdout());
    process.kill(pids[0]!, 'SIGKILL');
    // Once the primary has seen it die, no connection goes to it.
    for (let i = 0; i < 200 && !srv.stdout().includes('a worker process died'); i++) await new Promise((r) => setTimeout(r, 50));
    // Every scrape answers meanwhile (from one worker, then two); the replacement has a new worker id.
    let workers = before;
    for (let i = 0; i < 200 && (workers.size < 2 || [...workers].every((w) => before.has(w))); i++) {
      const samples = parse(await scrape());
      // Counters never go back (Prometheus would read a reset): the dead worker's part stays.
      assert.equal(named(samples, 'lectern_statements_stored_total')[0]?.value, N);
      workers = new Set(named(samples, 'process_start_time_seconds').map((s) => s.labels.worker));
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(workers.size, 2, [...workers].join());
    assert.ok(
      [...workers].some((w) => !before.has(w)),
      'the replacement reports under its own worker id',
    );
  });

  test('every metric and label the alert rules read is on the scrape', async () => {
    // A refused write: the rejection series exist once used.
    assert.equal((await fresh(`${srv.url}/xAPI/statements`, 'POST', { not: 'a statement' })).status, 400);
    const samples = parse(await scrape());
    const rules = readFileSync(fileURLToPath(new URL('../../deploy/prometheus/lectern-alerts.yml', import.meta.url)), 'utf8');
    for (const [, name] of rules.matchAll(/\b(lectern_\w+)/g)) assert.ok(named(samples, name!).length, `${name} is not on the scrape`);
    for (const [, name, matchers] of rules.matchAll(/\b(lectern_\w+)\{([^}]*)\}/g)) {
      for (const [, label] of matchers!.matchAll(/(\w+)\s*=~?/g)) {
        if (label === 'job' || label === 'instance') continue;
        assert.ok(
          named(samples, name!).some((s) => label! in s.labels),
          `${name} has no label ${label}`,
        );
      }
    }
  });

  test('promtool check metrics accepts the scrape', async () => {
    const text = await scrape();
    const r = spawnSync(requireTool('promtool', 'prometheus'), ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 60_000 });
    // 0: clean; 3: lint findings (1 would be text it cannot parse). The only findings allowed are
    // prom-client's own gauges that end in _total, which Lectern does not name.
    assert.ok(r.status === 0 || r.status === 3, `${r.status}: ${r.stdout}${r.stderr}`);
    const findings = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l.trim());
    for (const f of findings) assert.match(f, /^nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/);
    // One HELP and one TYPE per metric: the parts of the scrape do not repeat a name.
    const types = [...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]);
    assert.equal(new Set(types).size, types.length);
  });
});
