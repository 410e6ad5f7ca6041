/**
 * `lectern export` then `lectern import` into an empty store, on every backend: the same
 * statements (voided ones too), attachments byte for byte, documents with their content types.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { parseMultipartMixed } from '../../src/xapi/multipart.ts';
import { NOT_CARRIED_FILE } from '../../src/ops/archive.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { allStatements, attachmentOf, BEN, multipartPost, runCli, seed, sha256, withoutStored } from './helpers.ts';

for (const backend of BACKENDS) {
  describe(`export → import round trip (${backend.name})`, () => {
    let source: TestLrs;
    let copy: TestLrs;
    let seeded: Awaited<ReturnType<typeof seed>>;
    before(async () => {
      source = await startTestLrs(backend);
      copy = await startTestLrs(backend);
      seeded = await seed(source);
    });
    after(async () => {
      await source?.close();
      await copy?.close();
    });

    test('statements, attachments and documents arrive as they were', async () => {
      const file = join(source.dir, 'backup.ndjson.gz');
      const exp = await runCli(source, ['export', '-o', file, '--attachments', '--documents']);
      assert.equal(exp.code, 0, exp.stderr);
      assert.match(exp.stderr, /exported 8 statements .*1 attachments .*6 documents/);
      const lines = gunzipSync(readFileSync(file)).toString('utf8').trim().split('\n');
      assert.equal(lines.length, 8, 'voided statements are exported too');
      // Stored order, and each line exactly the statement the LRS serves.
      const stored = lines.map((l) => JSON.parse(l).stored as string);
      assert.deepEqual([...stored].sort(), stored);
      const single = await source.fetch(`/xAPI/statements?statementId=${JSON.parse(lines[0]).id}`);
      assert.equal(await single.text(), lines[0]);
      assert.deepEqual(readdirSync(join(source.dir, 'backup.attachments')), [sha256(seeded.cert)]);

      const imp = await runCli(copy, ['import', file]);
      assert.equal(imp.code, 0, imp.stderr);
      assert.match(imp.stderr, /imported 8 statements: 8 stored, 0 already stored, 0 rejected; 6 documents stored, 0 unchanged, 0 rejected\n/);

      // The same statements in the same order; only `stored` is the importing LRS's own.
      const before = await allStatements(source);
      const now = await allStatements(copy);
      assert.deepEqual(now.map(withoutStored), before.map(withoutStored));
      // Voided statements keep their voided state.
      assert.equal((await copy.fetch(`/xAPI/statements?statementId=${seeded.voidedId}`)).status, 404);
      const voided = await copy.fetch(`/xAPI/statements?voidedStatementId=${seeded.voidedId}`);
      assert.equal(voided.status, 200);
      // Attachments byte for byte.
      const withAttachment = before.find((s) => s.attachments)!;
      const res = await copy.fetch(`/xAPI/statements?statementId=${withAttachment.id}&attachments=true`);
      const parts = parseMultipartMixed(res.headers.get('content-type')!, Buffer.from(await res.arrayBuffer()));
      assert.equal(parts.length, 2);
      assert.equal(parts[1].body.toString('latin1'), Buffer.from(seeded.cert).toString('latin1'));
      assert.equal(parts[1].headers['content-type'], 'application/pdf');
      // Documents: content, content type and ETag.
      const act = encodeURIComponent('http://example.com/activities/explosives-training');
      const ben = encodeURIComponent(JSON.stringify(BEN));
      for (const path of [
        `/xAPI/activities/state?activityId=${act}&agent=${ben}&stateId=bookmark`,
        `/xAPI/agents/profile?agent=${ben}&profileId=prefs`,
        `/xAPI/activities/profile?activityId=${act}&profileId=syllabus`,
      ]) {
        const [a, b] = [await source.fetch(path), await copy.fetch(path)];
        assert.equal(b.status, 200, path);
        assert.equal(b.headers.get('content-type'), a.headers.get('content-type'));
        assert.equal(b.headers.get('etag'), a.headers.get('etag'));
        assert.deepEqual(Buffer.from(await b.arrayBuffer()), Buffer.from(await a.arrayBuffer()));
      }
      const ids = await copy.fetch(`/xAPI/activities/state?activityId=${act}&agent=${ben}`);
      assert.deepEqual(((await ids.json()) as string[]).sort(), ['bookmark', 'photo']);

      // Exported again, the copy gives the same lines but for `stored`; the documents' lines are
      // the same, `updated` (Last-Modified) included.
      const again = join(copy.dir, 'again.ndjson');
      assert.equal((await runCli(copy, ['export', '-o', again, '--documents'])).code, 0);
      const strip = (l: string) => l.replace(/"stored":"[^"]*",/, '');
      assert.deepEqual(readFileSync(again, 'utf8').trim().split('\n').map(strip), lines.map(strip));
      const documents = gunzipSync(readFileSync(join(source.dir, 'backup.documents.ndjson.gz'))).toString('utf8');
      assert.match(documents, /"updated":"/);
      assert.equal(readFileSync(join(copy.dir, 'again.documents.ndjson'), 'utf8'), documents);
    });

    test('importing again stores nothing twice', async () => {
      const file = join(source.dir, 'backup.ndjson.gz');
      const imp = await runCli(copy, ['import', file]);
      assert.equal(imp.code, 0, imp.stderr);
      assert.match(imp.stderr, /imported 8 statements: 0 stored, 8 already stored, 0 rejected; 0 documents stored, 6 unchanged, 0 rejected\n/);
      // A plain file too (read while the store is still being opened: nothing may be lost),
      // exported without --attachments: the statement whose attachment has no data is refused, as POST would.
      const plain = await runCli(copy, ['import', join(copy.dir, 'again.ndjson')]);
      assert.match(plain.stderr, /imported 8 statements: 0 stored, 7 already stored, 1 rejected/);
      const reject = JSON.parse(readFileSync(join(copy.dir, 'again.rejects.ndjson'), 'utf8'));
      assert.match(reject.error, /attachments\[0\] has no fileUrl, so its data must be sent/);
      assert.equal((await allStatements(copy)).length, (await allStatements(source)).length);
    });

    test('filters (agent, stored window), stdout, documents of one agent', async () => {
      const docs = join(source.dir, 'ben-documents.ndjson');
      const exp = await runCli(source, ['export', '-o', '-', '--agent', JSON.stringify(BEN), '--documents', docs]);
      assert.equal(exp.code, 0, exp.stderr);
      const viaApi = await allStatements(source, `&agent=${encodeURIComponent(JSON.stringify(BEN))}`);
      assert.deepEqual(
        exp.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l).id),
        viaApi.map((s) => s.id),
      );
      // With --agent, the documents are that agent's: State and Agent Profile.
      const lines = readFileSync(docs, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      assert.deepEqual(lines.map((d) => `${d.kind}/${d.id}`).sort(), ['agent_profile/prefs', 'state/bookmark', 'state/photo']);
      const photo = lines.find((d) => d.id === 'photo');
      assert.equal(photo.contentType, 'image/png');
      assert.deepEqual(Buffer.from(photo.content, 'base64'), seeded.photo);
      assert.deepEqual(photo.agent, { objectType: 'Agent', mbox: BEN.mbox });
      // --since/--until bound `stored` (exclusive/inclusive), voided statements included.
      const all = (await runCli(source, ['export', '-o', '-'])).stdout.trim().split('\n');
      const storedOf = (l: string) => Date.parse(JSON.parse(l).stored);
      const since = new Date(storedOf(all[0])).toISOString();
      const until = new Date(storedOf(all[all.length - 2])).toISOString();
      const window = await runCli(source, ['export', '-o', '-', '--since', since, '--until', until]);
      assert.equal(window.code, 0, window.stderr);
      const expected = all.filter((l) => storedOf(l) > Date.parse(since) && storedOf(l) <= Date.parse(until));
      assert.ok(expected.length > 0 && expected.length < all.length);
      assert.deepEqual(window.stdout.trim().split('\n'), expected);
      const bad = await runCli(source, ['export', '-o', '-', '--verb', 'not an iri']);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--verb must be an absolute IRI/);
    });
  });

  describe(`export → import keeps who carried attachment data (${backend.name})`, () => {
    const mineUser = (name: string): TestUser => ({
      username: name,
      password: `${name}-pw`,
      scopes: ['statements/write', 'statements/read/mine'],
      agent: { mbox: `mailto:${name}@example.com` },
    });
    const OWNER = mineUser('owner');
    const MINE = mineUser('mine');
    let source: TestLrs;
    let copy: TestLrs;
    before(async () => {
      source = await startTestLrs(backend, { users: [ADMIN, OWNER, MINE] });
      copy = await startTestLrs(backend, { users: [ADMIN, OWNER, MINE] });
    });
    after(async () => {
      await source?.close();
      await copy?.close();
    });

    test('a statement that only declared a hash does not carry the data after an import', async () => {
      const report = "the owner's report";
      const sent = await source.fetch('/xAPI/statements', {
        ...multipartPost([statement({ attachments: [attachmentOf(report, 'text/plain')] })], [{ data: report, contentType: 'text/plain' }]),
        user: OWNER,
      });
      assert.equal(sent.status, 200);
      const [carrier] = (await sent.json()) as string[];
      const declaring = await source.fetch(
        '/xAPI/statements',
        jsonInit('POST', statement({ attachments: [{ ...attachmentOf(report, 'text/plain'), fileUrl: 'http://example.com/r' }] }), { user: MINE }),
      );
      assert.equal(declaring.status, 200);
      const [declared] = (await declaring.json()) as string[];

      const file = join(source.dir, 'carried.ndjson');
      const exp = await runCli(source, ['export', '-o', file, '--attachments']);
      assert.equal(exp.code, 0, exp.stderr);
      const folder = join(source.dir, 'carried.attachments');
      assert.deepEqual(readdirSync(folder).sort(), [NOT_CARRIED_FILE, sha256(report)].sort());
      assert.deepEqual(readFileSync(join(folder, NOT_CARRIED_FILE), 'utf8'), `${JSON.stringify({ id: declared, sha2: sha256(report) })}\n`);
      const imp = await runCli(copy, ['import', file]);
      assert.equal(imp.code, 0, imp.stderr);

      const data = async (id: string, u: TestUser) => {
        const res = await copy.fetch(`/xAPI/statements?statementId=${id}&attachments=true`, { user: u });
        assert.equal(res.status, 200);
        return parseMultipartMixed(res.headers.get('content-type')!, Buffer.from(await res.arrayBuffer()))
          .slice(1)
          .map((p) => p.body.toString('utf8'));
      };
      assert.deepEqual(await data(declared, MINE), []);
      assert.deepEqual(await data(carrier, OWNER), [report]);
      assert.deepEqual(await data(declared, ADMIN), [report], 'a full reader still gets it');
    });
  });
}
