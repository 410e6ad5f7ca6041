/**
 * scripts/provision.sh, the first step of `npm test`: with everything the suite runs present it
 * says nothing; with a program missing (a PATH made without it) it names it and the command that
 * installs it in one line and exits 1, or, as root with apt-get, installs its package (here a
 * stand-in apt-get that records its calls and puts the program on that PATH) and goes on.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../scripts/provision.sh', import.meta.url));
/** The programs the script looks for on PATH (and `id`, which it runs). */
const TOOLS = ['id', 'initdb', 'pg_ctl', 'openssl', 'caddy', 'nginx', 'promtool', 'systemd-analyze', 'script'];
const root = process.getuid?.() === 0;
let dir: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'lectern-provision-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Where `name` is on this machine's PATH or in its sbin folders, as the script looks. */
function locate(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin'];
  return dirs.map((d) => join(d, name)).find((f) => existsSync(f));
}

/** A folder for PATH with this machine's programs but those `without`. */
function binWithout(name: string, without: string[]): string {
  const bin = join(dir, name);
  mkdirSync(bin);
  for (const tool of TOOLS.filter((t) => !without.includes(t))) {
    const file = locate(tool);
    if (file) symlinkSync(file, join(bin, tool));
  }
  return bin;
}

/** A stand-in apt-get in `bin`: records each call in `log`; `install` puts caddy and promtool (package prometheus) in `bin`. */
function fakeAptGet(bin: string, log: string): void {
  writeFileSync(
    join(bin, 'apt-get'),
    [
      '#!/bin/sh',
      `echo "$*" >> '${log}'`,
      'for p in "$@"; do',
      `  case "$p" in caddy) t=caddy ;; prometheus) t=promtool ;; *) continue ;; esac`,
      `  printf '#!/bin/sh\\n' > '${bin}'/"$t" && /bin/chmod 755 '${bin}'/"$t"`,
      'done',
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'apt-get'), 0o755);
}

const provision = (env: Record<string, string>) => spawnSync('/bin/sh', [SCRIPT], { env, encoding: 'utf8', timeout: 60_000 });

test('everything present: exit 0, nothing printed', () => {
  const r = provision({ PATH: process.env.PATH ?? '', LECTERN_TEST_PROVISION: 'check' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout + r.stderr, '');
});

test('caddy and promtool missing, told not to install: one line naming them and the apt-get command, exit 1, apt-get not run', () => {
  const bin = binWithout('check', ['caddy', 'promtool']);
  const log = join(dir, 'check-apt.log');
  fakeAptGet(bin, log);
  const r = provision({ PATH: bin, LECTERN_TEST_POSTGRES_URL: 'postgres://unused', LECTERN_TEST_PROVISION: 'check' });
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, '');
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(
    lines[0]!,
    /^npm test: the test suite needs caddy, promtool \(prometheus\), which this machine lacks: install them with (sudo )?apt-get install -y caddy prometheus, then run it again/,
  );
  assert.ok(!existsSync(log), 'apt-get was run');
});

test(root ? 'as root with apt-get: installs the missing packages, checks again, exit 0' : 'not root: names the command with sudo, exit 1', () => {
  const bin = binWithout('install', ['caddy', 'promtool']);
  const log = join(dir, 'install-apt.log');
  fakeAptGet(bin, log);
  const r = provision({ PATH: bin, LECTERN_TEST_POSTGRES_URL: 'postgres://unused' });
  if (!root) {
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /install them with sudo apt-get install -y caddy prometheus/);
    assert.ok(!existsSync(log));
    return;
  }
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr.trim(), 'npm test: installing caddy prometheus from the system packages');
  assert.deepEqual(readFileSync(log, 'utf8').trim().split('\n'), ['update -qq', 'install -y -qq caddy prometheus']);
  assert.ok(existsSync(join(bin, 'caddy')) && existsSync(join(bin, 'promtool')));
});
