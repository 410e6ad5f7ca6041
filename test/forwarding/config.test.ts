/** LECTERN_XAPI_FORWARDINGS: validation naming the entry and the key, inactive entries, backoff. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { activeTargets } from '../../src/forwarding/config.ts';
import { backoffDelay, Forwarder } from '../../src/forwarding/forwarder.ts';
import { createLogger } from '../../src/log.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';

const good = { is_active: true, url: 'https://lrs.example.com/xAPI/statements/', basic_username: 'u', basic_password: 'top-secret', max_retries: 3, timeout: 1.5 };
const load = (value: unknown) => loadConfig({ LECTERN_XAPI_FORWARDINGS: typeof value === 'string' ? value : JSON.stringify(value) }).xapiForwardings;
const fails = (value: unknown, message: RegExp) =>
  assert.throws(
    () => load(value),
    (e: Error) => e instanceof ConfigError && message.test(e.message) && !e.message.includes('top-secret'),
    String(message),
  );

test('a valid list parses; empty and unset mean no forwarding', () => {
  assert.deepEqual(load([good]), [{ isActive: true, url: good.url, username: 'u', password: 'top-secret', maxRetries: 3, timeoutSeconds: 1.5 }]);
  assert.deepEqual(load(''), []);
  assert.deepEqual(loadConfig({}).xapiForwardings, []);
  // Ralph's files may carry other keys: they are ignored.
  assert.equal(load([{ ...good, comment: 'x' }]).length, 1);
});

test('invalid configurations name the variable, the entry and the key, never the password', () => {
  fails('[{', /^LECTERN_XAPI_FORWARDINGS must be a JSON list/);
  fails(good, /LECTERN_XAPI_FORWARDINGS must be a JSON list of forwarding configurations, got an object/);
  fails([good, 3], /LECTERN_XAPI_FORWARDINGS\[1\] must be an object/);
  for (const key of Object.keys(good)) {
    const { [key]: _, ...rest } = good as Record<string, unknown>;
    fails([good, rest], new RegExp(`LECTERN_XAPI_FORWARDINGS\\[1\\] lacks the key "${key}"`));
  }
  fails([{ ...good, is_active: 'yes' }], /\[0\]\.is_active must be true or false, got "yes"/);
  fails([{ ...good, basic_username: 1 }], /\[0\]\.basic_username must be a string/);
  fails([{ ...good, basic_password: 12345 }], /\[0\]\.basic_password must be a string, got a number/);
  fails([{ ...good, max_retries: '3' }], /\[0\]\.max_retries must be an integer/);
  fails([{ ...good, max_retries: 1.5 }], /\[0\]\.max_retries must be an integer/);
  fails([{ ...good, max_retries: -1 }], /\[0\]\.max_retries must be an integer/);
  fails([{ ...good, timeout: 0 }], /\[0\]\.timeout must be a number of seconds above 0/);
  fails([{ ...good, timeout: '5' }], /\[0\]\.timeout must be a number/);
  fails([{ ...good, url: 'not a url' }], /\[0\]\.url must be an http:\/\/ or https:\/\/ URL, got "not a url"/);
  fails([{ ...good, url: 'ftp://example.com/x' }], /\[0\]\.url must be an http/);
  fails([{ ...good, url: 'https://u:top-secret@example.com/x' }], /\[0\]\.url must not contain credentials/);
  fails([good, { ...good }], /\[1\]\.url repeats the url of entry 0/);
  // An inactive duplicate is harmless.
  assert.deepEqual(activeTargets(load([good, { ...good, is_active: false }])), [good.url]);
});

test('lectern runserver stops on an invalid LECTERN_XAPI_FORWARDINGS with exit code 2 and one line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-fwd-cfg-'));
  try {
    const cli = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
    const r = spawnSync(process.execPath, [cli, 'runserver', '--port', '0'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', LECTERN_XAPI_FORWARDINGS: JSON.stringify([{ ...good, timeout: 'soon' }]) },
      encoding: 'utf8',
      timeout: 20_000,
    });
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.trim(), 'lectern: error: LECTERN_XAPI_FORWARDINGS[0].timeout must be a number of seconds above 0 and at most 3600, got "soon" (from the environment)');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('inactive targets are logged once and get no worker', async () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const store = new SqliteStore({ path: ':memory:' });
  await store.migrate();
  const targets = load([{ ...good, is_active: false }]);
  const fwd = new Forwarder({ store, targets, batchSize: 10, backoffMs: 10, leaseMs: 1000, logger: createLogger('info', sink) });
  fwd.start();
  assert.equal(fwd.active, false);
  assert.deepEqual(await fwd.stats(), []);
  await fwd.stop();
  await store.close();
  const logged = lines.filter((l) => l.includes('inactive'));
  assert.equal(logged.length, 1);
  assert.match(logged[0], /lrs\.example\.com/);
  assert.doesNotMatch(lines.join(''), /top-secret/);
});

test('backoff doubles per attempt, jittered between half and all of it, capped at 5 minutes', () => {
  assert.equal(backoffDelay(100, 1, 0), 50);
  assert.equal(backoffDelay(100, 1, 0.999), 100);
  assert.equal(backoffDelay(100, 4, 0), 400);
  assert.equal(backoffDelay(1000, 40, 0), 150_000);
  assert.ok(backoffDelay(1000, 40, 0.9999) <= 300_000);
});
