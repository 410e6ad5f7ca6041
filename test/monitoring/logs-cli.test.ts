/**
 * Logs and the command line, run as a user would: the built CLI, its stdout, a terminal, the
 * machine's own (older) Node.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { credentialEntries, statement, type TestUser } from '../helpers/lrs.ts';
import { CLI, type Runserver, spawnRunserver } from '../helpers/runserver.ts';

const USER: TestUser = { username: 'logger', password: 'pw-Log-5521', scopes: ['all'], agent: { mbox: 'mailto:logger@example.com' } };
const AUTH = `Basic ${Buffer.from(`${USER.username}:${USER.password}`).toString('base64')}`;
const MARKER = 'statement-body-in-logs-9c1d';
let dir: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'lectern-logs-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** `lectern runserver` with stdout piped (not a terminal: JSON lines). */
async function runserver(env: Record<string, string>, db = join(dir, `lrs-${Math.random().toString(36).slice(2)}.sqlite`)): Promise<Runserver & { db: string }> {
  // The IPC channel carries the server's "ready" message, whatever the log level.
  const server = await spawnRunserver({ args: ['--port', '0'], cwd: dir, env: { LECTERN_SQLITE_PATH: db, ...env }, until: 'ready' });
  return Object.assign(server, { db });
}

const lines = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('logs', () => {
  test('JSON lines; every line of a request carries its id, echoed as X-Request-Id; no credentials or bodies', async () => {
    const authFile = join(dir, 'auth-logs.json');
    writeFileSync(authFile, JSON.stringify(await credentialEntries([USER])));
    const s = await runserver({ LECTERN_AUTH_FILE: authFile });
    try {
      const headers = { authorization: AUTH, 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' };
      const posted = await fetch(`${s.url}/xAPI/statements`, {
        method: 'POST',
        headers: { ...headers, 'x-request-id': 'client-id-42' },
        body: JSON.stringify(statement({ result: { response: MARKER } })),
      });
      assert.equal(posted.status, 200);
      assert.equal(posted.headers.get('x-request-id'), 'client-id-42');
      const sqlite = new DatabaseSync(s.db);
      sqlite.exec('DROP TABLE documents');
      sqlite.close();
      const failed = await fetch(`${s.url}/xAPI/activities/state?activityId=http://example.com/a&stateId=s&agent=${encodeURIComponent('{"mbox":"mailto:ben@example.com"}')}`, {
        headers,
      });
      assert.equal(failed.status, 500);
      const id = failed.headers.get('x-request-id') ?? '';
      assert.match(id, /^[0-9a-f-]{36}$/);
      // An id that is not a plain token is replaced.
      const odd = await fetch(`${s.url}/lbheartbeat`, { headers: { 'x-request-id': 'a b\u00e9' } });
      assert.match(odd.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    } finally {
      assert.equal(await s.stop(), 0);
    }
    const out = s.output();
    const all = lines(out);
    const ofPost = all.filter((l) => l.reqId === 'client-id-42');
    assert.equal(ofPost.length, 1);
    assert.equal(ofPost[0].msg, 'request');
    assert.equal(ofPost[0].status, 200);
    const ofFailure = all.filter((l) => l.reqId !== undefined && l.reqId !== 'client-id-42' && l.path === '/xAPI/activities/state');
    assert.deepEqual(ofFailure.map((l) => l.msg).sort(), ['request', 'unhandled error']);
    assert.equal(new Set(ofFailure.map((l) => l.reqId)).size, 1);
    for (const secret of [USER.password, AUTH.slice(6), MARKER]) assert.ok(!out.includes(secret), `${secret} in the logs`);
  });

  test('LECTERN_LOG_LEVEL=warn keeps request lines out', async () => {
    const authFile = join(dir, 'auth-level.json');
    writeFileSync(authFile, JSON.stringify(await credentialEntries([USER])));
    const s = await runserver({ LECTERN_AUTH_FILE: authFile, LECTERN_LOG_LEVEL: 'warn' });
    try {
      assert.equal((await fetch(`${s.url}/lbheartbeat`)).status, 200);
    } finally {
      await s.stop();
    }
    assert.ok(!lines(s.output()).some((l) => l.msg === 'request'));
  });

  test('human-readable in a terminal', async () => {
    // `script` gives the server a pseudo-terminal as stdout (its own process group: SIGTERM reaches the server too).
    const server = await spawnRunserver({
      args: ['--port', '0'],
      cwd: dir,
      env: { LECTERN_SQLITE_PATH: join(dir, 'tty.sqlite'), LECTERN_AUTH_FILE: join(dir, 'none.json'), TERM: 'xterm' },
      command: (argv) => ['script', '-qfec', argv.map((a) => JSON.stringify(a)).join(' '), '/dev/null'],
      group: true,
      until: /Lectern LRS listening/,
    });
    await server.stop();
    const out = server.output();
    // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes start with ESC
    const plain = out.replace(/\x1b\[[0-9;]*m/g, '');
    assert.match(plain, /INFO.*Lectern LRS listening on http:/);
    assert.match(plain, /WARN.*no user in the credentials file/);
    assert.doesNotMatch(plain, /^\{"level"/m);
  });

  test('first run: with no user, start-up says in one line how to create one; that command works', async () => {
    const authFile = join(dir, 'first', 'auth.json');
    const s = await runserver({ LECTERN_AUTH_FILE: authFile });
    await s.stop();
    const hints = lines(s.output()).filter((l) => /no user in the credentials file/.test(String(l.msg)));
    assert.equal(hints.length, 1);
    const msg = String(hints[0].msg);
    const command = `LECTERN_AUTH_FILE=${JSON.stringify(authFile)} lectern auth --username admin --scope all --scope admin --agent-mbox mailto:admin@example.com -w`;
    assert.ok(msg.endsWith(command), msg);
    // The command as printed (plus a password: there is no terminal to ask in) creates the user.
    const r = spawnSync(
      process.execPath,
      [CLI, 'auth', '--username', 'admin', '--scope', 'all', '--scope', 'admin', '--agent-mbox', 'mailto:admin@example.com', '-w', '-p', 'pw'],
      {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', LECTERN_AUTH_FILE: authFile },
        encoding: 'utf8',
      },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.ok(existsSync(authFile));
    // An empty list is no user either; a user silences the hint.
    const again = await runserver({ LECTERN_AUTH_FILE: authFile });
    await again.stop();
    assert.ok(!again.output().includes('no user in the credentials file'));
    writeFileSync(authFile, '[]');
    const empty = await runserver({ LECTERN_AUTH_FILE: authFile });
    await empty.stop();
    assert.ok(empty.output().includes('no user in the credentials file'));
  });
});

describe('the command line on any Node', () => {
  test('auth loads no database driver, HTTP server or monitoring SDK', () => {
    // Records every module the process resolves (builtins included).
    const hook = `data:text/javascript,${encodeURIComponent(
      "import { registerHooks } from 'node:module'; const seen = new Set(); registerHooks({ resolve(s, c, next) { seen.add(s); return next(s, c); } }); process.on('exit', () => process.stderr.write('RESOLVED ' + JSON.stringify([...seen]) + '\\n'));",
    )}`;
    const r = spawnSync(process.execPath, ['--import', hook, CLI, 'auth', '-u', 'x', '-p', 'p', '-s', 'all', '-M', 'mailto:x@example.com'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    const resolved = JSON.parse(/RESOLVED (.*)/.exec(r.stderr)![1]) as string[];
    assert.ok(resolved.includes('bcrypt') && resolved.includes('commander'), resolved.join(' '));
    for (const unwanted of ['node:sqlite', 'pg', 'fastify', '@sentry/node', 'prom-client', './runserver.js', '../store/index.js']) {
      assert.ok(!resolved.includes(unwanted), `${unwanted} was loaded`);
    }
  });

  test("the machine's own Node, older than Lectern needs, runs the command under the npm `node` package's Node 24", () => {
    const systemNodes = execFileSync('which', ['-a', 'node'], { encoding: 'utf8', env: { PATH: '/usr/local/bin:/usr/bin:/bin' } })
      .split('\n')
      .filter(Boolean);
    assert.ok(systemNodes.length > 0, 'no system node');
    // The entry alone, without the package's node_modules: no Node 24 to turn to.
    const bare = join(dir, 'bare');
    mkdirSync(join(bare, 'dist', 'cli'), { recursive: true });
    writeFileSync(join(bare, 'package.json'), JSON.stringify({ type: 'module' }));
    copyFileSync(CLI, join(bare, 'dist', 'cli', 'main.js'));
    for (const node of systemNodes) {
      const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
      const r = spawnSync(node, [CLI, 'auth', '-u', 'x', '-p', 'p', '-s', 'all', '-M', 'mailto:x@example.com'], { cwd: dir, env: { PATH: '/usr/bin:/bin' }, encoding: 'utf8' });
      assert.equal(r.status, 0, `${node} ${version}: ${r.stderr}`);
      assert.equal(JSON.parse(r.stdout).username, 'x');
      const [major, minor] = version.slice(1).split('.').map(Number);
      if (major > 22 || (major === 22 && minor >= 13)) continue;
      const b = spawnSync(node, [join(bare, 'dist', 'cli', 'main.js'), '--version'], { cwd: dir, env: { PATH: '/usr/bin:/bin' }, encoding: 'utf8' });
      assert.equal(b.status, 2, `${node} ${version}: ${b.stderr}`);
      assert.equal(b.stdout, '');
      const line = b.stderr.trim();
      assert.equal(line.split('\n').length, 1, line);
      assert.ok(line.includes('Node.js >=22.13') && line.includes(version), line);
      assert.match(line, /npm ci/);
      assert.doesNotMatch(line, /\bat \S+:\d+|ERR_/);
    }
  });
});
