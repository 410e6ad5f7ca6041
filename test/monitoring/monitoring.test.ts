/**
 * Monitoring for real: the built `lectern` with the official Sentry SDK, reporting to a loopback
 * HTTP server that stands in for the ingestion endpoint and parses the envelopes it receives.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { credentialEntries, statement, type TestUser } from '../helpers/lrs.ts';
import { CLI, spawnRunserver } from '../helpers/runserver.ts';

const USER: TestUser = { username: 'monitor', password: 'pw-Zq8-never-leaks', scopes: ['all'], agent: { mbox: 'mailto:monitor@example.com' } };
const AUTH = `Basic ${Buffer.from(`${USER.username}:${USER.password}`).toString('base64')}`;
const BODY_MARKER = 'statement-body-marker-7f3a';
const DSN_SECRET = 'dsnsecret91';

interface Item {
  type: string;
  payload: Record<string, unknown>;
}
interface Envelope {
  raw: string;
  url: string;
  items: Item[];
}

/** The loopback ingestion endpoint: keeps every envelope, raw and parsed. */
class Ingest {
  envelopes: Envelope[] = [];
  private server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      const raw = body.toString('utf8');
      const lines = raw.split('\n').filter(Boolean);
      const items: Item[] = [];
      for (let i = 1; i < lines.length; i += 2) items.push({ type: (JSON.parse(lines[i]) as { type: string }).type, payload: JSON.parse(lines[i + 1] ?? '{}') });
      this.envelopes.push({ raw, url: req.url ?? '', items });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  dsn = '';
  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    const { port } = this.server.address() as { port: number };
    this.dsn = `http://publickey:${DSN_SECRET}@127.0.0.1:${port}/4242`;
  }
  items(type: string): Record<string, unknown>[] {
    return this.envelopes.flatMap((e) => e.items.filter((i) => i.type === type).map((i) => i.payload));
  }
  transactions(): string[] {
    return this.items('transaction').map((t) => String(t.transaction));
  }
  reset(): void {
    this.envelopes = [];
  }
  close(): void {
    this.server.close();
  }
}

const ingest = new Ingest();
let dir: string;

