/**
 * deploy/lectern.service: `systemd-analyze verify` finds nothing wrong with it (unknown keys, bad
 * values), `systemd-analyze security --offline` rates its sandbox, the hardening docs/operations.md
 * promises is there, and the settings it gives Lectern are real ones with valid values. Only
 * ExecStart's path changes (verify wants an executable that exists). Running it needs a booted
 * systemd, which a CI container lacks: that part is the operator's.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { loadConfig, SETTINGS } from '../../src/config.ts';
import { requireTool, run } from '../helpers/tools.ts';

const UNIT = readFileSync(new URL('../../deploy/lectern.service', import.meta.url), 'utf8');
let dir: string;
let unitFile: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'lectern-systemd-'));
  unitFile = join(dir, 'lectern.service');
  const main = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
  assert.match(UNIT, /^ExecStart=\/usr\/local\/bin\/lectern runserver$/m);
  writeFileSync(unitFile, UNIT.replace(/^ExecStart=\/usr\/local\/bin\/lectern /m, `ExecStart=${process.execPath} ${main} `));
});
after(() => rmSync(dir, { recursive: true, force: true }));

test('systemd-analyze verify: no unknown key, no bad value', () => {
  const r = run(requireTool('systemd-analyze', 'systemd'), ['verify', unitFile]);
  // verify exits 0 on unknown keys: anything it prints is a finding.
  assert.equal(r.status, 0, r.out);
  assert.equal(r.out.trim(), '');
});

test('systemd-analyze security rates the sandbox "OK" (exposure at most 2.0 of 10)', () => {
  const r = run(requireTool('systemd-analyze', 'systemd'), ['security', '--offline=true', '--threshold=20', '--no-pager', unitFile]);
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
    'EnvironmentFile=-/etc/lectern/lectern.env',
    'CapabilityBoundingSet=',
  ]) {
    assert.ok(UNIT.split('\n').includes(line), `${line} is missing`);
  }
});

test("the unit's Environment= lines name real settings with valid values", () => {
  const known = new Set(Object.values(SETTINGS).map((s) => s.name));
  const env: Record<string, string> = {};
  for (const [, name, value] of UNIT.matchAll(/^Environment=(\w+)=(.*)$/gm)) {
    assert.ok(known.has(name!), `${name} is not a Lectern setting`);
    env[name!] = value!;
  }
  assert.ok(Object.keys(env).length >= 4);
  const config = loadConfig(env);
  assert.deepEqual(config.trustProxy, ['127.0.0.1']);
  assert.equal(config.host, '127.0.0.1');
});
