/**
 * An admin change and its audit entry in one transaction, at the store, on every backend and
 * through the threaded SQLite store (its writes cross to the writer thread): creating, revoking
 * and rotating a database credential, clearing and deleting kept rejections, requeueing dead
 * letters. An audited change leaves its entry, with what it came to under `outcome`; a change
 * refused (a key that exists) or that changed nothing (an unknown key) leaves no entry; an entry
 * the database refuses undoes its change.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ThreadedSqliteStore } from '../../src/store/sqlite/thread.ts';
import type { ChangeAudit, CredentialRow, NewRejection } from '../../src/store/types.ts';
import { prepareBatch } from '../../src/xapi/statement.ts';
import type { Statement } from '../../src/xapi/types.ts';
import { type StoreBackend, storeBackends } from '../helpers/stores.ts';

const TARGET = 'http://127.0.0.1:9/xAPI/statements';

const threaded: StoreBackend = {
  name: 'sqlite-threads',
  storedByDatabase: false,
  async open(opts = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'lectern-store-'));
    const store = new ThreadedSqliteStore({ path: join(dir, 'x.sqlite'), synchronous: 'NORMAL', forwardTargets: opts.forwardTargets });
    await store.migrate();
    return { store, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
  },
};

const audit = (action: string, details: Record<string, unknown> = {}, extra: Partial<ChangeAudit> = {}): ChangeAudit => ({
  timeMs: 1_000,
  actor: 'ops',
  actorKind: 'os-user',
  role: 'operator',
  via: 'cli',
  client: 'host',
  action,
  target: '',
  details,
  ...extra,
});

/** An entry the database refuses to write (its actor is NOT NULL). */
const refused = (action: string): ChangeAudit => audit(action, {}, { actor: null as unknown as string });

const credential = (key: string): CredentialRow => ({
  key,
  secretHash: 'hash',
  label: '',
  scopes: ['statements/read'],
  target: '',
  agent: { objectType: 'Agent', mbox: 'mailto:k@example.com' },
  createdMs: 1,
});

const rejection = (n: number): NewRejection => ({
  tenant: '',
  atMs: 1_000 + n,
  username: 'u',
  method: 'POST',
  path: '/xAPI/statements',
  query: {},
  status: 400,
  reasons: [{ loc: [n], msg: 'bad', type: 'value_error' }],
  headers: {},
  version: '1.0.3',
  bodyBytes: 0,
  writer: '{}',
});

const statement = (): Statement =>
  ({ id: randomUUID(), actor: { mbox: 'mailto:a@example.com' }, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } }) as Statement;

