/** The `lectern` command line, run as a user would: the built CLI under plain node. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import bcrypt from 'bcrypt';
import { eventually } from './helpers/receiver.ts';
import { spawnRunserver } from './helpers/runserver.ts';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
let dir: string;

function lectern(args: string[], env: Record<string, string> = {}) {
  // A command that unexpectedly keeps running (a server that started) fails the test instead of hanging it.
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: dir, env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', input: '', timeout: 20_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `lectern runserver` in `cwd` until `stop()`; resolves once it listens (rejects with its output if it exits). */
const serve = (args: string[], env: Record<string, string>, cwd = dir) => spawnRunserver({ args, env, cwd });

before(() => {
  assert.ok(existsSync(CLI), 'build first: npm run build');
  dir = mkdtempSync(join(tmpdir(), 'lectern-cli-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('lectern --help / --version', () => {
  test('help lists the commands; each command has --help', () => {
    const r = lectern(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /runserver/);
    assert.match(r.stdout, /auth/);
    assert.match(lectern(['runserver', '--help']).stdout, /--backend/);
    assert.match(lectern(['auth', '--help']).stdout, /--agent-ifi-account/);
  });
  test("-h is help on every command; runserver takes its host as -H (or Ralph's -h HOST)", () => {
    for (const command of [[], ['runserver'], ['auth'], ['export'], ['import'], ['erase'], ['forwarding'], ['forwarding', 'status'], ['forwarding', 'retry']]) {
      const short = lectern([...command, '-h']);
      assert.equal(short.code, 0, `${command.join(' ')} -h: ${short.stderr}`);
      assert.match(short.stdout, new RegExp(`^Usage: lectern ${command.join(' ')}`.trimEnd()), command.join(' '));
      assert.equal(short.stdout, lectern([...command, '--help']).stdout, command.join(' '));
      assert.match(short.stdout, /-h, --help +show help/);
    }
    assert.match(lectern(['runserver', '-h']).stdout, /-H, --host <host>/);
    // A host that cannot be listened on shows which option the value reached.
    for (const flag of ['-H', '-h'])
      assert.match(lectern(['runserver', flag, '192.0.2.1', '-p', '0'], { LECTERN_SQLITE_PATH: ':memory:' }).stderr, /192\.0\.2\.1.*chosen by --host/, flag);
  });

  test('every command that opens a store takes -b/--backend (and -t/--target, but the forwarding outbox, shared by every store)', () => {
    for (const command of [['export'], ['import'], ['erase'], ['forwarding', 'status'], ['forwarding', 'retry']]) {
      const help = lectern([...command, '--help']).stdout;
      assert.match(help, /-b, --backend <backend>/, command.join(' '));
      if (command[0] !== 'forwarding') assert.match(help, /-t, --target <target>/, command.join(' '));
    }
    const db = join(dir, 'forwarding.sqlite');
    // The environment says postgres (unreachable); -b sqlite wins.
    const env = {
      LECTERN_RUNSERVER_BACKEND: 'postgres',
      LECTERN_POSTGRES_URL: 'postgres://nobody@127.0.0.1:1/none',
      LECTERN_POSTGRES_CONNECT_RETRIES: '0',
      LECTERN_SQLITE_PATH: db,
    };
    for (const args of [
      ['status', '-b', 'sqlite'],
      ['status', '--backend', 'sqlite', '--json'],
      ['retry', '-b', 'sqlite'],
    ]) {
      const r = lectern(['forwarding', ...args], env);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    }
    const postgres = lectern(['forwarding', 'status', '-b', 'postgres'], env);
    assert.equal(postgres.code, 2);
    assert.match(postgres.stderr, /cannot open the postgres store/);
    assert.match(lectern(['forwarding', 'status', '-b', 'mongo'], env).stderr, /--backend must be one of sqlite, postgres/);
    const t = lectern(['forwarding', 'retry', '-t', 'http://example.com/x'], env);
    assert.equal(t.code, 2);
    assert.match(t.stderr, /-t\/--target names a store; name a forwarding target with --url http:\/\/example.com\/x/);
  });

  test('--version prints the package version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    assert.equal(lectern(['--version']).stdout.trim(), pkg.version);
  });
});

test('what the commands write in the working directory by default is git-ignored', () => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  for (const file of ['lectern.sqlite', 'lectern.sqlite-wal', 'auth.json', '.env', 'lectern-audit.log']) {
    const r = spawnSync('git', ['check-ignore', '--no-index', '-q', file], { cwd: root });
    assert.equal(r.status, 0, `${file} is not git-ignored`);
  }
});

