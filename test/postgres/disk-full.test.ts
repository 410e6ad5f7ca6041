/**
 * PostgreSQL out of disk (SQLSTATE 53100, issue 27 item 12), through HTTP: the server's own
 * error, raised by triggers in the test's database as PostgreSQL raises it when it cannot extend
 * a file. Writes get 503 with a JSON body saying why, the log names the cause, nothing of a refused
 * request is stored, and writes succeed again once the disk "has room" (the triggers dropped).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pg from 'pg';
import { createLogger } from '../../src/log.ts';
import { jsonInit, postgresBackend, startTestLrs, statement } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';

const FULL = `CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  RAISE EXCEPTION USING ERRCODE = '53100', MESSAGE = 'could not extend file "base/16384/16385": No space left on device';
END $$;
CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON statements FOR EACH ROW EXECUTE FUNCTION disk_full();
CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON documents FOR EACH ROW EXECUTE FUNCTION disk_full();`;
const ROOM = 'DROP TRIGGER disk_full ON statements; DROP TRIGGER disk_full ON documents; DROP FUNCTION disk_full();';

test('PostgreSQL disk full: 503 with a clear body, the cause logged; writes resume once there is room', { skip: postgresSkipped() }, async () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const t = await startTestLrs(postgresBackend, { logger: createLogger('info', sink) });
  const db = new pg.Client({ connectionString: t.env.LECTERN_POSTGRES_URL });
  await db.connect();
  try {
    const first = await t.fetch('/xAPI/statements', jsonInit('POST', [statement()]));
    assert.equal(first.status, 200);
    const acked = (await first.json()) as string[];
    await db.query(FULL);

    const refused = randomUUID();
    const res = await t.fetch('/xAPI/statements', jsonInit('POST', [statement({ id: refused }), statement()]));
    assert.equal(res.status, 503, await res.clone().text());
    assert.equal(res.headers.get('retry-after'), '5');
    const detail = ((await res.json()) as { detail: string }).detail;
    assert.match(detail, /cannot write to its database .*disk is full.*nothing of this request was stored/);
    assert.doesNotMatch(detail, /base\/16384/, 'no file names for clients');
    const doc = `/xAPI/activities/state?activityId=http://example.com/a&stateId=s&agent=${encodeURIComponent('{"mbox":"mailto:ben@example.com"}')}`;
    assert.equal((await t.fetch(doc, jsonInit('PUT', { page: 1 }))).status, 503);
    assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', [statement()]))).status, 503);
    const log = lines.join('');
    // Three refused requests, one line: an outage is not logged once per request.
    assert.equal(log.match(/PostgreSQL cannot write \(disk full\)/g)?.length, 1, log);
    assert.match(log, /"err":"could not extend file \\"base\/16384\/16385\\": No space left on device \(53100\)".*"msg":"PostgreSQL cannot write \(disk full\)/);
    assert.doesNotMatch(log, /unhandled error/);
    // Reads go on.
    assert.equal((await t.fetch(`/xAPI/statements?statementId=${acked[0]}`)).status, 200);

    await db.query(ROOM);
    const again = await t.fetch('/xAPI/statements', jsonInit('POST', [statement()]));
    assert.equal(again.status, 200, await again.text());
    assert.equal((await t.fetch(doc, jsonInit('PUT', { page: 1 }))).status, 204);
    assert.equal((await t.fetch(`/xAPI/statements?statementId=${refused}`)).status, 404, 'nothing of the refused request was stored');
    assert.equal((await t.fetch(`/xAPI/statements?statementId=${acked[0]}`)).status, 200);
  } finally {
    await db.end();
    await t.close();
  }
});
