/**
 * The database credentials check (src/auth/database.ts) over a store that counts its reads: no
 * database read per request (the change counter at most once per interval, a row once until the
 * counter moves, and once more per interval when the cached row refuses a secret, so that another
 * process's rotation or creation works at once), a moved counter drops the cache, a counter that cannot be read refuses database
 * credentials rather than miss a revocation, and the last use is written coarsely.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DatabaseCredentials, hashSecret } from '../../src/auth/database.ts';
import { ManualClock } from '../../src/clock.ts';
import { createLogger } from '../../src/log.ts';
import type { CredentialRow, CredentialStore } from '../../src/store/types.ts';

class CountingStore implements CredentialStore {
  rows = new Map<string, CredentialRow>();
  version = 0;
  versionReads = 0;
  rowReads = 0;
  touches: { key: string; atMs: number }[] = [];
  failVersion = false;
  async createCredential(row: CredentialRow) {
    this.rows.set(row.key, row);
    this.version++;
  }
  async getCredential(key: string) {
    this.rowReads++;
    const r = this.rows.get(key);
    return r && structuredClone(r);
  }
  async listCredentials() {
    return [...this.rows.values()];
  }
  async revokeCredential(key: string, atMs: number) {
    const r = this.rows.get(key);
    if (!r) return false;
    r.revokedMs ??= atMs;
    this.version++;
    return true;
  }
  async rotateCredential() {
    return false;
  }
  async credentialsVersion() {
    this.versionReads++;
    if (this.failVersion) throw new Error('connection refused');
    return this.version;
  }
  async touchCredentials(uses: { key: string; atMs: number }[]) {
    this.touches.push(...uses);
  }
}

const row = (key: string, secret: string): CredentialRow => ({
  key,
  secretHash: hashSecret(secret),
  label: '',
  scopes: ['statements/write'],
  target: 't',
  agent: { objectType: 'Agent', mbox: 'mailto:k@example.com' },
  validation: 'lax',
  createdMs: 0,
});

test('within the interval, checks read nothing: one counter read, one row read, however many requests', async () => {
  const store = new CountingStore();
  await store.createCredential(row('k', 's'));
  const creds = new DatabaseCredentials({ store, refreshMs: 60_000, logger: createLogger('silent') });
  for (let i = 0; i < 100; i++) {
    const r = await creds.check('k', 's');
    assert.ok(r.ok);
    assert.deepEqual(r.user, { username: 'k', scopes: ['statements/write'], agent: { objectType: 'Agent', mbox: 'mailto:k@example.com' }, target: 't', validation: 'lax' });
  }
  for (let i = 0; i < 100; i++) assert.deepEqual(await creds.check('unknown', 's'), { ok: false, reason: 'unknown' });
  assert.equal(store.versionReads, 1);
  assert.equal(store.rowReads, 3, 'one read per key, the unknown one too, and one re-read of the unknown one (once per interval)');
  // Revoked elsewhere: not seen until the interval ends (the documented bound).
  await store.revokeCredential('k', 1);
  assert.ok((await creds.check('k', 's')).ok);
});

test('the counter moved: the cache is dropped, the revocation seen; not moved: rows stay cached', async () => {
  const store = new CountingStore();
  await store.createCredential(row('k', 's'));
  const creds = new DatabaseCredentials({ store, refreshMs: 0, logger: createLogger('silent') });
  assert.ok((await creds.check('k', 's')).ok);
  assert.ok((await creds.check('k', 's')).ok);
  assert.equal(store.rowReads, 1, 'the counter did not move: the row stays cached');
  assert.deepEqual(await creds.check('k', 'wrong'), { ok: false, reason: 'refused' });
  assert.equal(store.rowReads, 2, 'a wrong secret: the row read again before the refusal');
  await store.revokeCredential('k', 1);
  assert.deepEqual(await creds.check('k', 's'), { ok: false, reason: 'refused' });
  assert.equal(store.rowReads, 3);
});

/** Another process's rotation: the row changes and the counter moves, unseen here until the interval ends. */
function rotateElsewhere(store: CountingStore, key: string, secret: string): void {
  store.rows.set(key, { ...store.rows.get(key)!, secretHash: hashSecret(secret) });
  store.version++;
}

