/**
 * `lectern erase` and `--pseudonymize` on every backend: the person gone from every statement,
 * attachment and document, everything else untouched, no dangling rows, paging still exact, and
 * audit lines (when it starts and when it ends) that hold counts only.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseMultipartMixed } from '../../src/xapi/multipart.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, TENANT_B, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { allStatements, ANN, attachmentOf, BEN, countRows, danglingRows, multipartPost, post, runCli, seed } from './helpers.ts';

const KEY = 'a-secret-of-sixteen-chars-or-more';
const act = encodeURIComponent('http://example.com/activities/explosives-training');
const q = (agent: unknown) => encodeURIComponent(JSON.stringify(agent));

/** Seeds the store, plus what erasure must follow: an attachment shared with someone else, a voiding of Ben's statement by someone else. */
async function seedForErase(lrs: TestLrs): Promise<{ benStatement: string }> {
  await seed(lrs);
  const shared = 'shared syllabus';
  const res = await lrs.fetch(
    '/xAPI/statements',
    multipartPost(
      [statement({ actor: BEN, attachments: [attachmentOf(shared, 'text/plain')] }), statement({ actor: ANN, attachments: [attachmentOf(shared, 'text/plain')] })],
      [{ data: shared, contentType: 'text/plain' }],
    ),
  );
  assert.equal(res.status, 200);
  const [benStatement] = await post(lrs, statement({ actor: { mbox: 'mailto:ben@EXAMPLE.com' }, verb: { id: 'http://example.com/verbs/case' } }));
  await post(lrs, statement({ actor: ANN, verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: benStatement } }));
  return { benStatement };
}

const mentionsBen = (s: unknown) => /ben@example\.com/i.test(JSON.stringify(s));

