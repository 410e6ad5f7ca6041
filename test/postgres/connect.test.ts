/**
 * Start-up against a PostgreSQL that is not there or refuses us, as an operator meets it (the
 * built CLI): what is worth retrying (a refused connection: the server may be starting) is
 * retried by `runserver`, which says at once that it waits and why, while a one-shot command gives
 * up after a short wait; what retrying cannot mend (an unknown host, a wrong password, no TLS, a
 * database that cannot be created) fails at once. Every message names LECTERN_POSTGRES_URL and
 * the host, never the password. The waits are set long (LECTERN_POSTGRES_CONNECT_BACKOFF): a
 * failure that was retried would not end within the test's own time limit.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { adminUrl, findPgBin, type PgCluster, postgresSkipped, startCluster } from '../helpers/postgres.ts';
import { CLI, spawnRunserver } from '../helpers/runserver.ts';
import { freePort } from '../helpers/tools.ts';

/** Runs the CLI to its end: its exit code and output. */
function lectern(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** The last line of stderr: the command's one-line error (warnings logged before it are JSON lines). */
const errorLine = (stderr: string) => stderr.trim().split('\n').at(-1) ?? '';

/** Retries, were they made, that would outlast the test: 30 s before the first (the backoff's cap), 2½ minutes in all. */
const PATIENT = { LECTERN_POSTGRES_CONNECT_RETRIES: '5', LECTERN_POSTGRES_CONNECT_BACKOFF: '600000' };

/**
 * `runserver` and a one-shot command (`credentials list`) on `url`: both exit 2 at once with one
 * line matching `expected`, naming the setting and never the password, and neither waited.
 */
async function refusedAtOnce(dir: string, url: string, expected: RegExp, password?: string): Promise<void> {
  const env = { LECTERN_RUNSERVER_BACKEND: 'postgres', LECTERN_POSTGRES_URL: url, LECTERN_AUTH_FILE: join(dir, 'auth.json'), ...PATIENT };
  for (const args of [
    ['runserver', '--port', '0'],
    ['credentials', 'list'],
  ]) {
    const r = await lectern(args, env);
    assert.equal(r.code, 2, `${args[0]}: ${r.stderr}`);
    const line = errorLine(r.stderr);
    assert.match(line, /^lectern: error: /, args[0]);
    assert.match(line, /LECTERN_POSTGRES_URL/, args[0]);
    assert.match(line, expected, args[0]);
    assert.doesNotMatch(r.stdout + r.stderr, /waiting for PostgreSQL|retrying/, `${args[0]} retried: ${r.stdout}${r.stderr}`);
    if (password) assert.ok(!(r.stdout + r.stderr).includes(password), `${args[0]} shows the password`);
  }
}

describe('start-up against a PostgreSQL that is unreachable or refuses', { skip: postgresSkipped() }, () => {
  let dir: string;
  before(() => {
    assert.ok(existsSync(CLI), 'build first: npm run build');
    dir = mkdtempSync(join(tmpdir(), 'lectern-pg-connect-'));
    writeFileSync(join(dir, 'auth.json'), '[]');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('an unknown host (a name under .invalid) is not retried: runserver and a command name it at once', { timeout: 60_000 }, async () => {
    await refusedAtOnce(dir, 'postgres://lectern:host-pw@lectern-db.invalid:5432/lrs', /unknown host lectern-db\.invalid.*ENOTFOUND/, 'host-pw');
  });

  test('a server without TLS, asked for it (sslmode=require), is not retried', { timeout: 60_000 }, async () => {
    const url = new URL(await adminUrl());
    url.pathname = '/lrs';
    url.searchParams.set('sslmode', 'require');
    await refusedAtOnce(dir, url.toString(), new RegExp(`${url.hostname}:${url.port}.*does not support SSL.*sslmode`));
  });

  test('a closed port: runserver says at once that it waits, for what and why, and keeps waiting', { timeout: 60_000 }, async () => {
    const port = await freePort();
    const srv = spawnRunserver({
      cwd: dir,
      args: ['--port', '0'],
      env: {
        LECTERN_RUNSERVER_BACKEND: 'postgres',
        LECTERN_POSTGRES_URL: `postgres://lectern:closed-pw@127.0.0.1:${port}/lrs`,
        LECTERN_AUTH_FILE: join(dir, 'auth.json'),
        ...PATIENT,
      },
      // Its first wait is the backoff's cap, 30 s: the line comes before it, or not in time.
      until: new RegExp(`waiting for PostgreSQL at 127\\.0\\.0\\.1:${port}: connection refused, retrying in 30000 ms`),
      timeoutMs: 20_000,
    });
    const running = await srv;
    try {
      assert.match(running.stdout(), /attempt 2 of 6/);
      assert.ok(!running.output().includes('closed-pw'), running.output());
      assert.equal(running.child.exitCode, null, 'still waiting');
    } finally {
      await running.stop();
    }
  });

  test('a closed port: a command gives up after a short wait, with exit code 2 and a line naming the setting and the host', { timeout: 60_000 }, async () => {
    const port = await freePort();
    // The defaults: runserver would wait ≈ 2½ minutes.
    const r = await lectern(['credentials', 'list'], {
      LECTERN_RUNSERVER_BACKEND: 'postgres',
      LECTERN_POSTGRES_URL: `postgres://lectern:closed-pw@127.0.0.1:${port}/lrs`,
      LECTERN_AUTH_FILE: join(dir, 'auth.json'),
    });
    assert.equal(r.code, 2, r.stderr);
    const line = errorLine(r.stderr);
    assert.match(
      line,
      new RegExp(`^lectern: error: .*cannot reach PostgreSQL at postgres://lectern:\\*\\*\\*@127\\.0\\.0\\.1:${port}/lrs \\(LECTERN_POSTGRES_URL\\): connection refused`),
    );
    assert.match(line, /a command waits at most 5 s/);
    // It said it was waiting, on stderr (stdout is a command's output).
    assert.match(r.stderr, new RegExp(`waiting for PostgreSQL at 127\\.0\\.0\\.1:${port}: connection refused, retrying`));
    assert.ok(!(r.stdout + r.stderr).includes('closed-pw'));
  });
});

// A server of its own: the shared one trusts every local connection, so no password is ever wrong there.
const skip = postgresSkipped() || (process.env.LECTERN_TEST_POSTGRES_URL && !findPgBin() ? 'needs initdb and pg_ctl to run its own server' : false);

describe('start-up against a PostgreSQL that checks passwords', { skip }, () => {
  let cluster: PgCluster;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lectern-pg-auth-'));
    writeFileSync(join(dir, 'auth.json'), '[]');
    cluster = await startCluster({
      files: { 'pg_hba.conf': ['local all all trust', 'host all postgres 127.0.0.1/32 trust', 'host all all 127.0.0.1/32 scram-sha-256', ''].join('\n') },
    });
    const c = new pg.Client({ connectionString: cluster.url });
    await c.connect();
    await c.query("CREATE ROLE lectern LOGIN PASSWORD 'right-pw'");
    await c.query('CREATE DATABASE lrs OWNER lectern');
    await c.end();
  });
  after(() => {
    cluster?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  const url = (password: string, database: string) => `postgres://lectern:${password}@127.0.0.1:${cluster.port}/${database}`;

  test('a wrong password is not retried: runserver and a command name the setting and the user, never the password', { timeout: 60_000 }, async () => {
    await refusedAtOnce(
      dir,
      url('wrong-pw', 'lrs'),
      new RegExp(`127\\.0\\.0\\.1:${cluster.port}.*password authentication failed for user "lectern".*user and password`),
      'wrong-pw',
    );
  });

  test('a database that does not exist and that the user may not create is not retried', { timeout: 60_000 }, async () => {
    await refusedAtOnce(dir, url('right-pw', 'missing'), /database "missing" does not exist and cannot be created.*permission denied to create database/, 'right-pw');
  });
});
