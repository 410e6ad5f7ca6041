/**
 * `lectern runserver` on PostgreSQL, as a user runs it (the built CLI): several worker processes
 * on one port, and start-up against a server that cannot be reached.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import bcrypt from 'bcrypt';
import { createDatabase, dropDatabase, postgresSkipped } from '../helpers/postgres.ts';
import { CLI, spawnRunserver } from '../helpers/runserver.ts';

/** Runs the CLI to its end. */
function lectern(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { exited, out: () => stdout, err: () => stderr };
}

const closedPort = () =>
  new Promise<number>((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 1));
    });
  });

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('lectern runserver on PostgreSQL', { skip: postgresSkipped() }, () => {
  let dir: string;
  let authFile: string;
  before(() => {
    assert.ok(existsSync(CLI), 'build first: npm run build');
    dir = mkdtempSync(join(tmpdir(), 'lectern-pg-cli-'));
    authFile = join(dir, 'auth.json');
    writeFileSync(authFile, JSON.stringify([{ username: 'u', hash: bcrypt.hashSync('p', 4), scopes: ['all'], agent: { mbox: 'mailto:u@example.com' } }]));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('LECTERN_RUNSERVER_WORKERS=2: two worker processes serve one port and stop with the primary', async () => {
    const url = await createDatabase();
    const env = { LECTERN_RUNSERVER_BACKEND: 'postgres', LECTERN_POSTGRES_URL: url, LECTERN_AUTH_FILE: authFile, LECTERN_RUNSERVER_WORKERS: '2', LECTERN_POSTGRES_POOL_SIZE: '2' };
    const started = spawnRunserver({ args: ['--port', '0'], env, until: /"url":"(http:[^"]+)","backend":"postgres","workers":2/ });
    try {
      const srv = await started;
      const base = srv.url;
      // Each worker logs its own line; the primary's may come through its pipe first.
      const listening = () => new Set([...srv.stdout().matchAll(/"pid":(\d+),[^\n]*"msg":"Lectern LRS listening on http:\/\/[^" ]+"/g)].map((m) => Number(m[1])));
      for (let i = 0; i < 100 && listening().size < 2; i++) await new Promise((r) => setTimeout(r, 50));
      const workers = listening();
      assert.equal(workers.size, 2, srv.stdout());
      assert.ok(!workers.has(srv.child.pid!), 'the primary does not serve');
      const headers = { authorization: `Basic ${Buffer.from('u:p').toString('base64')}`, 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' };
      const posted = await Promise.all(
        Array.from({ length: 8 }, () =>
          fetch(`${base}/xAPI/statements`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/o' } }),
          }),
        ),
      );
      assert.deepEqual(new Set(posted.map((r) => r.status)), new Set([200]));
      const [id] = (await posted[0].json()) as string[];
      assert.equal((await fetch(`${base}/xAPI/statements?statementId=${id}`, { headers })).status, 200);
      assert.equal(await srv.stop(), 0, srv.stderr());
      for (const pid of workers) assert.ok(!alive(pid), `worker ${pid} outlived the primary`);
    } finally {
      await started.then(
        (srv) => srv.stop('SIGKILL'),
        () => undefined,
      );
      await dropDatabase(url);
    }
  });

  test('an unreachable PostgreSQL: retries with backoff, each logged with how long is left, then exit code 2 and one line naming the server (password masked) and the settings that set the wait', async () => {
    const port = await closedPort();
    const env = {
      LECTERN_RUNSERVER_BACKEND: 'postgres',
      LECTERN_POSTGRES_URL: `postgres://lectern:secret-pw@127.0.0.1:${port}/lrs`,
      LECTERN_AUTH_FILE: authFile,
      LECTERN_POSTGRES_CONNECT_RETRIES: '2',
      LECTERN_POSTGRES_CONNECT_BACKOFF: '10',
    };
    for (const workers of ['1', '3']) {
      const r = lectern(['runserver', '--port', '0'], { ...env, LECTERN_RUNSERVER_WORKERS: workers });
      assert.equal(await r.exited, 2, `workers=${workers}`);
      const lines = r.err().trim().split('\n');
      assert.equal(lines.length, 1, r.err());
      assert.match(lines[0], new RegExp(`cannot reach PostgreSQL at postgres://lectern:\\*\\*\\*@127\\.0\\.0\\.1:${port}/lrs.*ECONNREFUSED.*gave up after 3 attempts`));
      assert.doesNotMatch(r.err() + r.out(), /secret-pw/);
      assert.equal(r.out().match(/retrying in/g)?.length, 2, r.out());
      assert.match(lines[0], /LECTERN_POSTGRES_CONNECT_RETRIES \(2\).*LECTERN_POSTGRES_CONNECT_BACKOFF \(10 ms/);
      // The retries: 10 ms then 20 ms; the first says both are left, the second its own.
      assert.match(r.out(), new RegExp(`waiting for PostgreSQL at 127\\.0\\.0\\.1:${port}: connection refused, retrying in 10 ms \\(attempt 2 of 3; giving up in about 1 s\\)`));
      assert.match(r.out(), /"leftMs":30\b/);
      assert.match(r.out(), /"leftMs":20\b/);
    }
  });

  test("read replicas in the environment, the backend on runserver's command line (a unit file's `runserver --backend postgres`): it serves; auth needs no backend; export takes its own --backend, and without one says both ways", async () => {
    const url = await createDatabase();
    // The "replica" is the primary itself: never read from (it is not a standby), enough for the settings.
    const env = {
      LECTERN_POSTGRES_URL: url,
      LECTERN_POSTGRES_READ_URLS: url,
      LECTERN_AUTH_FILE: authFile,
      LECTERN_POSTGRES_POOL_SIZE: '2',
      LECTERN_SQLITE_PATH: join(dir, 'never.sqlite'),
    };
    const srv = await spawnRunserver({ args: ['--port', '0', '--backend', 'postgres'], env, cwd: dir });
    try {
      const headers = { authorization: `Basic ${Buffer.from('u:p').toString('base64')}`, 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' };
      const posted = await fetch(`${srv.url}/xAPI/statements`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/o' } }),
      });
      assert.equal(posted.status, 200);
      const [id] = (await posted.json()) as string[];
      const auth = lectern(['auth', '-u', 'ops', '-p', 'pw', '-s', 'all', '-M', 'mailto:ops@example.com'], env);
      assert.equal(await auth.exited, 0, auth.err());
      assert.equal(JSON.parse(auth.out()).username, 'ops');
      const file = join(dir, 'replicas-export.ndjson');
      const exported = lectern(['export', '--backend', 'postgres', '-o', file], env);
      assert.equal(await exported.exited, 0, exported.err());
      assert.deepEqual(
        readFileSync(file, 'utf8')
          .trim()
          .split('\n')
          .map((l) => (JSON.parse(l) as { id: string }).id),
        [id],
      );
      const refused = lectern(['export', '-o', join(dir, 'refused.ndjson')], env);
      assert.equal(await refused.exited, 2);
      assert.equal(refused.err().trim().split('\n').length, 1, refused.err());
      assert.match(refused.err(), /LECTERN_POSTGRES_READ_URLS needs the postgres backend: LECTERN_RUNSERVER_BACKEND=postgres or --backend postgres/);
      assert.ok(!existsSync(join(dir, 'never.sqlite')), 'no SQLite file made');
    } finally {
      await srv.stop();
      await dropDatabase(url);
    }
  });

  test('more than one worker needs the postgres backend', async () => {
    const r = lectern(['runserver', '--port', '0', '--workers', '2'], { LECTERN_SQLITE_PATH: join(dir, 'x.sqlite'), LECTERN_AUTH_FILE: authFile });
    assert.equal(await r.exited, 2);
    assert.match(r.err(), /LECTERN_RUNSERVER_WORKERS=2 needs the postgres backend/);
    assert.equal(r.err().trim().split('\n').length, 1);
  });
});
