/**
 * An admin change and its audit entry are stored together or not at all, through the admin API on
 * every backend: with the database refusing audit entries (a trigger on admin_audit), creating,
 * rotating and revoking a credential, clearing kept rejections and re-queueing dead letters fail
 * (500) and change nothing; once entries are accepted again, the same calls change and record.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { eventually, Receiver } from '../helpers/receiver.ts';
import { runSql } from '../lifecycle/helpers.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin', 'all'], agent: { mbox: 'mailto:op@example.com' } };

type Json = Record<string, unknown>;

async function call(t: TestLrs, method: string, path: string, body?: unknown, user: TestUser = OPERATOR): Promise<{ status: number; body: Json }> {
  const res = await t.fetch(path, body === undefined ? { method, user, version: null } : jsonInit(method, body, { user, version: null }));
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
}

/** A trigger that makes the database refuse every audit entry, and its removal. */
function refusingAudit(t: TestLrs): { on(): Promise<void>; off(): Promise<void> } {
  const sqlite = t.config.backend === 'sqlite';
  return {
    on: () =>
      runSql(
        t,
        sqlite
          ? ["CREATE TRIGGER refuse_audit BEFORE INSERT ON admin_audit BEGIN SELECT RAISE(ABORT, 'audit refused'); END"]
          : [
              "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$",
              'CREATE TRIGGER refuse_audit BEFORE INSERT ON admin_audit FOR EACH ROW EXECUTE FUNCTION refuse_audit()',
            ],
      ),
    off: () => runSql(t, sqlite ? ['DROP TRIGGER refuse_audit'] : ['DROP TRIGGER refuse_audit ON admin_audit', 'DROP FUNCTION refuse_audit()']),
  };
}

for (const backend of BACKENDS) {
  describe(`an admin change and its audit entry: both or neither (${backend.name})`, () => {
    let t: TestLrs;
    let receiver: Receiver;
    before(async () => {
      receiver = await new Receiver().listen();
      receiver.respond = () => ({ status: 403 });
      const forwardings = [{ is_active: true, url: receiver.url, basic_username: 'fw', basic_password: 'fw-target-password', max_retries: 0, timeout: 10 }];
      t = await startTestLrs(backend, {
        users: [OPERATOR],
        env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0', LECTERN_XAPI_FORWARDINGS: JSON.stringify(forwardings), LECTERN_XAPI_FORWARDING_BACKOFF: '20' },
      });
    });
    after(async () => {
      await t?.close();
      await receiver?.close();
    });

    test('credentials create, rotate and revoke', async () => {
      const made = await call(t, 'POST', '/admin/api/credentials', { key: 'kept', scopes: ['statements/read'], agent: { mbox: 'mailto:kept@example.com' } });
      assert.equal(made.status, 201);
      const kept: TestUser = { username: 'kept', password: String(made.body.secret), scopes: [], agent: {} };
      const audit = refusingAudit(t);
      await audit.on();
      try {
        assert.equal((await call(t, 'POST', '/admin/api/credentials', { key: 'unrecorded', scopes: ['statements/read'], agent: { mbox: 'mailto:u@example.com' } })).status, 500);
        assert.equal((await call(t, 'POST', '/admin/api/credentials/kept/rotate')).status, 500);
        assert.equal((await call(t, 'POST', '/admin/api/credentials/kept/revoke')).status, 500);
      } finally {
        await audit.off();
      }
      const listed = (await call(t, 'GET', '/admin/api/credentials')).body.credentials as Json[];
      assert.deepEqual(
        listed.map((c) => [c.key, c.revoked, c.previousSecretUntil]),
        [['kept', undefined, undefined]],
        'no credential created, none rotated or revoked',
      );
      assert.equal((await t.fetch('/xAPI/statements', { user: kept })).status, 200, 'its secret as it was');

      assert.equal((await call(t, 'POST', '/admin/api/credentials/kept/revoke')).status, 200);
      const entries = (await call(t, 'GET', '/admin/api/audit?action=credentials.revoke')).body.entries as Json[];
      assert.deepEqual(
        entries.map((e) => e.details),
        [{ key: 'kept' }],
      );
    });

    test('rejections clear', async () => {
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'not an iri' } }), { user: OPERATOR }))).status, 400);
      await t.lrs.rejections.flush();
      const kept = async () => ((await call(t, 'GET', '/admin/api/rejections')).body.rejections as Json[]).length;
      assert.equal(await kept(), 1);
      const audit = refusingAudit(t);
      await audit.on();
      try {
        assert.equal((await call(t, 'POST', '/admin/api/rejections/clear', { target: '' })).status, 500);
      } finally {
        await audit.off();
      }
      assert.equal(await kept(), 1, 'nothing cleared');
      assert.deepEqual((await call(t, 'GET', '/admin/api/audit?action=rejections.clear')).body.entries, []);
    });

    test('forwarding retry', async () => {
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement(), { user: OPERATOR }))).status, 200);
      const dead = async () => ((await call(t, 'GET', '/admin/api/forwarding/dead-letters')).body.deadLetters as Json[]).length;
      await eventually('a dead letter', async () => (await dead()) === 1);
      // The target accepts now: a re-queued letter would be delivered and leave the dead letters.
      receiver.respond = () => ({ status: 200 });
      const audit = refusingAudit(t);
      await audit.on();
      try {
        assert.equal((await call(t, 'POST', '/admin/api/forwarding/retry', {})).status, 500);
      } finally {
        await audit.off();
      }
      assert.equal(await dead(), 1, 'nothing re-queued');
      assert.deepEqual((await call(t, 'GET', '/admin/api/audit?action=forwarding.retry')).body.entries, []);
      assert.deepEqual((await call(t, 'POST', '/admin/api/forwarding/retry', {})).body, { requeued: 1 });
      await eventually('the letter delivered', async () => (await dead()) === 0);
    });
  });
}
