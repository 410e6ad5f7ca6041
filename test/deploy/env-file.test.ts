/**
 * `lectern --env-file PATH` and deploy/lectern.env (issue 48, item 8): the file read by
 * systemd.exec(5)'s EnvironmentFile= rules (where Node's .env parser differs), deploy/lectern.env
 * read alike by those rules and by `set -a; . FILE` in sh (its commented examples too, once
 * uncommented), its settings real ones with valid values, and the built CLI taking the option on
 * every command, before or after the command's name, its values winning over the environment's.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { parseEnv } from 'node:util';
import { parseEnvironmentFile } from '../../src/cli/env-file.ts';
import { loadConfig, SETTINGS } from '../../src/config.ts';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
const DEPLOYED = fileURLToPath(new URL('../../deploy/lectern.env', import.meta.url));
let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'lectern-env-file-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const parsed = (text: string) => Object.fromEntries(parseEnvironmentFile(text).vars);

describe("systemd's EnvironmentFile= format", () => {
  test("the rules of systemd.exec(5), each where Node's .env parser reads otherwise", () => {
    const cases: [string, Record<string, string>][] = [
      // `#` starts a comment only at the start of a line.
      ['A=b # not a comment\n', { A: 'b # not a comment' }],
      // Blanks around the value go, inner ones and quotes inside an unquoted value stay.
      ['A =  one two  \n', { A: 'one two' }],
      ['A=it\'s "so"\n', { A: 'it\'s "so"' }],
      // Backslash escapes in an unquoted value, and a continued line.
      ['A=a\\ b\\\\c\\#\nB=one\\\ntwo\n', { A: 'a b\\c#', B: 'onetwo' }],
      // Double quotes: \" \\ \` \$ unescaped, any other backslash kept, \n not a newline.
      ['A="x\\"y\\\\z\\`\\$w\\n\\q"\n', { A: 'x"y\\z`$w\\n\\q' }],
      // Single quotes: everything as is, over lines too; quoted pieces join.
      ["A='[{\"k\": \"a $b \\\\ #c\"}]'\nB='one\ntwo'\nC='it''s'\n", { A: '[{"k": "a $b \\\\ #c"}]', B: 'one\ntwo', C: 'its' }],
      // ; comments, CRLF lines, lines without =, an empty value, the later assignment of a name.
      [';comment\r\nA=1\r\nno equals sign\nB=\nA=2', { A: '2', B: '' }],
      // `export NAME=` is no assignment systemd takes (nor backquotes quotes).
      ['export A=1\nB=`x`\n', { B: '`x`' }],
    ];
    for (const [text, expected] of cases) assert.deepEqual(parsed(text), expected, JSON.stringify(text));
    // Where Node's parser (the one that reads .env) disagrees: why --env-file has its own.
    assert.equal(parseEnv('A=b # not a comment\n').A, 'b');
    assert.equal(parseEnv('export A=1\n').A, '1');
    assert.deepEqual(parseEnvironmentFile('export A=1\nB=2\n').ignored, [{ line: 1, name: 'export A' }]);
  });
});

/** What `set -a; . FILE` in sh exports, as the process it then runs sees it. */
function sourcedBySh(file: string): Record<string, string> {
  const r = spawnSync('sh', ['-c', 'set -a; . "$1"; exec "$2" -e "process.stdout.write(JSON.stringify(process.env))"', 'sh', file, process.execPath], {
    env: { PATH: process.env.PATH ?? '' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'sh said nothing');
  return Object.fromEntries(Object.entries(JSON.parse(r.stdout) as Record<string, string>).filter(([k]) => k.startsWith('LECTERN_')));
}

describe('deploy/lectern.env', () => {
  const text = readFileSync(DEPLOYED, 'utf8');
  // Its examples as an operator enables them: each commented `# LECTERN_…=` line uncommented.
  const enabled = text.replace(/^# (LECTERN_\w+=)/gm, '$1');

  test('sh and lectern read the same settings from it, as shipped and with every example enabled', () => {
    for (const [name, content] of [
      ['shipped', text],
      ['enabled', enabled],
    ]) {
      const file = join(dir, `${name}.env`);
      writeFileSync(file, content);
      const ours = parseEnvironmentFile(content);
      assert.deepEqual(ours.ignored, [], name);
      assert.deepEqual(sourcedBySh(file), Object.fromEntries(ours.vars), name);
    }
    assert.ok(parseEnvironmentFile(enabled).vars.has('LECTERN_XAPI_FORWARDINGS'), 'the forwarding example is among them');
  });

  test('every name is a setting, every value valid: the SQLite database in the state directory, behind a proxy on this host', () => {
    const known = new Set(Object.values(SETTINGS).map((s) => s.name));
    for (const content of [text, enabled]) {
      const vars = Object.fromEntries(parseEnvironmentFile(content).vars);
      for (const name of Object.keys(vars)) assert.ok(known.has(name), `${name} is not a Lectern setting`);
      loadConfig(vars);
    }
    const config = loadConfig(Object.fromEntries(parseEnvironmentFile(text).vars));
    assert.equal(config.backend, 'sqlite');
    assert.equal(config.sqlitePath, '/var/lib/lectern/lectern.sqlite');
    assert.equal(config.authFile, '/etc/lectern/auth.json');
    assert.equal(config.host, '127.0.0.1');
    assert.deepEqual(config.trustProxy, ['127.0.0.1']);
    const forwarding = loadConfig(Object.fromEntries(parseEnvironmentFile(enabled).vars)).xapiForwardings;
    assert.equal(forwarding[0]?.url, 'https://lrs.example.com/xAPI/statements');
  });
});

function lectern(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8', input: '', timeout: 20_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('lectern --env-file', () => {
  test('every command reads its settings from the file, given before or after its name; the file wins over the environment', () => {
    assert.ok(existsSync(CLI), 'build first: npm run build');
    const db = join(dir, 'service.sqlite');
    const file = join(dir, 'service.env');
    writeFileSync(file, `# as the service has it\nLECTERN_SQLITE_PATH=${db}\nLECTERN_LOG_LEVEL=warn\n`);
    const elsewhere = join(dir, 'elsewhere.sqlite');
    for (const args of [
      ['--env-file', file, 'credentials', 'create', '-s', 'all', '-M', 'mailto:ops@example.com', '--key', 'first'],
      ['credentials', 'create', '--key', 'second', '-s', 'all', '-M', 'mailto:ops@example.com', '--env-file', file],
    ]) {
      const r = lectern(args, { LECTERN_SQLITE_PATH: elsewhere });
      assert.equal(r.code, 0, r.stderr);
    }
    assert.equal(existsSync(elsewhere), false);
    const list = lectern(['credentials', 'list', '--json', '--env-file', file]);
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual((JSON.parse(list.stdout) as { key: string }[]).map((c) => c.key).sort(), ['first', 'second']);
    // Without the file, the command reads its working directory's database: not the service's.
    assert.equal(JSON.parse(lectern(['credentials', 'list', '--json']).stdout).length, 0);
  });

  test('a bad value names the file it came from; an assignment systemd ignores is warned of; -h shows the option on every command', () => {
    const file = join(dir, 'bad.env');
    writeFileSync(file, `LECTERN_SQLITE_PATH=${join(dir, 'bad.sqlite')}\nexport LECTERN_LOG_LEVEL=debug\nLECTERN_XAPI_FORWARDINGS=[{"is_active": true}]\n`);
    const r = lectern(['forwarding', 'status', '--env-file', file]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, new RegExp(`--env-file ${file}, line 2: "export LECTERN_LOG_LEVEL" is not a variable name, so systemd ignores this assignment`));
    assert.match(r.stderr, new RegExp(`lectern: error: LECTERN_XAPI_FORWARDINGS\\[0\\] lacks the key .* \\(from ${file}\\)`));
    for (const command of [['runserver'], ['import'], ['credentials', 'create'], ['rejections', 'list']]) {
      assert.match(lectern([...command, '-h']).stdout, /--env-file <path> +settings from this file \(systemd's/, command.join(' '));
    }
  });

  test('a file that cannot be read stops the command before it starts, naming it', () => {
    // Node itself checks the file of an --env-file anywhere on its command line (nodejs/node#54232).
    const r = lectern(['forwarding', 'status', '--env-file', join(dir, 'missing.env')]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /missing\.env/);
  });
});
