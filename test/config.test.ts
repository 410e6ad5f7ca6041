/** Settings: parsing, validation, .env (docs/configuration.md documenting every one: test/docs-config.test.ts). */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { bodiesInFlight, checkStoreSettings, ConfigError, environment, loadConfig } from '../src/config.ts';

test('defaults', () => {
  const c = loadConfig({});
  assert.equal(c.backend, 'sqlite');
  assert.equal(c.host, '127.0.0.1');
  assert.equal(c.port, 8100);
  assert.equal(c.authFile, 'auth.json');
  assert.equal(c.authCacheMaxSize, 100);
  assert.equal(c.authCacheTtl, 3600);
  assert.equal(c.maxSearchHits, 100);
  assert.deepEqual(c.corsAllowedOrigins, ['*']);
});

test('invalid values name the variable; overrides name the option', () => {
  assert.throws(
    () => loadConfig({ LECTERN_RUNSERVER_PORT: '80a' }),
    (e: Error) => e instanceof ConfigError && /LECTERN_RUNSERVER_PORT/.test(e.message),
  );
  assert.throws(() => loadConfig({ LECTERN_RUNSERVER_BACKEND: 'oracle' }), /LECTERN_RUNSERVER_BACKEND must be one of sqlite, postgres/);
  assert.throws(
    () => loadConfig({ LECTERN_SQLITE_CACHE_SIZE: '0' }),
    (e: Error) => e instanceof ConfigError && /LECTERN_SQLITE_CACHE_SIZE/.test(e.message),
  );
  assert.equal(loadConfig({ LECTERN_SQLITE_CACHE_SIZE: '64' }).sqliteCacheSize, 64);
  assert.throws(() => loadConfig({}, { port: { value: '-3', source: '--port' } }), /--port/);
  assert.equal(loadConfig({ LECTERN_RUNSERVER_PORT: '1' }, { port: { value: '2', source: '--port' } }).port, 2);
});

test('.env is read and the real environment wins', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lectern-env-'));
  try {
    writeFileSync(join(dir, '.env'), 'LECTERN_RUNSERVER_PORT=9001\nLECTERN_AUTH_FILE="/x/auth.json"\n');
    const env = environment({ LECTERN_RUNSERVER_PORT: '9002' }, dir);
    const c = loadConfig(env);
    assert.equal(c.port, 9002);
    assert.equal(c.authFile, '/x/auth.json');
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('bodies in flight: by default four largest requests, never fewer than one', () => {
  assert.equal(bodiesInFlight(loadConfig({})), 4 * 64 * 1024 * 1024);
  assert.equal(bodiesInFlight(loadConfig({ LECTERN_MAX_REQUEST_SIZE: '2048' })), 8192);
  assert.equal(bodiesInFlight(loadConfig({ LECTERN_MAX_BODIES_IN_FLIGHT: '100000000' })), 100_000_000);
  assert.throws(
    () => loadConfig({ LECTERN_MAX_REQUEST_SIZE: '4096', LECTERN_MAX_BODIES_IN_FLIGHT: '4095' }),
    /LECTERN_MAX_BODIES_IN_FLIGHT .* must be at least LECTERN_MAX_REQUEST_SIZE/,
  );
});

test('trusted proxies: off, on, or addresses and ranges', () => {
  assert.equal(loadConfig({}).trustProxy, false);
  assert.equal(loadConfig({ LECTERN_RUNSERVER_TRUST_PROXY: 'true' }).trustProxy, true);
  assert.deepEqual(loadConfig({ LECTERN_RUNSERVER_TRUST_PROXY: '10.0.0.5, 192.168.0.0/16,loopback,2001:db8::/32' }).trustProxy, [
    '10.0.0.5',
    '192.168.0.0/16',
    'loopback',
    '2001:db8::/32',
  ]);
  for (const bad of ['2', 'proxy.example.com', '10.0.0.0/33', '10.0.0.1/8/1']) {
    assert.throws(() => loadConfig({ LECTERN_RUNSERVER_TRUST_PROXY: bad }), /LECTERN_RUNSERVER_TRUST_PROXY must be/, bad);
  }
});

test('LECTERN_POSTGRES_READ_URLS: a comma list of postgres URLs, the bad one named by its place, no password in the message', () => {
  const pg = { LECTERN_RUNSERVER_BACKEND: 'postgres' };
  assert.deepEqual(loadConfig(pg).postgresReadUrls, []);
  assert.equal(loadConfig(pg).postgresReplicaMaxLag, 30000);
  const two = loadConfig({ ...pg, LECTERN_POSTGRES_READ_URLS: ' postgres://u:p%2Cw@r1:5432/lrs , postgresql://r2/lrs ', LECTERN_POSTGRES_REPLICA_MAX_LAG: '500' });
  assert.deepEqual(two.postgresReadUrls, ['postgres://u:p%2Cw@r1:5432/lrs', 'postgresql://r2/lrs']);
  assert.equal(two.postgresReplicaMaxLag, 500);
  assert.throws(
    () => loadConfig({ ...pg, LECTERN_POSTGRES_READ_URLS: 'postgres://r1/lrs,mysql://u:hunter2@r2/lrs' }),
    (e: Error) => e instanceof ConfigError && /LECTERN_POSTGRES_READ_URLS \(URL 2\) must start with postgres:\/\//.test(e.message) && !e.message.includes('hunter2'),
  );
  assert.throws(
    () => loadConfig({ ...pg, LECTERN_POSTGRES_READ_URLS: 'postgres://u:hunter2@r1' }),
    (e: Error) => /must name a database/.test(e.message) && !e.message.includes('hunter2'),
  );
  assert.throws(() => loadConfig({ ...pg, LECTERN_POSTGRES_REPLICA_MAX_LAG: '-1' }), /LECTERN_POSTGRES_REPLICA_MAX_LAG/);
  // A rule of the store's, checked where a store opens: a command that opens none reads the server's environment unrefused.
  const replicasOnSqlite = loadConfig({ LECTERN_POSTGRES_READ_URLS: 'postgres://r1/lrs' });
  assert.throws(() => checkStoreSettings(replicasOnSqlite), /LECTERN_POSTGRES_READ_URLS needs the postgres backend: LECTERN_RUNSERVER_BACKEND=postgres or --backend postgres/);
  checkStoreSettings(two);
  checkStoreSettings(loadConfig({ LECTERN_POSTGRES_READ_URLS: 'postgres://r1/lrs' }, { backend: { value: 'postgres', source: '--backend' } }));
});