describe('lectern auth', () => {
  const file = () => join(dir, 'creds', 'auth.json');
  const env = () => ({ LECTERN_AUTH_FILE: file() });

  test('without -w prints the entry and writes nothing', () => {
    const r = lectern(['auth', '-u', 'jane', '-p', 's3cret', '-s', 'all', '-M', 'mailto:jane@example.com'], env());
    assert.equal(r.code, 0, r.stderr);
    const entry = JSON.parse(r.stdout);
    assert.equal(entry.username, 'jane');
    assert.match(entry.hash, /^\$2b\$12\$/);
    assert.ok(bcrypt.compareSync('s3cret', entry.hash));
    assert.deepEqual(entry.agent, { objectType: 'Agent', mbox: 'mailto:jane@example.com' });
    assert.equal(existsSync(file()), false);
  });

  test("opens no store, so the store's settings do not stop it: read replicas set for a backend chosen on runserver's command line", () => {
    // An operator's environment: the unit file runs `lectern runserver --backend postgres`.
    const r = lectern(['auth', '-u', 'ops', '-p', 's3cret', '-s', 'all', '-M', 'mailto:ops@example.com'], {
      ...env(),
      LECTERN_POSTGRES_READ_URLS: 'postgres://lectern@standby.example.com/lectern',
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).username, 'ops');
  });

  test('-w creates the file and its folder; a second user is appended; the same user is updated', () => {
    let r = lectern(['auth', '--username', 'jane', '--password', 's3cret', '--scope', 'all', '--agent-mbox', 'mailto:jane@example.com', '-w'], env());
    assert.equal(r.code, 0, r.stderr);
    r = lectern(['auth', '-u', 'bob', '-p', 'pw', '-s', 'statements/read', '-s', 'statements/write', '-A', 'bob', 'http://example.com', '-N', 'Bob', '-t', 'tenant1', '-w'], env());
    assert.equal(r.code, 0, r.stderr);
    let entries = JSON.parse(readFileSync(file(), 'utf8'));
    assert.deepEqual(
      entries.map((e: { username: string }) => e.username),
      ['jane', 'bob'],
    );
    assert.deepEqual(entries[1].scopes, ['statements/read', 'statements/write']);
    assert.deepEqual(entries[1].agent, { objectType: 'Agent', name: 'Bob', account: { name: 'bob', homePage: 'http://example.com' } });
    assert.equal(entries[1].target, 'tenant1');
    const bobHash = entries[1].hash;
    r = lectern(['auth', '-u', 'jane', '-p', 'changed', '-s', 'all/read', '-O', 'http://openid.example.com/jane', '-w'], env());
    assert.equal(r.code, 0, r.stderr);
    entries = JSON.parse(readFileSync(file(), 'utf8'));
    assert.deepEqual(
      entries.map((e: { username: string }) => e.username),
      ['jane', 'bob'],
    );
    assert.ok(bcrypt.compareSync('changed', entries[0].hash));
    assert.deepEqual(entries[0].scopes, ['all/read']);
    assert.equal(entries[1].hash, bobHash, 'other entries untouched');
  });

  test('-w leaves every other entry byte for byte as it was (no "target": null added); every §4.2 scope is accepted', () => {
    const f = join(dir, 'ralph-auth.json');
    // As Ralph or an editor may have written it: compact, tabs, nulls, escapes, no target field.
    const ralph = `{"agent": {"mbox": "mailto:ralph@example.com", "objectType": "Agent", "name": null}, "scopes": ["all"], "hash": "${bcrypt.hashSync('x', 4)}", "username": "ralph"}`;
    const middle = `{ "username":"z\\u00e9","hash":"${bcrypt.hashSync('y', 4)}","scopes":["state"],"agent":{"openid":"http://o.example.com/z"},"target":"t1" }`;
    const last = `{"username": "last", "hash": "${bcrypt.hashSync('z', 4)}", "scopes": ["profile"], "agent": {"mbox_sha1sum": "${'a'.repeat(40)}"}}`;
    writeFileSync(f, `[${ralph} ,\n\t${middle},${last}\n]\n`);
    const r = lectern(['auth', '-u', 'z\u00e9', '-p', 'pw2', '-s', 'state', '-s', 'profile', '-s', 'statements/read/mine', '-O', 'http://o.example.com/z', '-w'], {
      LECTERN_AUTH_FILE: f,
    });
    assert.equal(r.code, 0, r.stderr);
    const text = readFileSync(f, 'utf8');
    assert.ok(text.startsWith(`[${ralph} ,\n\t{`), text);
    assert.ok(text.endsWith(`,${last}\n]\n`), text);
    const entries = JSON.parse(text);
    assert.deepEqual(
      entries.map((e: { username: string }) => e.username),
      ['ralph', 'z\u00e9', 'last'],
    );
    assert.ok(bcrypt.compareSync('pw2', entries[1].hash));
    assert.deepEqual(entries[1].scopes, ['state', 'profile', 'statements/read/mine']);
    assert.equal('target' in entries[1], false, 'target is written only when given');
  });

  test('refuses bad input with a clear message, a non-zero exit and the file unchanged', () => {
    writeFileSync(file(), JSON.stringify([]));
    const before = readFileSync(file(), 'utf8');
    const cases: [string[], RegExp][] = [
      [['-u', 'x', '-p', 'p', '-s', 'everything', '-M', 'mailto:x@example.com'], /unknown scope "everything"/],
      [['-u', 'x', '-p', 'p', '-s', 'all', '-M', 'x@example.com'], /mbox/],
      [['-u', 'x', '-p', 'p', '-s', 'all'], /exactly one agent identifier/],
      [['-u', 'x', '-p', 'p', '-s', 'all', '-M', 'mailto:x@example.com', '-O', 'http://o.example.com'], /exactly one agent identifier/],
      [['-u', 'x', '-s', 'all', '-M', 'mailto:x@example.com'], /password/],
      [['-p', 'p', '-s', 'all', '-M', 'mailto:x@example.com'], /username/],
    ];
    for (const [args, message] of cases) {
      const r = lectern(['auth', ...args, '-w'], env());
      assert.notEqual(r.code, 0, args.join(' '));
      assert.match(r.stderr, message, args.join(' '));
      assert.equal(r.stderr.trim().split('\n').length, 1, 'one line');
      assert.equal(readFileSync(file(), 'utf8'), before);
    }
    writeFileSync(file(), '{corrupt');
    const r = lectern(['auth', '-u', 'x', '-p', 'p', '-s', 'all', '-M', 'mailto:x@example.com', '-w'], env());
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /not valid JSON/);
    assert.equal(readFileSync(file(), 'utf8'), '{corrupt');
  });
});

