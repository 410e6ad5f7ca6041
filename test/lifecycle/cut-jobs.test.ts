/**
 * Long admin jobs cut by kill -9 leave what was begun in the audit, on every backend, through the
 * built CLI: `lectern erase` killed while it deletes leaves its start entry (read through the
 * admin API) and the audit file's start line, and a re-run finishes and records its own start and
 * end; `lectern rejections replay --all` killed mid-way leaves its start entry, its claims hold
 * the rest until they expire, and the replay run again stores every statement exactly once.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { countSql, runCli, runSql, startCli } from './helpers.ts';

const OPERATOR: TestUser = { username: 'operator', password: 'op-secret-pass', scopes: ['admin'], agent: { mbox: 'mailto:op@example.com' } };
const DANA = { objectType: 'Agent', mbox: 'mailto:dana@example.com' };

type Json = Record<string, unknown>;

for (const backend of BACKENDS) {
  describe(`long admin jobs cut by kill -9 (${backend.name})`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, OPERATOR] });
    });
    after(() => t?.close());

    /** The audit log's entries of `action` through the admin API, newest first. */
    const audit = async (action: string): Promise<Json[]> => {
      const res = await t.fetch(`/admin/api/audit?action=${action}`, { user: OPERATOR, version: null });
      assert.equal(res.status, 200);
      return ((await res.json()) as { entries: Json[] }).entries;
    };
    const phases = (entries: Json[]) => entries.map((e) => [(e.details as Json).phase, e.via, e.actorKind]);

    test('lectern erase killed while it deletes: its start entry and start line; a re-run finishes, recorded start and end', async () => {
      const total = 2000;
      for (let i = 0; i < total; i += 500) {
        const res = await t.fetch(
          '/xAPI/statements',
          jsonInit(
            'POST',
            Array.from({ length: 500 }, () => statement({ actor: DANA })),
          ),
        );
        assert.equal(res.status, 200);
      }
      const agent = JSON.stringify({ mbox: DANA.mbox });
      const stored = async () => countSql(t, 'SELECT count(*) AS n FROM statements');
      const run = startCli(t, ['erase', '--agent', agent, '--progress-interval', '0'], {
        onStderr: (text, child) => {
          if (/erase: delete: [\d,]+ statements/.test(text) && child.exitCode === null) child.kill('SIGKILL');
        },
      });
      const killed = await run.done;
      assert.equal(killed.signal, 'SIGKILL', killed.stderr);
      const left = await stored();
      assert.ok(left > 0 && left < total, `cut mid-way: ${left} of ${total} left`);
      assert.deepEqual(phases(await audit('erase')), [['start', 'cli', 'os-user']], 'what was begun, and nothing said to have ended');
      const lines = () =>
        readFileSync(resolve(t.dir, t.config.auditFile), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Json);
      assert.deepEqual(
        lines().map((l) => [l.phase, l.command, l.target]),
        [['start', 'erase', '']],
      );

      const again = await runCli(t, ['erase', '--agent', agent]);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(await stored(), 0);
      const entries = await audit('erase');
      assert.deepEqual(phases(entries), [
        ['end', 'cli', 'os-user'],
        ['start', 'cli', 'os-user'],
        ['start', 'cli', 'os-user'],
      ]);
      assert.deepEqual([(entries[0].details as Json).startId, (entries[0].details as Json).statements, (entries[0].details as Json).complete], [entries[1].id, left, true]);
      assert.deepEqual(
        lines().map((l) => [l.phase, l.statements]),
        [
          ['start', undefined],
          ['start', undefined],
          ['end', left],
        ],
      );
    });

    test('lectern rejections replay --all killed mid-way: its start entry; the rest claimed until the claims expire; run again, every statement stored once', async () => {
      const total = 100;
      const refuse = async (i: number) => {
        const res = await t.fetch('/xAPI/statements', jsonInit('POST', [statement({ lms_course_code: `BIO-${i}` }), statement({ result: { response: `r${i}` } })]));
        assert.equal(res.status, 400);
      };
      for (let i = 0; i < total; i += 10) await Promise.all(Array.from({ length: 10 }, (_, j) => refuse(i + j)));
      await t.lrs.rejections.flush();
      const rejections = () => countSql(t, 'SELECT count(*) AS n FROM rejections');
      const statements = () => countSql(t, 'SELECT count(*) AS n FROM statements');
      assert.equal(await rejections(), total);
      const before = await statements();

      const run = startCli(t, ['rejections', 'replay', '--all', '--validation', 'lax']);
      for (;;) {
        if ((await rejections()) < total || run.child.exitCode !== null) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      run.child.kill('SIGKILL');
      const killed = await run.done;
      assert.equal(killed.signal, 'SIGKILL', killed.stdout);
      const left = await rejections();
      assert.ok(left > 0 && left < total, `cut mid-way: ${left} of ${total} left`);
      const [start, ...none] = await audit('rejections.replay');
      assert.deepEqual([phases([start]), start.details, none], [[['start', 'cli', 'os-user']], { phase: 'start', all: true, validation: 'lax' }, []]);

      // The killed replay's claims still hold: left to it, nothing replayed twice.
      const held = await runCli(t, ['rejections', 'replay', '--all', '--validation', 'lax']);
      assert.equal(held.code, 0, held.stderr);
      assert.match(held.stdout, new RegExp(`^replayed 0: 0 stored and removed, .*; ${left} left to another replay under way$`, 'm'));
      // A minute on, they have expired.
      await runSql(t, ['UPDATE rejections SET claimed_until_ms = 0']);
      const rest = await runCli(t, ['rejections', 'replay', '--all', '--validation', 'lax']);
      assert.equal(rest.code, 0, rest.stderr);
      assert.match(rest.stdout, new RegExp(`^replayed ${left}: ${left} stored and removed`, 'm'));
      assert.equal(await rejections(), 0);
      assert.equal(await statements(), before + 2 * total, 'two statements per rejection, each once');
    });
  });
}