before(async () => {
  await ingest.start();
  dir = mkdtempSync(join(tmpdir(), 'lectern-monitoring-'));
  writeFileSync(join(dir, 'auth.json'), JSON.stringify(await credentialEntries([USER])));
});
after(() => {
  ingest.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs the CLI to its end, asynchronously: the loopback endpoint lives in this process. */
function lectern(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  return new Promise((r) => child.on('exit', (code) => (clearTimeout(timer), r({ code, stderr }))));
}

/** Runs `lectern runserver` with `env`, calls `use(url)`, stops it with SIGTERM (which flushes). */
async function withServer(env: Record<string, string>, use: (url: string, db: string) => Promise<void>): Promise<void> {
  const db = join(dir, `lrs-${Math.random().toString(36).slice(2)}.sqlite`);
  const server = await spawnRunserver({
    args: ['--port', '0'],
    cwd: dir,
    env: { LECTERN_AUTH_FILE: join(dir, 'auth.json'), LECTERN_SQLITE_PATH: db, LECTERN_MONITORING_DSN: ingest.dsn, ...env },
  });
  try {
    await use(server.url, db);
  } finally {
    assert.equal(await server.stop(), 0, server.output());
  }
}

const xapi = { authorization: AUTH, 'x-experience-api-version': '1.0.3' };

/** Requests that carry every kind of secret: Basic credentials, a statement body, an agent in a query. */
async function traffic(url: string): Promise<void> {
  const post = await fetch(`${url}/xAPI/statements`, {
    method: 'POST',
    headers: { ...xapi, 'content-type': 'application/json' },
    body: JSON.stringify(statement({ result: { response: BODY_MARKER } })),
  });
  assert.equal(post.status, 200);
  const get = await fetch(`${url}/xAPI/statements?agent=${encodeURIComponent('{"mbox":"mailto:ben@example.com"}')}`, { headers: xapi });
  assert.equal(get.status, 200);
  // The alternate syntax puts the Authorization header and the statement in the form body.
  const form = new URLSearchParams({
    Authorization: AUTH,
    'X-Experience-API-Version': '1.0.3',
    'Content-Type': 'application/json',
    content: JSON.stringify(statement({ result: { response: BODY_MARKER } })),
  });
  const alt = await fetch(`${url}/xAPI/statements?method=POST`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() });
  assert.equal(alt.status, 200);
  for (const path of ['/lbheartbeat', '/heartbeat', '/__heartbeat__']) assert.equal((await fetch(`${url}${path}`)).status, 200);
}

function assertNoSecret(): void {
  assert.ok(ingest.envelopes.length > 0);
  for (const e of ingest.envelopes) {
    for (const secret of [USER.password, AUTH.slice(6), BODY_MARKER, DSN_SECRET, 'ben@example.com']) {
      assert.ok(!e.raw.includes(secret) && !e.url.includes(secret), `${secret} found in ${e.raw.slice(0, 2000)}`);
    }
  }
}

describe('server monitoring', () => {
  test('an unhandled error arrives as an event with the environment; rate 1.0 sends request transactions; health checks dropped when asked; no secret anywhere', async () => {
    ingest.reset();
    await withServer(
      { LECTERN_EXECUTION_ENVIRONMENT: 'ci-monitoring', LECTERN_MONITORING_LRS_TRACES_SAMPLE_RATE: '1.0', LECTERN_MONITORING_IGNORE_HEALTH_CHECKS: 'true' },
      async (url, db) => {
        await traffic(url);
        // A real server fault: the documents table disappears behind the server's back.
        const sqlite = new DatabaseSync(db);
        sqlite.exec('DROP TABLE documents');
        sqlite.close();
        const res = await fetch(`${url}/xAPI/activities/state?activityId=http://example.com/a&stateId=s&agent=${encodeURIComponent('{"mbox":"mailto:ben@example.com"}')}`, {
          headers: xapi,
        });
        assert.equal(res.status, 500);
      },
    );
    const events = ingest.items('event');
    assert.equal(events.length, 1, JSON.stringify(events).slice(0, 1000));
    const [event] = events as { environment: string; exception: { values: { value: string }[] }; tags: Record<string, string>; transaction: string }[];
    assert.equal(event.environment, 'ci-monitoring');
    assert.match(event.exception.values.at(-1)!.value, /no such table: documents/);
    assert.equal(event.transaction, 'GET /xAPI/activities/state');
    assert.equal(event.tags.program, 'lrs');
    const names = ingest.transactions();
    assert.ok(names.includes('POST /xAPI/statements'), names.join(', '));
    assert.ok(names.includes('GET /xAPI/statements'), names.join(', '));
    assert.ok(!names.some((n) => /heartbeat/.test(n)), names.join(', '));
    for (const t of ingest.items('transaction')) assert.equal(t.environment, 'ci-monitoring');
    assertNoSecret();
  });

  test('rate 0.0 sends no transaction; health checks are reported unless asked not to', async () => {
    ingest.reset();
    await withServer({ LECTERN_MONITORING_LRS_TRACES_SAMPLE_RATE: '0' }, traffic);
    assert.deepEqual(ingest.transactions(), []);
    ingest.reset();
    await withServer({ LECTERN_MONITORING_LRS_TRACES_SAMPLE_RATE: '1' }, traffic);
    const names = ingest.transactions();
    assert.ok(names.includes('GET /lbheartbeat') && names.includes('GET /heartbeat'), names.join(', '));
    for (const t of ingest.items('transaction')) assert.equal(t.environment, 'development');
    assertNoSecret();
  });
});

describe('command-line monitoring', () => {
  test('a failing command arrives as an event with the environment, its transaction too, without the password', async () => {
    ingest.reset();
    const file = join(dir, 'corrupt-auth.json');
    writeFileSync(file, '{not json');
    const r = await lectern(['auth', '-u', 'x', '-p', USER.password, '-s', 'all', '-M', 'mailto:x@example.com', '-w'], {
      LECTERN_AUTH_FILE: file,
      LECTERN_MONITORING_DSN: ingest.dsn,
      LECTERN_EXECUTION_ENVIRONMENT: 'ci-cli',
    });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /not valid JSON/);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    const events = ingest.items('event') as { environment: string; exception: { values: { value: string }[] } }[];
    assert.equal(events.length, 1);
    assert.equal(events[0].environment, 'ci-cli');
    assert.match(events[0].exception.values.at(-1)!.value, /not valid JSON/);
    assert.deepEqual(ingest.transactions(), ['lectern auth']);
    assertNoSecret();
  });

  test("read replicas in the environment and the backend on the command (as on runserver's in a unit file): the command is monitored", async () => {
    ingest.reset();
    const closed = 'postgres://lectern@127.0.0.1:1/lectern';
    const r = await lectern(['export', '--backend', 'postgres', '-o', join(dir, 'never.ndjson')], {
      LECTERN_POSTGRES_URL: closed,
      LECTERN_POSTGRES_READ_URLS: closed,
      LECTERN_POSTGRES_CONNECT_RETRIES: '0',
      LECTERN_MONITORING_DSN: ingest.dsn,
    });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /cannot reach PostgreSQL/);
    const events = ingest.items('event') as { exception: { values: { value: string }[] } }[];
    assert.equal(events.length, 1);
    assert.match(events[0].exception.values.at(-1)!.value, /cannot reach PostgreSQL/);
    assert.deepEqual(ingest.transactions(), ['lectern export']);
  });

  test('with LECTERN_MONITORING_CLI_TRACES_SAMPLE_RATE=0 a successful command sends nothing', async () => {
    ingest.reset();
    const r = await lectern(['auth', '-u', 'y', '-p', USER.password, '-s', 'all', '-M', 'mailto:y@example.com'], {
      LECTERN_MONITORING_DSN: ingest.dsn,
      LECTERN_MONITORING_CLI_TRACES_SAMPLE_RATE: '0',
    });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(ingest.transactions(), []);
    assert.deepEqual(ingest.items('event'), []);
  });

  test('a malformed DSN or a rate outside [0,1] stops start-up with one line naming the variable', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ LECTERN_MONITORING_DSN: 'not a dsn' }, /LECTERN_MONITORING_DSN must look like/],
      [{ LECTERN_MONITORING_DSN: 'http://127.0.0.1/1' }, /LECTERN_MONITORING_DSN .*PUBLIC_KEY/],
      [{ LECTERN_MONITORING_DSN: 'ftp://k@127.0.0.1/1' }, /LECTERN_MONITORING_DSN .*protocol/],
      [{ LECTERN_MONITORING_LRS_TRACES_SAMPLE_RATE: '1.5' }, /LECTERN_MONITORING_LRS_TRACES_SAMPLE_RATE must be a number between 0 and 1/],
      [{ LECTERN_MONITORING_CLI_TRACES_SAMPLE_RATE: '-0.1' }, /LECTERN_MONITORING_CLI_TRACES_SAMPLE_RATE/],
      [{ LECTERN_MONITORING_IGNORE_HEALTH_CHECKS: 'maybe' }, /LECTERN_MONITORING_IGNORE_HEALTH_CHECKS/],
    ];
    for (const [env, message] of cases) {
      const r = await lectern(['runserver', '-p', '0'], env);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.ok(!r.stderr.includes(DSN_SECRET));
    }
  });
});