describe('lectern auth: users that could never sign in as given', () => {
  const file = () => join(dir, 'creds-unusable', 'auth.json');
  const env = () => ({ LECTERN_AUTH_FILE: file() });

  test('a username with ":" and a password over 72 bytes are refused with exit code 2; 72 bytes are accepted', () => {
    const base = ['-s', 'all', '-M', 'mailto:x@example.com', '-w'];
    const cases: [string[], RegExp][] = [
      [['-u', 'us:er', '-p', 'pw'], /username "us:er" contains ":", which HTTP Basic/],
      [['-u', 'x', '-p', 'p'.repeat(73)], /password is 73 bytes long .*only the first 72/],
      // 37 two-byte characters: 74 bytes, though only 37 characters.
      [['-u', 'x', '-p', 'é'.repeat(37)], /password is 74 bytes long/],
    ];
    for (const [args, message] of cases) {
      const r = lectern(['auth', ...args, ...base], env());
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, message);
      assert.equal(r.stderr.trim().split('\n').length, 1, 'one line');
      assert.equal(existsSync(file()), false, 'nothing written');
    }
    const r = lectern(['auth', '-u', 'x', '-p', 'é'.repeat(36), ...base], env());
    assert.equal(r.code, 0, r.stderr);
    const [entry] = JSON.parse(readFileSync(file(), 'utf8'));
    assert.ok(bcrypt.compareSync('é'.repeat(36), entry.hash));
  });
});

