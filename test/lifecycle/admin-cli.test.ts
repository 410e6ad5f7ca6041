/**
 * The CLI's admin commands are the admin actions of src/ops/admin/, audited as the admin API's and
 * the console's are, with `via: cli`, the OS user as the actor, an operator's role and this host as
 * the client: `lectern credentials create|rotate|revoke`, `lectern rejections replay|clear`
 * (a replay skipping a revoked writer's rejections unless `--override-writer`), `lectern forwarding
 * retry` and `lectern erase` (its line in LECTERN_AUDIT_FILE and its entry of the audit log). On
 * every backend, through the built CLI; the actor's kind says it is the OS user.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AuditEntry } from '../../src/store/types.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { runCli } from './helpers.ts';

const OS_USER = userInfo().username;
const WHO = { actor: OS_USER, actorKind: 'os-user', role: 'operator', via: 'cli', client: hostname() };

for (const backend of BACKENDS) {
  describe(`the CLI's admin commands, audited via cli (${backend.name})`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend, { users: [ADMIN], env: { LECTERN_AUTH_CREDENTIALS_REFRESH: '0' } });
    });
    after(() => lrs?.close());

    const lectern = async (args: string[]) => {
      const r = await runCli(lrs, args);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    /** The newest audit entry of `action`, without its id and time. */
    const audited = async (action: string): Promise<Omit<AuditEntry, 'id' | 'time'>> => {
      const [entry] = await lrs.lrs.store.listAudit({ action, limit: 1 });
      assert.ok(entry, `an entry of ${action}`);
      const { id: _, time: __, ...rest } = entry;
      return rest;
    };

    test('credentials create, rotate, revoke', async () => {
      const created = JSON.parse(
        await lectern(['credentials', 'create', '-s', 'statements/write', '-M', 'mailto:lms@example.com', '--key', 'cli-lms', '--label', 'LMS', '--json']),
      ) as { secret: string };
      assert.deepEqual(await audited('credentials.create'), {
        ...WHO,
        action: 'credentials.create',
        target: '',
        details: { key: 'cli-lms', scopes: ['statements/write'], label: 'LMS' },
      });
      const rotated = JSON.parse(await lectern(['credentials', 'rotate', 'cli-lms', '--grace', '60', '--json'])) as { secret: string };
      assert.notEqual(rotated.secret, created.secret);
      assert.deepEqual(await audited('credentials.rotate'), { ...WHO, action: 'credentials.rotate', target: '', details: { key: 'cli-lms', grace: 60 } });
      await lectern(['credentials', 'revoke', 'cli-lms']);
      assert.deepEqual(await audited('credentials.revoke'), { ...WHO, action: 'credentials.revoke', target: '', details: { key: 'cli-lms' } });
      const audit = JSON.stringify(await lrs.lrs.store.listAudit({ limit: 100 }));
      for (const secret of [created.secret, rotated.secret]) assert.ok(!audit.includes(secret), 'never a secret');
    });

    test("rejections replay (a revoked writer's skipped unless --override-writer) and clear", async () => {
      const made = JSON.parse(await lectern(['credentials', 'create', '-s', 'statements/write', '-M', 'mailto:gone@example.com', '--key', 'gone', '--json'])) as { secret: string };
      const gone: TestUser = { username: 'gone', password: made.secret, scopes: [], agent: {} };
      // Refused under strict validation (a property xAPI does not define).
      assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', statement({ lms_course_code: 'BIO-101' }), { user: gone }))).status, 400);
      assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', statement({ verb: { id: 'not an iri' } })))).status, 400);
      await lrs.lrs.rejections.flush();
      await lectern(['credentials', 'revoke', 'gone']);
      const [byGone, byAdmin] = await lrs.lrs.store.listRejections({ limit: 10 });

      const skipped = await lectern(['rejections', 'replay', byGone.id, '--validation', 'lax']);
      assert.match(skipped, new RegExp(`^${byGone.id} skipped: its writer, the credential "gone", is revoked \\(--override-writer replays it anyway\\)$`, 'm'));
      assert.match(skipped, /^replayed 0: 0 stored and removed, 0 refused again \(kept with their new reasons\), 0 not replayable; 1 skipped/m);
      const [end, start] = await lrs.lrs.store.listAudit({ action: 'rejections.replay', limit: 2 });
      assert.deepEqual([start.details, start.actorKind, start.via], [{ phase: 'start', ids: [byGone.id], validation: 'lax' }, 'os-user', 'cli']);
      assert.deepEqual(await audited('rejections.replay'), {
        ...WHO,
        action: 'rejections.replay',
        target: null,
        details: { phase: 'end', startId: start.id, ids: [byGone.id], validation: 'lax', replayed: 0, stored: 0, refused: 0, notReplayable: 0, skipped: 1, claimed: 0 },
      });
      assert.equal(end.details.startId, start.id);

      const forced = await lectern(['rejections', 'replay', byGone.id, '--validation', 'lax', '--override-writer']);
      assert.match(forced, new RegExp(`^${byGone.id} stored \\(by --override-writer: its writer, the credential "gone", is revoked\\)$`, 'm'));
      const { startId: _, ...forcedDetails } = (await audited('rejections.replay')).details;
      assert.deepEqual(forcedDetails, {
        phase: 'end',
        ids: [byGone.id],
        validation: 'lax',
        overrideWriter: true,
        overridden: 1,
        replayed: 1,
        stored: 1,
        refused: 0,
        notReplayable: 0,
        skipped: 0,
        claimed: 0,
      });

      assert.match(await lectern(['rejections', 'clear', '-t', '']), /^removed 1 kept rejection of the store \(default\)$/m);
      assert.deepEqual(await audited('rejections.clear'), { ...WHO, action: 'rejections.clear', target: '', details: { cleared: 1 } });
      await lectern(['rejections', 'clear']);
      assert.deepEqual((await audited('rejections.clear')).details, { all: true, cleared: 0 });
      assert.deepEqual(await lrs.lrs.store.listRejections({ limit: 10 }), [], `${byAdmin.id} cleared`);
    });

    test('forwarding retry and erase', async () => {
      assert.match(await lectern(['forwarding', 'retry']), /^re-queued 0 dead letters$/m);
      assert.deepEqual(await audited('forwarding.retry'), { ...WHO, action: 'forwarding.retry', target: null, details: { requeued: 0 } });

      const cal = { mbox: 'mailto:cal@example.com' };
      assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', [statement({ actor: cal }), statement({ actor: cal })]))).status, 200);
      await lectern(['erase', '--agent', JSON.stringify(cal), '--dry-run']);
      assert.deepEqual(await lrs.lrs.store.listAudit({ action: 'erase', limit: 1 }), [], 'a dry run is not audited');
      await lectern(['erase', '--agent', JSON.stringify(cal)]);
      const entry = await audited('erase');
      assert.deepEqual(
        { ...entry, details: { phase: entry.details.phase, statements: entry.details.statements, dryRun: entry.details.dryRun } },
        { ...WHO, action: 'erase', target: '', details: { phase: 'end', statements: 2, dryRun: false } },
      );
      assert.ok(!JSON.stringify(entry).includes('cal@example.com'), 'never the person');
      const line = JSON.parse(readFileSync(resolve(lrs.dir, lrs.config.auditFile), 'utf8').trim().split('\n').at(-1)!) as Record<string, unknown>;
      assert.deepEqual([line.phase, line.command, line.user, line.userKind, line.host, line.statements], ['end', 'erase', OS_USER, 'os-user', hostname(), 2]);
    });
  });
}