test('a secret the cached row refuses: the row read again once, the rotated secret taken at once within the interval', async () => {
  const store = new CountingStore();
  await store.createCredential(row('k', 'old'));
  const creds = new DatabaseCredentials({ store, refreshMs: 60_000, logger: createLogger('silent') });
  assert.ok((await creds.check('k', 'old')).ok);
  rotateElsewhere(store, 'k', 'new');
  assert.ok((await creds.check('k', 'new')).ok, 'the new secret works at once');
  assert.equal(store.rowReads, 2);
  assert.deepEqual(await creds.check('k', 'old'), { ok: false, reason: 'refused' }, 'the old one is refused at once, from the row read again');
  assert.equal(store.versionReads, 1, 'the counter was not read again');
});

test('wrong secrets read a row again at most once per interval per key; concurrent ones share the read', async () => {
  const store = new CountingStore();
  await store.createCredential(row('k', 's'));
  const creds = new DatabaseCredentials({ store, refreshMs: 60_000, logger: createLogger('silent') });
  assert.ok((await creds.check('k', 's')).ok);
  const wrong = await Promise.all(Array.from({ length: 10 }, () => creds.check('k', 'wrong')));
  for (const w of wrong) assert.deepEqual(w, { ok: false, reason: 'refused' });
  for (let i = 0; i < 100; i++) assert.deepEqual(await creds.check('k', 'wrong'), { ok: false, reason: 'refused' });
  assert.equal(store.rowReads, 2, 'the first read, and one read again for 110 wrong secrets');
  // Within that interval a rotation elsewhere is seen when the counter is next read, as before.
  rotateElsewhere(store, 'k', 'new');
  assert.deepEqual(await creds.check('k', 'new'), { ok: false, reason: 'refused' });
});

test('a key created elsewhere after it was looked up here as unknown works at once', async () => {
  const store = new CountingStore();
  const creds = new DatabaseCredentials({ store, refreshMs: 60_000, logger: createLogger('silent') });
  assert.deepEqual(await creds.check('k', 's'), { ok: false, reason: 'unknown' });
  store.rows.set('k', row('k', 's'));
  store.version++;
  assert.ok((await creds.check('k', 's')).ok);
  assert.equal(store.rowReads, 2);
});

test('without reading (a throttled address): a cached row still takes its secret, nothing else is read', async () => {
  const store = new CountingStore();
  await store.createCredential(row('k', 's'));
  const creds = new DatabaseCredentials({ store, refreshMs: 60_000, logger: createLogger('silent') });
  assert.ok((await creds.check('k', 's')).ok);
  assert.ok((await creds.check('k', 's', false)).ok);
  assert.deepEqual(await creds.check('k', 'wrong', false), { ok: false, reason: 'refused' });
  assert.deepEqual(await creds.check('other', 's', false), { ok: false, reason: 'unknown' });
  assert.equal(store.rowReads, 1);
});

test('a counter that cannot be read: database credentials are unavailable (503), not served from a cache that may be stale', async () => {
  const store = new CountingStore();
  await store.createCredential(row('k', 's'));
  const creds = new DatabaseCredentials({ store, refreshMs: 0, logger: createLogger('silent') });
  assert.ok((await creds.check('k', 's')).ok);
  store.failVersion = true;
  assert.deepEqual(await creds.check('k', 's'), { ok: false, reason: 'unavailable' });
  store.failVersion = false;
  assert.ok((await creds.check('k', 's')).ok);
});

test('expiry and a rotation grace by the injected clock; the last use written at most once a minute per key', async () => {
  const store = new CountingStore();
  const clock = new ManualClock(1_000_000);
  await store.createCredential({ ...row('k', 'new'), previousHash: hashSecret('old'), previousUntilMs: 1_030_000, expiresMs: 1_200_000 });
  const creds = new DatabaseCredentials({ store, refreshMs: 60_000, logger: createLogger('silent'), clock });
  assert.ok((await creds.check('k', 'old')).ok);
  assert.ok((await creds.check('k', 'new')).ok);
  assert.equal(store.touches.length, 1, 'two uses within a minute: one write');
  clock.advance(30_000);
  assert.deepEqual(await creds.check('k', 'old'), { ok: false, reason: 'refused' });
  clock.advance(30_000);
  assert.ok((await creds.check('k', 'new')).ok);
  assert.deepEqual(store.touches, [
    { key: 'k', atMs: 1_000_000 },
    { key: 'k', atMs: 1_060_000 },
  ]);
  clock.advance(140_000);
  assert.deepEqual(await creds.check('k', 'new'), { ok: false, reason: 'refused' });
});