describe('lectern auth: control characters (review of issue 27, item 12)', () => {
  const file = () => join(dir, 'creds-control', 'auth.json');
  const env = () => ({ LECTERN_AUTH_FILE: file() });

  test('a username or password with a control character is refused with exit code 2, named by code point', () => {
    // RFC 7617 §2: "The user-id and password MUST NOT contain any control characters".
    const base = ['-s', 'all', '-M', 'mailto:x@example.com', '-w'];
    const cases: [string[], RegExp][] = [
      [['-u', 'us\ner', '-p', 'pw'], /^lectern: error: the username "us\\ner" contains the control character U\+000A, which HTTP Basic/],
      [['-u', 'us\x01er', '-p', 'pw'], /username "us\\u0001er" contains the control character U\+0001/],
      [['-u', 'us\x7fer', '-p', 'pw'], /control character U\+007F/],
      [['-u', 'us\u0085er', '-p', 'pw'], /control character U\+0085/],
      [['-u', 'x', '-p', 'p\tw'], /the password contains the control character U\+0009/],
    ];
    for (const [args, message] of cases) {
      const r = lectern(['auth', ...args, ...base], env());
      assert.equal(r.code, 2, JSON.stringify(args));
      assert.match(r.stderr, message);
      assert.equal(r.stderr.trim().split('\n').length, 1, 'one line');
      assert.equal(existsSync(file()), false, 'nothing written');
    }
    const r = lectern(['auth', '-u', 'üser name', '-p', 'pw', ...base], env());
    assert.equal(r.code, 0, r.stderr);
  });
});

