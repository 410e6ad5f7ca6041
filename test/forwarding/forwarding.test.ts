/**
 * Statement forwarding, on every backend, to real targets on loopback: a second Lectern server
 * (with its own user and scopes) and node:http receivers for the failure modes. Figures are read
 * from the forwarder (/heartbeat lists the targets and whether they hold dead letters, no figures);
 * dead letters are re-queued with the built CLI.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { buildStatementsMultipart } from '../../src/xapi/multipart.ts';
import type { TargetStats } from '../../src/forwarding/forwarder.ts';
import type { ForwardingStats } from '../../src/store/types.ts';
import { ADMIN, BACKENDS, jsonInit, sqliteBackend, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/log.ts';
import { downPort, eventually, type Received, Receiver } from '../helpers/receiver.ts';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** The user the source LRS authenticates as on the target Lectern: it may only write statements. */
const FORWARDER: TestUser = { username: 'forwarder', password: 'fw-secret-pw', scopes: ['statements/write'], agent: { mbox: 'mailto:forwarder@example.com' } };

const entry = (url: string, over: Record<string, unknown> = {}) => ({
  is_active: true,
  url,
  basic_username: FORWARDER.username,
  basic_password: FORWARDER.password,
  max_retries: 20,
  // Generous: the tests share a loaded machine, and a stall must not pass for a slow target.
  timeout: 10,
  ...over,
});

const sha256 = (data: string): string => createHash('sha256').update(data).digest('hex');

const FAST = { LECTERN_XAPI_FORWARDING_BACKOFF: '20', LECTERN_XAPI_FORWARDING_LEASE: '2' };