for (const backend of BACKENDS) {
  describe(`lectern erase (${backend.name})`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend);
    });
    after(async () => lrs?.close());

    test('--dry-run reports and changes nothing; erase removes the person everywhere and nothing else', async () => {
      const { benStatement } = await seedForErase(lrs);
      // Ben in another store (tenant): not this erasure's business.
      const inB = await lrs.fetch('/xAPI/statements', jsonInit('POST', statement({ actor: BEN }), { user: TENANT_B }));
      assert.equal(inB.status, 200);
      const before = await allStatements(lrs);
      const attachmentsBefore = await countRows(lrs, 'attachments');
      const dry = await runCli(lrs, ['erase', '--agent', JSON.stringify({ mbox: 'mailto:ben@example.com' }), '--dry-run', '--list']);
      assert.equal(dry.code, 0, dry.stderr);
      const dryReport = JSON.parse(dry.stdout.trim().split('\n').at(-1)!);
      assert.match(dry.stdout, /^would erase 8 statements \(1 of them voiding or targeting the agent's statements\), 1 attachments no other statement uses, and 3 /m);
      const listed = dry.stdout
        .split('\n')
        .filter((l) => /^statement [0-9a-f-]{36}$/.test(l))
        .map((l) => l.slice(10));
      assert.equal(listed.length, 8);
      assert.ok(listed.includes(benStatement));
      assert.equal(dry.stdout.split('\n').filter((l) => l.startsWith('document {')).length, 3);
      assert.equal(dryReport.documents, 3);
      // What the real erase removes (Ben's certificate; the shared syllabus stays, Ann carried it too).
      assert.equal(dryReport.attachments, 1);
      assert.deepEqual(await allStatements(lrs), before);

      const r = await runCli(lrs, ['erase', '--agent', JSON.stringify(BEN)]);
      assert.equal(r.code, 0, r.stderr);
      const report = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
      // Actor, instructor, SubStatement actor, Group member, the attachment one, the shared
      // attachment one, the mixed-case mbox one; plus Ann's statement voiding Ben's.
      assert.deepEqual(
        { statements: report.statements, referring: report.referring, attachments: report.attachments, documents: report.documents },
        {
          statements: 8,
          referring: 1,
          attachments: 1,
          documents: 3,
        },
      );
      assert.ok(!r.stdout.includes('ben@example.com'));

      const now = await allStatements(lrs);
      assert.equal(now.filter(mentionsBen).length, 0);
      // Everything not about Ben is still there, unchanged (minus the voiding statement of Ben's).
      const expected = before.filter((s) => !mentionsBen(s) && (s.object as { id: string }).id !== benStatement);
      assert.equal(expected.length, before.length - 7);
      assert.deepEqual(now, expected);
      assert.equal((await allStatements(lrs, `&agent=${q(BEN)}&related_agents=true`)).length, 0);
      // The shared attachment stays (Ann's statement links it); Ben's certificate goes.
      assert.equal(await countRows(lrs, 'attachments'), attachmentsBefore - 1);
      assert.deepEqual(
        Object.entries(await danglingRows(lrs)).filter(([, n]) => n > 0),
        [],
      );
      // Paging is exact: pages of 1 give every remaining statement once.
      assert.deepEqual(await allStatements(lrs, '', 1), now);
      // Ben's State and Agent Profile documents are gone; Ann's and the Activity Profile stay.
      assert.equal((await lrs.fetch(`/xAPI/activities/state?activityId=${act}&agent=${q(BEN)}&stateId=bookmark`)).status, 404);
      assert.deepEqual(await (await lrs.fetch(`/xAPI/activities/state?activityId=${act}&agent=${q(BEN)}`)).json(), []);
      assert.equal((await lrs.fetch(`/xAPI/agents/profile?agent=${q(BEN)}&profileId=prefs`)).status, 404);
      assert.equal((await lrs.fetch(`/xAPI/activities/state?activityId=${act}&agent=${q(ANN)}&stateId=bookmark`)).status, 200);
      assert.equal((await lrs.fetch(`/xAPI/agents/profile?agent=${q(ANN)}&profileId=prefs`)).status, 200);
      assert.equal((await lrs.fetch(`/xAPI/activities/profile?activityId=${act}&profileId=syllabus`)).status, 200);

      // Two audit lines, when the run started and when it ended: what, when, how many; not who.
      const audit = readFileSync(join(lrs.dir, 'lectern-audit.log'), 'utf8').trim().split('\n');
      assert.equal(audit.length, 2, 'a dry run writes no audit line');
      const [start, line] = audit.map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.deepEqual([start.phase, start.command, start.action, start.target], ['start', 'erase', 'erase', '']);
      assert.equal(line.phase, 'end');
      assert.equal(line.command, 'erase');
      assert.equal(line.statements, 8);
      assert.ok(!/ben|Ben/.test(audit.join('\n')), audit.join('\n'));

      const otherStore = await lrs.fetch(`/xAPI/statements?agent=${q(BEN)}`, { user: TENANT_B });
      assert.equal(((await otherStore.json()) as { statements: unknown[] }).statements.length, 1);

      // Erasing again finds nothing.
      const again = await runCli(lrs, ['erase', '--agent', JSON.stringify(BEN)]);
      assert.match(again.stdout, /^erased 0 statements/);
    });
  });

  describe(`attachment data and the statements that carried it (${backend.name})`, () => {
    const BEN_USER: TestUser = { username: 'ben', password: 'ben-pw', scopes: ['statements/write', 'statements/read/mine'], agent: { mbox: BEN.mbox } };
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend, { users: [ADMIN, BEN_USER] });
    });
    after(async () => lrs?.close());

    test('pseudonymization keeps the carrier; erasing the last carrier removes the data, whoever still declares its hash', async () => {
      const report = 'Ben sent this report';
      const sent = await lrs.fetch('/xAPI/statements', {
        ...multipartPost([statement({ actor: ANN, attachments: [attachmentOf(report, 'text/plain')] })], [{ data: report, contentType: 'text/plain' }]),
        user: BEN_USER,
      });
      assert.equal(sent.status, 200);
      // Someone else declares the hash with a fileUrl: its statement carries nothing.
      const [declared] = await post(lrs, statement({ actor: ANN, attachments: [{ ...attachmentOf(report, 'text/plain'), fileUrl: 'http://example.com/r' }] }));
      const data = async () => {
        const res = await lrs.fetch(`/xAPI/statements?statementId=${declared}&attachments=true`);
        return parseMultipartMixed(res.headers.get('content-type')!, Buffer.from(await res.arrayBuffer()))
          .slice(1)
          .map((p) => p.body.toString('utf8'));
      };
      assert.deepEqual(await data(), [report], "a full reader gets the data carried by Ben's statement");

      const pseudo = await runCli(lrs, ['erase', '--agent', JSON.stringify(BEN), '--pseudonymize'], { env: { LECTERN_PSEUDONYMIZE_KEY: KEY } });
      assert.equal(pseudo.code, 0, pseudo.stderr);
      assert.deepEqual(
        Object.entries(await danglingRows(lrs)).filter(([, n]) => n > 0),
        [],
        'the carrier follows the authority',
      );
      assert.deepEqual(await data(), [report]);

      const pseudonym = (await allStatements(lrs)).find((s) => s.id !== declared)!.authority;
      const dry = await runCli(lrs, ['erase', '--agent', JSON.stringify(pseudonym), '--dry-run']);
      assert.equal(JSON.parse(dry.stdout.trim().split('\n').at(-1)!).attachments, 1, 'a dry run counts what the erase removes');
      const erased = await runCli(lrs, ['erase', '--agent', JSON.stringify(pseudonym)]);
      assert.equal(erased.code, 0, erased.stderr);
      assert.equal(JSON.parse(erased.stdout.trim().split('\n').at(-1)!).attachments, 1);
      assert.equal(await countRows(lrs, 'attachments'), 0);
      assert.deepEqual(await data(), []);
      assert.equal((await allStatements(lrs))[0].id, declared, 'the declaring statement stays, its attachment object too');
      assert.deepEqual(
        Object.entries(await danglingRows(lrs)).filter(([, n]) => n > 0),
        [],
      );
    });

    test('the data a statement targeting the person carried is counted by the dry run and removed with it', async () => {
      const [target] = await post(lrs, statement({ actor: BEN }));
      const comment = 'Ann commented on this';
      const ref = statement({
        actor: ANN,
        verb: { id: 'http://example.com/verbs/commented' },
        object: { objectType: 'StatementRef', id: target },
        attachments: [attachmentOf(comment, 'text/plain')],
      });
      assert.equal((await lrs.fetch('/xAPI/statements', multipartPost([ref], [{ data: comment, contentType: 'text/plain' }]))).status, 200);
      const dry = await runCli(lrs, ['erase', '--agent', JSON.stringify(BEN), '--dry-run']);
      assert.equal(dry.code, 0, dry.stderr);
      const report = JSON.parse(dry.stdout.trim().split('\n').at(-1)!);
      assert.deepEqual([report.statements, report.referring, report.attachments], [2, 1, 1]);
      const erased = await runCli(lrs, ['erase', '--agent', JSON.stringify(BEN)]);
      assert.equal(erased.code, 0, erased.stderr);
      assert.equal(JSON.parse(erased.stdout.trim().split('\n').at(-1)!).attachments, 1, 'the erase removes what the dry run counted');
      assert.deepEqual(
        Object.entries(await danglingRows(lrs)).filter(([, n]) => n > 0),
        [],
      );
    });
  });

  describe(`lectern erase --pseudonymize (${backend.name})`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend);
    });
    after(async () => lrs?.close());

    test('needs LECTERN_PSEUDONYMIZE_KEY', async () => {
      const r = await runCli(lrs, ['erase', '--agent', JSON.stringify(BEN), '--pseudonymize']);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /LECTERN_PSEUDONYMIZE_KEY/);
    });

    test('replaces the person by the same keyed pseudonym everywhere; the rest is untouched', async () => {
      const { benStatement } = await seedForErase(lrs);
      const before = await allStatements(lrs);
      const voidedBefore = await (await lrs.fetch(`/xAPI/statements?voidedStatementId=${benStatement}`)).json();
      const r = await runCli(lrs, ['erase', '--agent', JSON.stringify(BEN), '--pseudonymize'], { env: { LECTERN_PSEUDONYMIZE_KEY: KEY } });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^pseudonymized the agent in 7 statements and 3 documents/);
      const now = await allStatements(lrs);
      assert.equal(now.length, before.length, 'no statement removed');
      assert.equal(now.filter(mentionsBen).length, 0);
      // Same ids, same order, same `stored`; statements not about Ben byte for byte the same.
      assert.deepEqual(
        now.map((s) => [s.id, s.stored]),
        before.map((s) => [s.id, s.stored]),
      );
      assert.deepEqual(
        now.filter((_s, i) => !mentionsBen(before[i])),
        before.filter((s) => !mentionsBen(s)),
      );
      const pseudonym = now.find((s) => s.id === before.find((b) => mentionsBen(b) && (b.actor as { mbox?: string }).mbox)!.id)!.actor as Record<string, unknown>;
      assert.equal((pseudonym.account as { homePage: string }).homePage, 'https://pseudonym.lectern.invalid');
      assert.match((pseudonym.account as { name: string }).name, /^[0-9a-f]{64}$/);
      assert.equal(pseudonym.name, undefined, 'the name goes too');
      // The index follows: the pseudonym finds the statements Ben was found by.
      const byPseudonym = await allStatements(lrs, `&agent=${q(pseudonym)}&related_agents=true`);
      assert.equal(byPseudonym.length, 7);
      assert.equal((await allStatements(lrs, `&agent=${q(BEN)}&related_agents=true`)).length, 0);
      // The voided statement is pseudonymized too, and still voided.
      const voided = (await (await lrs.fetch(`/xAPI/statements?voidedStatementId=${benStatement}`)).json()) as Record<string, unknown>;
      assert.deepEqual(voided.actor, pseudonym);
      assert.equal(voided.id, (voidedBefore as Record<string, unknown>).id);
      // Documents move to the pseudonym.
      const moved = await lrs.fetch(`/xAPI/activities/state?activityId=${act}&agent=${q(pseudonym)}&stateId=bookmark`);
      assert.equal(moved.status, 200);
      assert.equal(await moved.text(), '{"page":3}');
      assert.equal((await lrs.fetch(`/xAPI/agents/profile?agent=${q(BEN)}&profileId=prefs`)).status, 404);
      assert.deepEqual(
        Object.entries(await danglingRows(lrs)).filter(([, n]) => n > 0),
        [],
      );

      // Someone else pseudonymized with the same key gets another pseudonym; the same person the same one.
      const id = randomUUID();
      await post(lrs, statement({ id, actor: BEN }));
      await runCli(lrs, ['erase', '--agent', JSON.stringify(BEN), '--pseudonymize'], { env: { LECTERN_PSEUDONYMIZE_KEY: KEY } });
      const later = (await (await lrs.fetch(`/xAPI/statements?statementId=${id}`)).json()) as Record<string, unknown>;
      assert.deepEqual(later.actor, pseudonym);
      const audit = readFileSync(join(lrs.dir, 'lectern-audit.log'), 'utf8');
      assert.ok(!audit.includes(KEY) && !/ben@/i.test(audit) && !audit.includes((pseudonym.account as { name: string }).name));
    });
  });
}