describe('lectern runserver', () => {
  test('bad settings stop start-up with a one-line error naming the problem', () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [['-p', '0', '-b', 'mongo'], {}, /--backend must be one of sqlite, postgres/],
      [['-p', '99999'], {}, /--port must be an integer/],
      [[], { LECTERN_RUNSERVER_PORT: 'abc' }, /LECTERN_RUNSERVER_PORT/],
      [[], { LECTERN_RUNSERVER_BACKEND: 'nope' }, /LECTERN_RUNSERVER_BACKEND/],
      [['-p', '0'], { LECTERN_AUTH_CACHE_TTL: '-1' }, /LECTERN_AUTH_CACHE_TTL/],
      [['-p', '0'], { LECTERN_SQLITE_PATH: '/etc/hostname/lrs.sqlite' }, /LECTERN_SQLITE_PATH/],
      [
        ['-p', '0'],
        { LECTERN_SQLITE_PATH: ':memory:', LECTERN_POSTGRES_READ_URLS: 'postgres://r1/lrs' },
        /LECTERN_POSTGRES_READ_URLS needs the postgres backend: LECTERN_RUNSERVER_BACKEND=postgres or --backend postgres/,
      ],
    ];
    for (const [args, env, message] of cases) {
      const r = lectern(['runserver', ...args], env);
      assert.notEqual(r.code, 0, args.join(' '));
      assert.match(r.stderr, message);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    }
  });

  test('.env is read; a real environment variable wins over it; a bad value says where it came from', () => {
    writeFileSync(join(dir, '.env'), 'LECTERN_RUNSERVER_PORT=notaport\n');
    try {
      const env = join(dir, '.env').replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      assert.match(lectern(['runserver']).stderr, new RegExp(`LECTERN_RUNSERVER_PORT must be an integer .* \\(from ${env}\\)$`, 'm'));
      const r = lectern(['runserver'], { LECTERN_RUNSERVER_BACKEND: 'bad' });
      assert.match(r.stderr, /LECTERN_RUNSERVER_BACKEND must be one of sqlite, postgres, got "bad" \(from the environment\)/);
      assert.match(lectern(['runserver'], { LECTERN_RUNSERVER_PORT: 'x' }).stderr, /LECTERN_RUNSERVER_PORT .* \(from the environment\)/);
    } finally {
      rmSync(join(dir, '.env'));
    }
  });

  test('a malformed credentials file stops start-up with one line naming the file and the entry', () => {
    const file = join(dir, 'bad-auth.json');
    const good = { username: 'u', hash: bcrypt.hashSync('p', 4), scopes: ['all'], agent: { mbox: 'mailto:u@example.com' } };
    const cases: [string, RegExp][] = [
      [JSON.stringify([good, { username: 'v', scopes: ['all'], agent: { mbox: 'mailto:v@example.com' } }]), /: entry 1 \(v\) has no bcrypt hash$/],
      [JSON.stringify([good, { ...good, username: 'w', scopes: ['everything'] }]), /: entry 1 \(w\) has scopes that are not a list of known scope names$/],
      ['[{"username": "u",', /is not valid JSON/],
    ];
    for (const [text, message] of cases) {
      writeFileSync(file, text);
      const r = lectern(['runserver', '-p', '0'], { LECTERN_AUTH_FILE: file, LECTERN_SQLITE_PATH: ':memory:' });
      assert.equal(r.code, 2, r.stderr);
      const line = r.stderr.trim();
      assert.equal(line.split('\n').length, 1, line);
      assert.ok(line.startsWith(`lectern: error: ${file}`), line);
      assert.match(line, message);
    }
  });

  test('a credentials file edited badly while serving: the error is logged and the last good content stays in force', async () => {
    const file = join(dir, 'reload-auth.json');
    const entry = (username: string) => ({ username, hash: bcrypt.hashSync('p', 4), scopes: ['all'], agent: { mbox: `mailto:${username}@example.com` } });
    writeFileSync(file, JSON.stringify([entry('u1'), entry('u2')]));
    const server = await serve(['-p', '0'], { LECTERN_AUTH_FILE: file, LECTERN_SQLITE_PATH: ':memory:' });
    const whoami = (user: string) => fetch(`${server.url}/whoami`, { headers: { authorization: `Basic ${Buffer.from(`${user}:p`).toString('base64')}` } });
    try {
      assert.equal((await whoami('u1')).status, 200);
      writeFileSync(file, '[{"username": "u1", "hash": ');
      assert.equal((await whoami('u2')).status, 200, 'u2 (never signed in before) is still known');
      // The log line is written as the file is re-read, not before the answer: wait for it.
      const logged = await eventually('the invalid file logged', () =>
        server
          .output()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { level: number; file?: string; msg: string })
          .find((l) => l.level === 50 && l.file === file),
      );
      assert.match(logged.msg, /credentials file is invalid, keeping its last good content \(2 users\): .* is not valid JSON/);
      writeFileSync(file, JSON.stringify([entry('u1')]));
      assert.equal((await whoami('u2')).status, 401, 'a good file is read again');
    } finally {
      assert.equal(await server.stop(), 0);
    }
  });

  test('a port in use: one line saying which option or setting chose it and how to choose another', async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const port = String((busy.address() as AddressInfo).port);
    try {
      const env = { LECTERN_SQLITE_PATH: ':memory:' };
      for (const [args, extra, chosen] of [
        [['-p', port], {}, '-p/--port'],
        [[], { LECTERN_RUNSERVER_PORT: port }, 'LECTERN_RUNSERVER_PORT'],
      ] as const) {
        const r = lectern(['runserver', ...args], { ...env, ...extra });
        assert.equal(r.code, 2, r.stderr);
        const line = r.stderr.trim();
        assert.equal(line.split('\n').length, 1, line);
        assert.match(
          line,
          new RegExp(
            `EADDRINUSE.*127\\.0\\.0\\.1:${port}: another process listens on that port \\(chosen by ${chosen}\\); choose another with -p/--port or LECTERN_RUNSERVER_PORT \\(0 picks a free one\\)$`,
          ),
        );
      }
    } finally {
      busy.close();
    }
  });

  test("start-up says once that the server listens (not Fastify's line too)", async () => {
    const server = await serve(['-p', '0'], { LECTERN_SQLITE_PATH: ':memory:' });
    assert.equal(await server.stop(), 0);
    const lines = server
      .output()
      .split('\n')
      .filter((l) => /listening/i.test(l));
    assert.equal(lines.length, 1, lines.join('\n'));
    assert.match(lines[0], /"msg":"Lectern LRS listening on http:\/\/127\.0\.0\.1:\d+"/);
  });

  test('a stop signal that arrives twice at once (process group and passed on) stops gracefully, exit code 0', async () => {
    const authFile = join(dir, 'twice-auth.json');
    writeFileSync(authFile, JSON.stringify([{ username: 'u', hash: bcrypt.hashSync('p', 4), scopes: ['all'], agent: { mbox: 'mailto:u@example.com' } }]));
    const server = await serve(['-p', '0'], { LECTERN_SQLITE_PATH: ':memory:', LECTERN_AUTH_FILE: authFile });
    // A request in flight (its body half sent) keeps the shutdown going while the second signal arrives.
    const body = JSON.stringify({ actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/o' } });
    const headers = {
      authorization: `Basic ${Buffer.from('u:p').toString('base64')}`,
      'x-experience-api-version': '1.0.3',
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    };
    const answer = new Promise<number>((resolve, reject) => {
      const req = request(`${server.url}/xAPI/statements`, { method: 'POST', headers }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.write(body.slice(0, 20));
      setTimeout(() => {
        server.signal('SIGTERM');
        setTimeout(() => {
          server.signal('SIGTERM');
          setTimeout(() => req.end(body.slice(20)), 200);
        }, 100);
      }, 200);
    });
    assert.equal(await answer, 200);
    assert.equal(await server.exited, 0, server.output());
    assert.match(server.output(), /"msg":"stopped"/);
  });

  test('a misspelled LECTERN_ variable (environment or .env) is warned of at start-up, naming the closest setting and its origin', async () => {
    const cwd = join(dir, 'misspelled');
    mkdirSync(cwd);
    writeFileSync(join(cwd, '.env'), 'LECTERN_AUTH_FIEL=elsewhere.json\n');
    const server = await serve(['-p', '0'], { LECTERN_RUNSERVER_PROT: '9000', LECTERN_SQLITE_PATH: ':memory:', LECTERN_TEST_ANYTHING: '1' }, cwd);
    assert.equal(await server.stop(), 0);
    const warnings = server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; variable?: string; closest?: string; msg: string })
      .filter((l) => l.variable);
    assert.deepEqual(
      warnings.map((w) => [w.level, w.variable, w.closest]),
      [
        [40, 'LECTERN_AUTH_FIEL', 'LECTERN_AUTH_FILE'],
        [40, 'LECTERN_RUNSERVER_PROT', 'LECTERN_RUNSERVER_PORT'],
      ],
    );
    assert.match(warnings[0].msg, new RegExp(`^LECTERN_AUTH_FIEL \\(from ${join(cwd, '.env')}\\) is not a Lectern setting and is ignored: did you mean LECTERN_AUTH_FILE\\?$`));
    assert.match(warnings[1].msg, /^LECTERN_RUNSERVER_PROT \(from the environment\) is not a Lectern setting .*did you mean LECTERN_RUNSERVER_PORT\?$/);
  });

  test('starts on SQLite, answers, and stops cleanly on SIGTERM keeping its data', async () => {
    const db = join(dir, 'data', 'lrs.sqlite');
    const authFile = join(dir, 'srv-auth.json');
    writeFileSync(authFile, JSON.stringify([{ username: 'u', hash: bcrypt.hashSync('p', 4), scopes: ['all'], agent: { mbox: 'mailto:u@example.com' } }]));
    const env = { LECTERN_SQLITE_PATH: db, LECTERN_AUTH_FILE: authFile };
    const start = () => spawnRunserver({ args: ['--port', '0'], env, cwd: dir });
    const auth = { authorization: `Basic ${Buffer.from('u:p').toString('base64')}`, 'x-experience-api-version': '1.0.3' };
    let server = await start();
    let { url } = server;
    assert.ok(existsSync(db), 'the database file is created on first start');
    const res = await fetch(`${url}/xAPI/statements`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/o' } }),
    });
    assert.equal(res.status, 200);
    const [id] = await res.json();
    assert.equal(await server.stop(), 0);
    ({ url } = server = await start());
    try {
      const again = await fetch(`${url}/xAPI/statements?statementId=${id}`, { headers: auth });
      assert.equal(again.status, 200);
      // SIGTERM while a request is in flight (its body half sent): it still completes and is stored.
      const body = JSON.stringify({ actor: { mbox: 'mailto:late@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/late' } });
      const { port } = new URL(url);
      const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request(
          {
            port,
            host: '127.0.0.1',
            method: 'POST',
            path: '/xAPI/statements',
            headers: { ...auth, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            let text = '';
            res.on('data', (d: Buffer) => (text += d.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        req.write(body.slice(0, 20));
        setTimeout(() => {
          server.signal('SIGTERM');
          setTimeout(() => req.end(body.slice(20)), 300);
        }, 200);
      });
      const done = await answer;
      assert.equal(done.status, 200, done.text);
      const [lateId] = JSON.parse(done.text);
      const code = await server.exited;
      assert.equal(code, 0);
      ({ url } = server = await start());
      assert.equal((await fetch(`${url}/xAPI/statements?statementId=${lateId}`, { headers: auth })).status, 200);
    } finally {
      await server.stop('SIGINT');
    }
  });
});
