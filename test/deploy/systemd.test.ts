/**
 * deploy/lectern.service as shipped: `systemd-analyze verify` finds nothing wrong with it (unknown
 * keys, bad values, a command it cannot find) wherever `npm install -g` put `lectern`,
 * `systemd-analyze security --offline` rates its sandbox, the hardening docs/operations.md
 * promises is there, and its settings are those of deploy/lectern.env alone. verify
 * runs on a file system root of its own (--root): the unit installed in its etc/, a `lectern` in
 * the bin folder under test. Running it needs a booted systemd, which a CI container lacks: that
 * part is the operator's.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { requireTool, run } from '../helpers/tools.ts';

const UNIT_FILE = fileURLToPath(new URL('../../deploy/lectern.service', import.meta.url));
const UNIT = readFileSync(UNIT_FILE, 'utf8');
let dir: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'lectern-systemd-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** A file system root holding the unit as installed and, when `bin` is given, an executable `lectern` there. */
function rootWith(name: string, bin?: string): string {
  const root = join(dir, name);
  mkdirSync(join(root, 'etc/systemd/system'), { recursive: true });
  writeFileSync(join(root, 'etc/systemd/system/lectern.service'), UNIT);
  // A service's default dependencies: verify loads this unit too.
  mkdirSync(join(root, 'usr/lib/systemd/system'), { recursive: true });
  writeFileSync(join(root, 'usr/lib/systemd/system/sysinit.target'), '[Unit]\nDescription=System Initialization\n');
  if (bin) {
    mkdirSync(join(root, bin), { recursive: true });
    writeFileSync(join(root, bin, 'lectern'), '#!/bin/sh\nexit 0\n');
    chmodSync(join(root, bin, 'lectern'), 0o755);
  }
  return root;
}

const verify = (root: string) => run(requireTool('systemd-analyze', 'systemd'), ['verify', `--root=${root}`, 'lectern.service']);

test("systemd-analyze verify: no unknown key, no bad value, with `lectern` where npm installs it (prefix /usr: Debian and NodeSource; /usr/local: npm's default)", () => {
  for (const bin of ['usr/bin', 'usr/local/bin']) {
    const r = verify(rootWith(bin.replaceAll('/', '-'), bin));
    // verify exits 0 on unknown keys: anything it prints is a finding.
    assert.equal(r.status, 0, `${bin}: ${r.out}`);
    assert.equal(r.out.trim(), '', bin);
  }
});

test('systemd-analyze verify checks the command: without `lectern` installed it says so', () => {
  const r = verify(rootWith('none'));
  assert.notEqual(r.status, 0);
  assert.match(r.out, /lectern is not executable: No such file or directory/);
});

test('systemd-analyze security rates the sandbox "OK" (exposure at most 2.0 of 10)', () => {
  const r = run(requireTool('systemd-analyze', 'systemd'), ['security', '--offline=true', '--threshold=20', '--no-pager', UNIT_FILE]);
  // --threshold=20: a non-zero exit above 2.0.
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /Overall exposure level for lectern\.service: \d+\.\d OK/);
});

test('the hardening the operations page describes is in the unit', () => {
  for (const line of [
    'User=lectern',
    'ProtectSystem=strict',
    'ProtectHome=yes',
    'PrivateTmp=yes',
    'NoNewPrivileges=yes',
    'StateDirectory=lectern',
    'Restart=on-failure',
    'RestartPreventExitStatus=2',
    'EnvironmentFile=/etc/lectern/lectern.env',
    'CapabilityBoundingSet=',
  ]) {
    assert.ok(UNIT.split('\n').includes(line), `${line} is missing`);
  }
});

test('the unit sets no setting of its own: they are all in the file it reads, which the command line reads too (test/deploy/env-file.test.ts)', () => {
  assert.deepEqual(
    UNIT.split('\n').filter((l) => /^Environment=/.test(l)),
    [],
  );
});
