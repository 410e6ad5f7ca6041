/**
 * Migration 11 (attachment links name their carrier) upgrades a store in place on both backends:
 * a store whose links predate it (the column and its index as migration 10 left them) gets every
 * existing link as carried by its statement's authority, so that what was served before is still
 * served (issue 27 item 7: a store cannot tell any more which request brought the data).
 */
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { describe, test } from 'node:test';
import pg from 'pg';
import { parseMultipartMixed } from '../../src/xapi/multipart.ts';
import { ADMIN, jsonInit, postgresBackend, sqliteBackend, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { postgresSkipped } from '../helpers/postgres.ts';
import { attachmentOf, danglingRows, multipartPost } from '../lifecycle/helpers.ts';

const mineUser = (name: string): TestUser => ({
  username: name,
  password: `${name}-pw`,
  scopes: ['statements/write', 'statements/read/mine'],
  agent: { mbox: `mailto:${name}@example.com` },
});
const OWNER = mineUser('owner');
const MINE = mineUser('mine');

/** Takes the store back to migration 10's attachment links. */
async function beforeMigration11(t: TestLrs): Promise<void> {
  const sql = [
    'DROP INDEX statement_attachments_carrier',
    'ALTER TABLE statement_attachments DROP COLUMN carrier',
    'CREATE INDEX statement_attachments_sha2 ON statement_attachments (sha2)',
    'DELETE FROM schema_migrations WHERE version = 11',
  ];
  if (t.config.backend === 'sqlite') {
    const db = new DatabaseSync(t.config.sqlitePath);
    for (const s of sql) db.exec(s);
    db.close();
    return;
  }
  const c = new pg.Client({ connectionString: t.config.postgresUrl });
  await c.connect();
  for (const s of sql) await c.query(s);
  await c.end();
}

for (const backend of postgresSkipped() ? [sqliteBackend] : [sqliteBackend, postgresBackend]) {
  describe(`migration 11: attachment carriers (${backend.name})`, () => {
    test('existing links are taken as carried by their statement', async () => {
      const t = await startTestLrs(backend, { users: [ADMIN, OWNER, MINE] });
      try {
        const report = 'a report stored before migration 11';
        const sent = await t.fetch('/xAPI/statements', {
          ...multipartPost([statement({ attachments: [attachmentOf(report, 'text/plain')] })], [{ data: report, contentType: 'text/plain' }]),
          user: OWNER,
        });
        assert.equal(sent.status, 200);
        const [carried] = (await sent.json()) as string[];
        const declaring = await t.fetch(
          '/xAPI/statements',
          jsonInit('POST', statement({ attachments: [{ ...attachmentOf(report, 'text/plain'), fileUrl: 'http://example.com/r' }] }), { user: MINE }),
        );
        const [declared] = (await declaring.json()) as string[];
        await t.lrs.close();
        await beforeMigration11(t);
        await t.restart();

        const data = async (id: string, u: TestUser) => {
          const res = await t.fetch(`/xAPI/statements?statementId=${id}&attachments=true`, { user: u });
          assert.equal(res.status, 200);
          return parseMultipartMixed(res.headers.get('content-type')!, Buffer.from(await res.arrayBuffer()))
            .slice(1)
            .map((p) => p.body.toString('utf8'));
        };
        assert.deepEqual(await data(carried, OWNER), [report]);
        assert.deepEqual(await data(declared, MINE), [report], 'served as before the migration: which request brought the data is not known');
        assert.deepEqual(
          Object.entries(await danglingRows(t)).filter(([, n]) => n > 0),
          [],
        );
      } finally {
        await t.close();
      }
    });
  });
}