for (const backend of [...storeBackends, threaded]) {
  describe(`admin changes audited in their transaction [${backend.name}]`, async () => {
    const { store, dispose } = await backend.open({ forwardTargets: [TARGET] });
    after(async () => {
      await store.close();
      await dispose();
    });
    const entries = async (action: string) => (await store.listAudit({ action, limit: 100 })).map((e) => e.details);

    test('credentials: created, revoked and rotated, each with its entry; a key that exists or is unknown leaves none', async () => {
      await store.createCredential(credential('k1'), audit('credentials.create', { key: 'k1' }));
      assert.equal((await store.getCredential('k1'))?.key, 'k1');
      assert.deepEqual(await entries('credentials.create'), [{ key: 'k1' }]);
      const version = await store.credentialsVersion();
      await assert.rejects(store.createCredential({ ...credential('k1'), label: 'again' }, audit('credentials.create', { key: 'k1', again: true })), { kind: 'conflict' });
      assert.deepEqual(await entries('credentials.create'), [{ key: 'k1' }], 'the refused create left no entry');
      assert.equal((await store.getCredential('k1'))?.label, '', 'nor a change');
      assert.equal(await store.credentialsVersion(), version);

      assert.equal(await store.rotateCredential('k1', 'hash2', undefined, audit('credentials.rotate', { key: 'k1' })), true);
      assert.equal(await store.rotateCredential('nobody', 'hash2', undefined, audit('credentials.rotate', { key: 'nobody' })), false);
      assert.deepEqual(await entries('credentials.rotate'), [{ key: 'k1' }]);
      assert.equal(await store.revokeCredential('k1', 5, audit('credentials.revoke', { key: 'k1' })), true);
      assert.equal(await store.revokeCredential('nobody', 5, audit('credentials.revoke', { key: 'nobody' })), false);
      assert.deepEqual(await entries('credentials.revoke'), [{ key: 'k1' }]);
      assert.equal(await store.rotateCredential('k1', 'hash3', undefined, audit('credentials.rotate', { key: 'k1', revoked: true })), false, 'a revoked key is not rotated');
      assert.deepEqual(await entries('credentials.rotate'), [{ key: 'k1' }]);
      const [entry] = await store.listAudit({ action: 'credentials.revoke', limit: 1 });
      assert.deepEqual(
        { ...entry, id: undefined },
        {
          id: undefined,
          time: new Date(1_000).toISOString(),
          actor: 'ops',
          actorKind: 'os-user',
          role: 'operator',
          via: 'cli',
          client: 'host',
          action: 'credentials.revoke',
          target: '',
          details: { key: 'k1' },
        },
      );
    });

    test('an entry the database refuses undoes its change: no credential, no revocation', async () => {
      await assert.rejects(store.createCredential(credential('k2'), refused('credentials.create')));
      assert.equal(await store.getCredential('k2'), undefined);
      await store.createCredential(credential('k3'));
      await assert.rejects(store.revokeCredential('k3', 5, refused('credentials.revoke')));
      assert.equal((await store.getCredential('k3'))?.revokedMs, undefined);
      await assert.rejects(store.rotateCredential('k3', 'new', undefined, refused('credentials.rotate')));
      assert.equal((await store.getCredential('k3'))?.secretHash, 'hash');
    });

    test('kept rejections: deleted and cleared with their entry and count; a refused entry keeps them', async () => {
      await store.keepRejections([rejection(1), rejection(2), rejection(3)], { max: 10, keepSinceMs: 0 });
      const [first] = await store.listRejections({ limit: 1 });
      assert.equal(await store.deleteRejections([first.id, '999999'], audit('rejections.replay', { ids: [first.id] }, { outcome: 'deleted' })), 1);
      assert.deepEqual(await entries('rejections.replay'), [{ ids: [first.id], deleted: 1 }]);
      await assert.rejects(store.clearRejections('', refused('rejections.clear')));
      assert.equal((await store.listRejections({ limit: 10 })).length, 2, 'the refused entry kept the rejections');
      await assert.rejects(store.deleteRejections([(await store.listRejections({ limit: 1 }))[0].id], refused('rejections.replay')));
      assert.equal((await store.listRejections({ limit: 10 })).length, 2);
      assert.equal(await store.clearRejections('', audit('rejections.clear', {}, { outcome: 'cleared' })), 2);
      assert.equal(await store.clearRejections(undefined, audit('rejections.clear', { all: true }, { outcome: 'cleared' })), 0);
      assert.deepEqual(await entries('rejections.clear'), [{ all: true, cleared: 0 }, { cleared: 2 }]);
    });

    test('dead letters requeued with their entry and count; a refused entry leaves them dead', async () => {
      await store.insertStatements('', prepareBatch([statement(), statement()], { mbox: 'mailto:auth@example.com' }, '1.0.3'), []);
      const claimed = await store.outbox.claim(TARGET, 'me', 10, 60_000);
      assert.equal(claimed.length, 2);
      await store.outbox.settle(TARGET, 'me', { dead: claimed.map((c) => ({ id: c.id, error: 'refused' })) });
      const dead = async () => (await store.outbox.stats()).find((s) => s.target === TARGET)?.dead;
      assert.equal(await dead(), 2);
      await assert.rejects(store.outbox.requeueDead(TARGET, refused('forwarding.retry')));
      assert.equal(await dead(), 2, 'the refused entry left them dead');
      assert.equal(await store.outbox.requeueDead(TARGET, audit('forwarding.retry', { url: TARGET }, { target: null, outcome: 'requeued' })), 2);
      assert.equal(await dead(), 0);
      const [entry] = await store.listAudit({ action: 'forwarding.retry', limit: 10 });
      assert.deepEqual([entry.target, entry.details], [null, { url: TARGET, requeued: 2 }]);
    });

    test('without an audit, the changes are as before and write no entry', async () => {
      const before = (await store.listAudit({ limit: 1000 })).length;
      await store.createCredential(credential('plain'));
      assert.equal(await store.revokeCredential('plain', 1), true);
      assert.equal(await store.clearRejections(), 0);
      assert.equal(await store.outbox.requeueDead(), 0);
      assert.equal((await store.listAudit({ limit: 1000 })).length, before);
    });
  });
}