/** The public heartbeat's forwarding entries: by configuration entry, whether it holds dead letters. */
async function heartbeatTargets(lrs: TestLrs): Promise<{ entry: number; dead_letters: boolean }[]> {
  const res = await fetch(`${lrs.url}/heartbeat`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as { database: string; forwarding: { entry: number; dead_letters: boolean }[] };
  assert.doesNotMatch(JSON.stringify(body), /http:/, 'no target url on the unauthenticated heartbeat');
  // The queues hold every store's statements: their counts on a public page are every store's volume.
  for (const s of body.forwarding) assert.deepEqual(Object.keys(s).sort(), ['dead_letters', 'entry'], 'no figures on the unauthenticated heartbeat');
  return body.forwarding;
}

/** Per target url, from the forwarder; /heartbeat lists the same targets by configuration entry. */
async function stats(lrs: TestLrs): Promise<Map<string, Omit<TargetStats, 'entry'>>> {
  const listed = await heartbeatTargets(lrs);
  const byUrl = await lrs.lrs.forwarder.stats();
  assert.deepEqual(
    listed.map((s) => s.entry),
    byUrl.map((s) => s.entry),
    'the heartbeat lists every active target by entry',
  );
  return new Map(byUrl.map(({ entry: _, ...s }) => [s.target, s]));
}

/** Waits until `target`'s figures satisfy `ok`; returns them. */
const figures = (lrs: TestLrs, target: string, what: string, ok: (s: Omit<TargetStats, 'entry'>) => boolean) =>
  eventually(what, async () => {
    const s = (await stats(lrs)).get(target);
    return s && ok(s) ? s : undefined;
  });

async function post(lrs: TestLrs, body: unknown): Promise<string[]> {
  const res = await lrs.fetch('/xAPI/statements', jsonInit('POST', body));
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as string[];
}

async function storedIds(lrs: TestLrs): Promise<string[]> {
  const res = await lrs.fetch('/xAPI/statements?limit=0&ascending=true');
  assert.equal(res.status, 200);
  return ((await res.json()) as { statements: { id: string }[] }).statements.map((s) => s.id);
}

function cli(args: string[], env: Record<string, string>) {
  const r = spawnSync(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8', timeout: 20_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

for (const backend of BACKENDS) {
  describe(`forwarding on ${backend.name}`, () => {
    const cleanup: (() => Promise<void>)[] = [];
    after(async () => {
      for (const fn of cleanup.reverse()) await fn();
    });
    const source = async (targets: unknown[], env: Record<string, string> = {}) => {
      const lrs = await startTestLrs(backend, { env: { ...FAST, LECTERN_XAPI_FORWARDINGS: JSON.stringify(targets), ...env } });
      cleanup.push(() => lrs.close());
      return lrs;
    };
    const lectern = async (env: Record<string, string> = {}) => {
      const lrs = await startTestLrs(sqliteBackend, { users: [ADMIN, FORWARDER], env });
      cleanup.push(() => lrs.close());
      return lrs;
    };
    const receiver = async (port = 0) => {
      const r = await new Receiver().listen(port);
      cleanup.push(() => r.close());
      return r;
    };

    test('statements stored by PUT and POST arrive at a real Lectern and a receiver, with Basic auth and the version header; duplicates and refused ones are not sent', async () => {
      const target = await lectern();
      const rec = await receiver();
      const targetUrl = `${target.url}/xAPI/statements`;
      const src = await source([entry(targetUrl), entry(rec.url), entry('http://127.0.0.1:9/never', { is_active: false })]);

      const batch = [statement(), statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/attempted' } }), statement({ result: { score: { scaled: 0.5 } } })];
      const ids = await post(src, batch);
      const putId = '6d1f3e59-0b5c-4e3e-9b1a-2f0b5d7a9c11';
      assert.equal((await src.fetch(`/xAPI/statements?statementId=${putId}`, jsonInit('PUT', statement()))).status, 204);
      // The same statements again: stored already, so not forwarded again; a conflicting one is not stored at all.
      await post(
        src,
        batch.map((s, i) => ({ ...s, id: ids[i] })),
      );
      const conflict = await src.fetch(`/xAPI/statements?statementId=${putId}`, jsonInit('PUT', statement({ verb: { id: 'http://example.com/other' } })));
      assert.equal(conflict.status, 409);
      // A statement with its attachment's data (multipart): the data goes along.
      const data = 'the attachment bytes';
      const withData = statement({
        attachments: [{ usageType: 'http://example.com/usage', display: { 'en-US': 'a file' }, contentType: 'text/plain', length: data.length, sha2: sha256(data) }],
      });
      const mp = buildStatementsMultipart(JSON.stringify(withData), [{ sha2: sha256(data), contentType: 'text/plain', body: Buffer.from(data) }]);
      const res = await src.fetch('/xAPI/statements', { method: 'POST', headers: { 'content-type': mp.contentType }, body: new Uint8Array(mp.body) });
      assert.equal(res.status, 200, await res.clone().text());
      const [attId] = (await res.json()) as string[];
      const all = [...ids, putId, attId].sort();

      await figures(src, targetUrl, 'delivery to the Lectern target', (s) => s.delivered === 5);
      const arrived = (await storedIds(target)).sort();
      assert.deepEqual(arrived, all);
      // The target stored them as its forwarder user's statements.
      const one = (await (await target.fetch(`/xAPI/statements?statementId=${putId}`)).json()) as { authority: { mbox: string }; verb: { id: string } };
      assert.equal(one.authority.mbox, 'mailto:forwarder@example.com');
      assert.equal(one.verb.id, 'http://adlnet.gov/expapi/verbs/passed');

      const withAttachment = await target.fetch(`/xAPI/statements?statementId=${attId}&attachments=true`);
      assert.match(withAttachment.headers.get('content-type') ?? '', /^multipart\/mixed/);
      assert.ok(Buffer.from(await withAttachment.arrayBuffer()).includes(data), 'the target has the attachment data');

      const s = await figures(src, rec.url, 'delivery to the receiver', (x) => x.delivered === 5);
      assert.deepEqual(s, { target: rec.url, queued: 0, delivered: 5, retried: 0, dead: 0 });
      assert.deepEqual(rec.ids().sort(), all, 'each statement once');
      for (const r of rec.requests) {
        assert.equal(r.headers.authorization, `Basic ${Buffer.from('forwarder:fw-secret-pw').toString('base64')}`);
        assert.equal(r.headers['x-experience-api-version'], '1.0.3');
        assert.match(String(r.headers['content-type']), r.parts.length ? /^multipart\/mixed/ : /^application\/json/);
      }
      assert.deepEqual(
        rec.requests.flatMap((r) => r.parts.map((p) => [p.headers['x-experience-api-hash'], p.body.toString()])),
        [[sha256(data), data]],
      );
      // The stored statement is what is sent: its id, stored and authority.
      const sent = rec.requests[0].statements[0] as { id: string; stored: string; authority: { mbox: string } };
      assert.equal(sent.id, ids[0]);
      assert.ok(sent.stored);
      assert.equal(sent.authority.mbox, 'mailto:admin@example.com');
      // Inactive entries are ignored; passwords never reach the heartbeat.
      assert.deepEqual([...(await stats(src)).keys()].sort(), [targetUrl, rec.url].sort());
      assert.doesNotMatch(await (await fetch(`${src.url}/heartbeat`)).text(), /fw-secret-pw/);
    });

    test("a target echoing the request's credentials: they reach no log, dead letter, `forwarding status` or heartbeat", async () => {
      const bearer = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJmb3J3YXJkZXIifQ.c2lnbmF0dXJlLXNlY3JldA';
      const pair = `${FORWARDER.username}:${FORWARDER.password}`;
      const b64 = Buffer.from(pair).toString('base64');
      // What careless targets send back: the header as text, as JSON, decoded, in a URL, and in the
      // encodings patterns cannot follow (percent-encoded, JSON-escaped, wrapped, hex).
      const encodings = (r: Received) => [
        `you sent Authorization: ${r.headers.authorization}`,
        JSON.stringify({ headers: r.headers }),
        `decoded: ${Buffer.from(String(r.headers.authorization).slice(6), 'base64').toString()}`,
        `try http://${pair}@127.0.0.1:1/xAPI/statements`,
        `header=${encodeURIComponent(String(r.headers.authorization))}`,
        JSON.stringify({ token: b64 }).replaceAll('/', '\\/'),
        `${b64.slice(0, 12)}\n${b64.slice(12)}`,
        `pass=${encodeURIComponent(FORWARDER.password)}`,
        `hex ${Buffer.from(pair).toString('hex').toUpperCase()}`,
      ];
      const failing = await receiver();
      let echoed = 0;
      failing.respond = (r) => ({ status: 503, body: `request ${echoed}: ${encodings(r)[echoed++ % encodings(r).length]}` });
      // An answer that repeats no credential of this target's still loses any credential it holds.
      const refusing = await receiver();
      refusing.respond = () => ({ status: 403, body: `you sent Authorization: Basic Zm9vOmJhcg==; proxy said Bearer ${bearer}` });
      const lines: string[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(chunk.toString());
          done();
        },
      });
      const src = await startTestLrs(backend, {
        logger: createLogger('debug', sink),
        env: { ...FAST, LECTERN_XAPI_FORWARDINGS: JSON.stringify([entry(failing.url, { max_retries: 8 }), entry(refusing.url)]) },
      });
      cleanup.push(() => src.close());
      await post(src, [statement()]);
      await figures(src, failing.url, 'retries exhausted', (s) => s.dead === 1);
      await figures(src, refusing.url, 'the 403 dead-lettered', (s) => s.dead === 1);
      assert.equal(failing.requests[0].headers.authorization, `Basic ${Buffer.from(pair).toString('base64')}`, 'the targets did get the credentials');

      const status = cli(['forwarding', 'status'], src.env);
      assert.equal(status.code, 0, status.stderr);
      const json = cli(['forwarding', 'status', '--json'], src.env);
      assert.equal(json.code, 0, json.stderr);
      const rows = JSON.parse(json.stdout) as ForwardingStats[];
      // Still errors an operator can act on: the status, and what could be kept of the answer.
      assert.match(rows.find((r) => r.target === failing.url)?.lastError ?? '', /^HTTP 503: \[the target's answer is not kept: it repeats the credentials/);
      assert.match(rows.find((r) => r.target === failing.url)?.lastError ?? '', /gave up after 9 attempts/);
      assert.equal(rows.find((r) => r.target === refusing.url)?.lastError, 'HTTP 403: you sent Authorization: [redacted]; proxy said Bearer [redacted]');
      const log = lines.join('');
      assert.match(log, /forwarding failed; will retry/);
      assert.match(log, /statements moved to dead letters/);
      const heartbeat = await (await fetch(`${src.url}/heartbeat`)).text();
      const recorded = { log, status: status.stdout + status.stderr, json: json.stdout + json.stderr, heartbeat };
      for (const secret of [
        FORWARDER.password,
        encodeURIComponent(FORWARDER.password),
        b64,
        b64.replace(/=+$/, ''),
        b64.slice(12, 24),
        Buffer.from(pair).toString('hex').toUpperCase(),
        'Zm9vOmJhcg',
        bearer,
        bearer.split('.')[2],
      ]) {
        for (const [where, text] of Object.entries(recorded)) assert.ok(!text.includes(secret), `${secret.slice(0, 10)}… in ${where}`);
      }
    });

    test('a target that is down receives everything once it comes back', async () => {
      const down = await downPort();
      const port = down.port;
      const url = `http://127.0.0.1:${port}/xAPI/statements`;
      const src = await source([entry(url, { max_retries: 1000, timeout: 1 })]);
      const ids = [...(await post(src, [statement(), statement()])), ...(await post(src, statement()))];
      await figures(src, url, 'failed attempts', (s) => s.retried >= 3 && s.queued === 3 && s.delivered === 0);
      await down.release();
      const target = await lectern({ LECTERN_RUNSERVER_PORT: String(port) });
      await figures(src, url, 'delivery after the target came back', (s) => s.delivered === 3 && s.queued === 0 && s.dead === 0);
      assert.deepEqual((await storedIds(target)).sort(), ids.sort());
    });

    test('a slow target times out and the batch is sent again', async () => {
      const rec = await receiver();
      // The first request gets no answer within the 0.5 s of inactivity the target is allowed (nor ever).
      rec.respond = (_r, n) => (n === 1 ? { hang: true } : { status: 200 });
      const src = await source([entry(rec.url, { timeout: 0.5 })]);
      const ids = await post(src, [statement(), statement()]);
      const s = await figures(src, rec.url, 'delivery after a timeout', (x) => x.delivered === 2);
      assert.ok(s.retried >= 2, 'both statements retried');
      assert.equal(s.queued, 0);
      assert.ok(rec.requests.length >= 2);
      assert.deepEqual(rec.requests[0].statements.map((x) => x.id).sort(), [...ids].sort());
      assert.deepEqual(rec.requests[1].statements.map((x) => x.id).sort(), [...ids].sort(), 'the same batch again');
    });

    test('4xx: dead letters (the rest of a refused batch still arrives); 5xx past max_retries: dead letters; `lectern forwarding retry` re-queues them', async () => {
      const picky = await receiver();
      const bad = 'http://example.com/verbs/unacceptable';
      picky.respond = (r) => ({ status: r.statements.some((x) => (x.verb as { id: string }).id === bad) ? 400 : 200 });
      const failing = await receiver();
      failing.respond = () => ({ status: 503 });
      const refusing = await receiver();
      refusing.respond = () => ({ status: 403 });
      const src = await source([entry(picky.url), entry(failing.url, { max_retries: 1 }), entry(refusing.url, { max_retries: 5 })]);
      const ids = await post(src, [statement(), statement({ verb: { id: bad } }), statement()]);

      const p = await figures(src, picky.url, 'the picky target settled', (s) => s.delivered === 2 && s.dead === 1);
      assert.equal(p.queued, 0);
      assert.deepEqual(new Set(picky.ids().filter((id) => id !== ids[1])), new Set([ids[0], ids[2]]));
      const f = await figures(src, failing.url, 'retries exhausted', (s) => s.dead === 3);
      assert.deepEqual(f, { target: failing.url, queued: 0, delivered: 0, retried: 3, dead: 3 });
      assert.equal(failing.requests.length, 2, 'the first attempt and one retry');
      const r = await figures(src, refusing.url, '403 dead-lettered', (s) => s.dead === 3);
      assert.equal(r.retried, 0);
      assert.equal(refusing.requests.length, 1, 'a 4xx is not retried');
      assert.deepEqual(
        await heartbeatTargets(src),
        [0, 1, 2].map((entry) => ({ entry, dead_letters: true })),
        'the heartbeat flags each target holding dead letters',
      );

      picky.respond = () => ({ status: 200 });
      if (backend.name === 'sqlite') {
        // `lectern forwarding` as a user runs it (once: it calls the outbox methods checked on postgres below).
        const status = cli(['forwarding', 'status'], src.env);
        assert.equal(status.code, 0, status.stderr);
        assert.match(status.stdout, /target\s+queued\s+delivered\s+retried\s+dead/);
        assert.match(status.stdout, new RegExp(`${picky.url.replaceAll('.', '\\.')}\\s+0\\s+2\\s+0\\s+1`));
        assert.match(status.stdout, /HTTP 503: .*gave up after 2 attempts/);
        assert.match(status.stdout, /HTTP 403/);
        assert.doesNotMatch(status.stdout + status.stderr, /fw-secret-pw/);
        const json = JSON.parse(cli(['forwarding', 'status', '--json'], src.env).stdout) as (ForwardingStats & { active: boolean })[];
        const row = json.find((x) => x.target === failing.url);
        assert.match(row?.lastError ?? '', /^HTTP 503/);
        assert.deepEqual({ ...row, lastError: undefined }, { target: failing.url, queued: 0, delivered: 0, retried: 3, dead: 3, lastError: undefined, active: true });
        const unknown = cli(['forwarding', 'retry', '--url', 'http://example.com/nothing'], src.env);
        assert.equal(unknown.code, 2);
        assert.match(unknown.stderr, /not an active forwarding target/);
        const retry = cli(['forwarding', 'retry', '--url', picky.url], src.env);
        assert.equal(retry.code, 0, retry.stderr);
        assert.match(retry.stdout, /re-queued 1 dead letter/);
      } else {
        const rows = new Map((await src.lrs.store.outbox.stats()).map((r) => [r.target, r]));
        assert.match(rows.get(failing.url)?.lastError ?? '', /^HTTP 503: .*gave up after 2 attempts/);
        assert.match(rows.get(refusing.url)?.lastError ?? '', /^HTTP 403/);
        assert.equal(await src.lrs.store.outbox.requeueDead(picky.url), 1);
      }
      await figures(src, picky.url, 'the re-queued dead letter delivered', (s) => s.delivered === 3 && s.dead === 0 && s.queued === 0);
      assert.ok(picky.ids().includes(ids[1]));
      assert.equal((await stats(src)).get(failing.url)?.dead, 3, 'other targets keep their dead letters');
      assert.deepEqual(
        (await heartbeatTargets(src)).map((s) => s.dead_letters),
        [false, true, true],
      );
    });

    test('two targets, one dead: the healthy one receives everything while the dead one hangs', async () => {
      const target = await lectern();
      const healthyUrl = `${target.url}/xAPI/statements`;
      const blackhole = await receiver();
      blackhole.respond = () => ({ hang: true });
      const src = await source([entry(blackhole.url, { timeout: 60 }), entry(healthyUrl)]);
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push(...(await post(src, [statement(), statement()])));
      await figures(src, healthyUrl, 'delivery to the healthy target', (s) => s.delivered === 8 && s.queued === 0);
      assert.deepEqual((await storedIds(target)).sort(), ids.sort());
      const dead = (await stats(src)).get(blackhole.url);
      assert.deepEqual(dead, { target: blackhole.url, queued: 8, delivered: 0, retried: 0, dead: 0 });
      assert.equal(blackhole.requests.length, 1, 'its first request still hangs');
    });
  });
}
