/**
 * `lectern import --from-lrs`: pulling every statement through another LRS's Statement resource
 * over real HTTP — from a second real Lectern, and from a loopback server that pages the way
 * other LRSs do (relative and absolute `more` links, multipart pages, bearer tokens).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { buildStatementsMultipart } from '../../src/xapi/multipart.ts';
import { ADMIN, BACKENDS, sqliteBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { allStatements, attachmentOf, runCli, seed, sha256, startCli, withoutStored } from './helpers.ts';

describe('lectern import --from-lrs (a second Lectern)', () => {
  let source: TestLrs;
  let copy: TestLrs;
  before(async () => {
    source = await startTestLrs(sqliteBackend);
    copy = await startTestLrs(BACKENDS[BACKENDS.length - 1]);
  });
  after(async () => {
    await source?.close();
    await copy?.close();
  });

  test('every statement, voided ones and attachments included, page after page', async () => {
    const seeded = await seed(source);
    const args = ['import', '--from-lrs', `${source.url}/xAPI/`, '--user', ADMIN.username, '--password', ADMIN.password, '--page-size', '2', '--attachments'];
    const r = await runCli(copy, args);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /imported 8 statements: 8 stored, 0 already stored, 0 rejected/);
    assert.deepEqual((await allStatements(copy)).map(withoutStored), (await allStatements(source)).map(withoutStored));
    const voided = await copy.fetch(`/xAPI/statements?voidedStatementId=${seeded.voidedId}`);
    assert.equal(voided.status, 200);
    // Without attachments=true the attachment's data cannot come: that statement is refused, as POST would.
    // (Credentials may also come in the URL.)
    const withCredentials = new URL('/xAPI', source.url);
    withCredentials.username = ADMIN.username;
    withCredentials.password = ADMIN.password;
    const again = await runCli(copy, ['import', '--from-lrs', withCredentials.toString(), '--page-size', '3']);
    assert.match(again.stderr, /imported 8 statements: 0 stored, 7 already stored, 1 rejected/);
    assert.equal(again.code, 1);
  });

  test('a wrong password is a clear one-line error', async () => {
    const r = await runCli(copy, ['import', '--from-lrs', `${source.url}/xAPI`, '--user', ADMIN.username, '--password', 'nope']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /\/xAPI\/statements answered 401/);
    assert.ok(!r.stderr.includes('nope'), 'the password is not repeated');
  });
});

describe('lectern import --from-lrs (an LRS paging its own way)', () => {
  let server: Server;
  let base: string;
  let copy: TestLrs;
  const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
  const cert = 'attachment bytes \u00e9';
  const voidedId = randomUUID();
  const statements = {
    first: [statement({ id: randomUUID() }), statement({ id: randomUUID(), actor: { mbox: 'mailto:x@example.com' } })],
    second: statement({ id: randomUUID(), attachments: [attachmentOf(cert, 'text/plain')] }),
    voided: statement({ id: voidedId, verb: { id: 'http://example.com/verbs/oops' } }),
    voiding: statement({ id: randomUUID(), verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: voidedId } }),
    invalid: { id: randomUUID(), actor: { mbox: 'mailto:y@example.com' }, verb: { id: 'not an iri' }, object: { id: 'http://example.com/a' } },
  };
  // Statements as an LRS serves them: stored, authority, version set.
  const served = (s: Record<string, unknown>) => ({ ...s, stored: new Date().toISOString(), authority: { mbox: 'mailto:lrs@example.com' }, version: '1.0.0' });

  before(async () => {
    server = createServer((req, res) => {
      seen.push({ url: req.url!, headers: req.headers });
      const url = new URL(req.url!, base);
      const auth = url.pathname.startsWith('/endless') ? `Basic ${Buffer.from('u:s3cret-pw').toString('base64')}` : 'Bearer t0ken';
      if (req.headers['x-experience-api-version'] !== '1.0.3' || req.headers.authorization !== auth) {
        res.writeHead(401).end('{"error":"unauthorized"}');
        return;
      }
      const json = (body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (url.pathname === '/endless/statements') {
        // Page after page of fresh statements, to interrupt.
        const page = Number(url.searchParams.get('page') ?? 0);
        return json({ statements: Array.from({ length: 50 }, () => served(statement({ id: randomUUID() }))), more: `/endless/statements?page=${page + 1}` });
      }
      if (url.searchParams.get('voidedStatementId') === voidedId) return json(served(statements.voided));
      switch (url.searchParams.get('cursor')) {
        case null:
          return json({ statements: statements.first.map(served), more: '/lrs/xapi/statements?cursor=b' });
        case 'b': {
          const m = buildStatementsMultipart(JSON.stringify({ statements: [served(statements.second)], more: `${base}/lrs/xapi/statements?cursor=c` }), [
            { sha2: sha256(cert), contentType: 'text/plain', body: Buffer.from(cert) },
          ]);
          return res.writeHead(200, { 'content-type': m.contentType }).end(m.body);
        }
        case 'c':
          return json({ statements: [served(statements.voiding), served(statements.invalid)], more: '' });
        default:
          res.writeHead(400).end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    copy = await startTestLrs(sqliteBackend);
  });
  after(async () => {
    server?.close();
    await copy?.close();
  });

  test('follows relative and absolute more links, reads multipart pages, fetches voided statements', async () => {
    const r = await runCli(copy, ['import', '--from-lrs', `${base}/lrs/xapi`, '--token', 't0ken', '--attachments']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /imported 6 statements: 5 stored, 0 already stored, 1 rejected/);
    // The first request asks for everything, oldest first, with attachments.
    const first = new URL(seen[0].url, base);
    assert.equal(first.pathname, '/lrs/xapi/statements');
    assert.equal(first.searchParams.get('ascending'), 'true');
    assert.equal(first.searchParams.get('attachments'), 'true');
    assert.deepEqual(
      seen.map((s) => new URL(s.url, base).searchParams.get('cursor') ?? new URL(s.url, base).searchParams.get('voidedStatementId')),
      [null, 'b', 'c', voidedId],
    );
    // Stored here with the authority the other LRS recorded.
    const got = await copy.fetch(`/xAPI/statements?statementId=${statements.second.id}&attachments=true`);
    const text = Buffer.from(await got.arrayBuffer()).toString('latin1');
    assert.ok(text.includes(Buffer.from(cert).toString('latin1')));
    assert.ok(text.includes('"authority":{"mbox":"mailto:lrs@example.com"}'));
    assert.equal((await copy.fetch(`/xAPI/statements?voidedStatementId=${voidedId}`)).status, 200);
    assert.equal((await allStatements(copy)).length, 4);
  });

  test('Ctrl-C stops after the batch in hand and prints the --more link to resume, without the password', async () => {
    const run = startCli(copy, ['import', '--from-lrs', `${base}/endless`, '-u', 'u', '-p', 's3cret-pw', '--batch-size', '50', '--progress-interval', '0'], {
      onStderr: (text, child) => {
        if (/import: [\d,]+ statements/.test(text) && !child.killed) child.kill('SIGINT');
      },
    });
    const r = await run.done;
    assert.equal(r.code, 130, r.stderr);
    const m = /To resume: (lectern import --from-lrs \S+ -u u -p <password> .*--more (\S+)) \(/.exec(r.stderr);
    assert.ok(m, r.stderr);
    assert.ok(!r.stderr.includes('s3cret-pw'));
    assert.match(m[2], new RegExp(`^${base}/endless/statements\\?page=\\d+$`));
  });
});
