/**
 * A database credential revoked or rotated from one process is refused by another server process
 * on the same PostgreSQL within LECTERN_AUTH_CREDENTIALS_REFRESH (2 s by default), though that
 * process had it cached: the second server is a real `lectern runserver` (the built CLI). The
 * test polls until the refusal, with a generous cap; it asserts no time.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { createCredential, revokeCredential, rotateCredential } from '../../src/ops/credentials.ts';
import { basic, jsonInit, postgresBackend, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { CLI, type Runserver, spawnRunserver } from '../helpers/runserver.ts';

/** Far above the 2 s bound: a loaded machine must not fail the test. */
const CAP_MS = 30_000;

describe('database credentials across server processes on one PostgreSQL', { skip: postgresSkipped() }, () => {
  let a: TestLrs;
  let second: Runserver;

  before(async () => {
    assert.ok(existsSync(CLI), 'build first: npm run build');
    a = await startTestLrs(postgresBackend);
    second = await spawnRunserver({ env: { ...a.env, LECTERN_RUNSERVER_PORT: '0', LECTERN_LOG_LEVEL: 'debug' } });
  });
  after(async () => {
    await second?.stop();
    await a?.close();
  });

  const post = (base: string, u: TestUser) =>
    fetch(`${base}/xAPI/statements`, {
      ...jsonInit('POST', [statement({ id: randomUUID() })]),
      headers: { 'content-type': 'application/json', 'x-experience-api-version': '1.0.3', authorization: basic(u) },
    }).then(async (r) => (await r.arrayBuffer(), r.status));

  async function until401(base: string, u: TestUser): Promise<void> {
    const start = Date.now();
    while ((await post(base, u)) !== 401) {
      assert.ok(Date.now() - start < CAP_MS, `still accepted after ${CAP_MS} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const agent = { objectType: 'Agent' as const, mbox: 'mailto:fleet@example.com' };
  const user = (key: string, secret: string): TestUser => ({ username: key, password: secret, scopes: [], agent: {} });

  test('revoked from one process: the other refuses it though it had it cached', async () => {
    const made = await createCredential(a.lrs.store, { scopes: ['all'], agent });
    const me = user(made.key, made.secret);
    // Seen by the second process (created by another one after it started), and cached there.
    for (let i = 0; (await post(second.url, me)) !== 200; i++) {
      assert.ok(i < CAP_MS / 100, 'the second server never accepted the new credential');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(await post(second.url, me), 200);
    assert.equal(await post(a.url, me), 200);
    await revokeCredential(a.lrs.store, made.key);
    await until401(second.url, me);
    await until401(a.url, me);
  });

  test('rotated without a grace from one process: the other refuses the old secret, takes the new one', async () => {
    const made = await createCredential(a.lrs.store, { scopes: ['all'], agent });
    const old = user(made.key, made.secret);
    for (let i = 0; (await post(second.url, old)) !== 200; i++) {
      assert.ok(i < CAP_MS / 100, 'the second server never accepted the new credential');
      await new Promise((r) => setTimeout(r, 100));
    }
    const rotated = await rotateCredential(a.lrs.store, made.key);
    await until401(second.url, old);
    assert.equal(await post(second.url, user(made.key, rotated.secret)), 200);
    assert.ok(!second.output().includes(made.secret) && !second.output().includes(rotated.secret), 'no secret in the second server log');
  });
});
