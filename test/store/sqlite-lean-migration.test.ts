/**
 * SQLite migration 6 (lean storage) upgrades a database in place: a version-5 file holding rows
 * written by the old SQL (text tenant, keys and UUIDs in every row, as the store wrote them before)
 * is migrated at start-up, then answers through HTTP exactly as a fresh LRS that received the same
 * statements: GET by id, voiding, every filter, StatementRef targeting, `more` paging, since/until,
 * attachments, erasure; seq values and the statements' JSON are kept byte for byte, the outbox
 * still names the tenant, and new statements continue after the old seqs.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { MIGRATIONS } from '../../src/store/sqlite/migrations.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { actorKeys } from '../../src/xapi/agents.ts';
import { prepareStatement, stamp } from '../../src/xapi/statement.ts';
import type { Actor, Statement } from '../../src/xapi/types.ts';
import { ADMIN, jsonInit, startTestLrs, TENANT_B, type TestLrs } from '../helpers/lrs.ts';
import { danglingRows, runCli, sha256 } from '../lifecycle/helpers.ts';

const agent = (name: string): Actor => ({ objectType: 'Agent', mbox: `mailto:${name}@example.com` });
const ANN = agent('ann');
const BEN = agent('ben');
const CAROL = agent('carol');
const verb = (v: string) => ({ id: `http://example.com/verbs/${v}` });
const activity = (a: string) => ({ objectType: 'Activity', id: `http://example.com/activities/${a}` });
const REGISTRATION = randomUUID();
const ATTACHMENT = 'the attachment of a migrated statement';

/** The statements, in stored order (tenant, statement); ids fixed so a fresh LRS can take the same. */
function history(): { tenant: string; statement: Statement & { id: string } }[] {
  const s = (tenant: string, body: Record<string, unknown>) => ({ tenant, statement: { id: randomUUID(), ...body } as unknown as Statement & { id: string } });
  const s1 = s('', {
    actor: ANN,
    verb: verb('completed'),
    object: { ...activity('a1'), definition: { name: { en: 'A1' } } },
    context: { registration: REGISTRATION, instructor: BEN, contextActivities: { parent: [activity('course')] } },
  });
  const s2 = s('', { actor: BEN, verb: verb('answered'), object: activity('a2') });
  const s3 = s('', { actor: BEN, verb: verb('commented'), object: { objectType: 'StatementRef', id: s1.statement.id } });
  const s4 = s('', { actor: ANN, verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: s2.statement.id } });
  const carol = Array.from({ length: 6 }, (_, i) =>
    s('', {
      actor: CAROL,
      verb: verb('experienced'),
      object: activity('a3'),
      ...(i === 0 && {
        attachments: [{ usageType: 'http://example.com/usage', display: { en: 'a' }, contentType: 'text/plain', length: ATTACHMENT.length, sha2: sha256(ATTACHMENT) }],
      }),
    }),
  );
  const b = s('b', { actor: ANN, verb: verb('completed'), object: activity('a1'), context: { registration: REGISTRATION } });
  return [s1, s2, s3, s4, ...carol, b];
}

const T0 = Date.parse('2026-01-01T00:00:00Z');
const storedMsOf = (i: number) => T0 + i * 60_000;

/** A version-5 database with `rows` written by the store's pre-lean SQL; returns each row's `full`. */
function writeVersion5(path: string, rows: ReturnType<typeof history>): string[] {
  const db = new DatabaseSync(path);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  for (const m of MIGRATIONS.filter((x) => x.version <= 5)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, new Date().toISOString());
  }
  const voided = new Set(rows.flatMap((r) => (r.statement.verb.id.endsWith('/voided') ? [(r.statement.object as { id: string }).id] : [])));
  const fulls = rows.map((r, i) => {
    const authority = { objectType: 'Agent', ...(r.tenant === 'b' ? TENANT_B : ADMIN).agent } as Actor;
    const p = prepareStatement(r.statement, authority, '1.0.3');
    const full = JSON.stringify(stamp(p, new Date(storedMsOf(i)).toISOString()));
    const seq = i + 1;
    db.prepare(
      'INSERT INTO statements (seq, tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority_key, full) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(seq, r.tenant, p.id, storedMsOf(i), p.verb, p.registration, p.refId, p.voids ? 1 : 0, voided.has(p.id) ? 1 : 0, actorKeys(authority)[0], full);
    for (const a of p.agents) db.prepare('INSERT INTO statement_agents (tenant, agent_key, seq, role) VALUES (?, ?, ?, ?)').run(r.tenant, a.key, seq, a.role);
    for (const a of p.activities) db.prepare('INSERT INTO statement_activities (tenant, activity_id, seq, direct) VALUES (?, ?, ?, ?)').run(r.tenant, a.id, seq, a.direct ? 1 : 0);
    for (const h of p.attachmentHashes) db.prepare('INSERT INTO statement_attachments (seq, sha2) VALUES (?, ?)').run(seq, h);
    for (const d of p.definitions) db.prepare('INSERT INTO activities (tenant, id, definition) VALUES (?, ?, ?)').run(r.tenant, d.id, JSON.stringify(d.definition));
    return full;
  });
  db.prepare('INSERT INTO attachments (tenant, sha2, content_type, length, content) VALUES (?, ?, ?, ?, ?)').run(
    '',
    sha256(ATTACHMENT),
    'text/plain',
    ATTACHMENT.length,
    Buffer.from(ATTACHMENT),
  );
  // The tenant-b statement still queued for a forwarding target.
  db.prepare('INSERT INTO forward_outbox (target, seq) VALUES (?, ?)').run('http://target.example', rows.length);
  db.close();
  return fulls;
}

/** Ids of every statement a query gives, following `more` links. */
async function ids(t: TestLrs, query: string, user = ADMIN): Promise<string[]> {
  const out: string[] = [];
  let path = `/xAPI/statements?${query}`;
  for (;;) {
    const res = await t.fetch(path, { user });
    assert.equal(res.status, 200, `${query}: ${await res.clone().text()}`);
    const body = (await res.json()) as { statements: { id: string }[]; more?: string };
    out.push(...body.statements.map((s) => s.id));
    if (!body.more) return out;
    path = body.more;
  }
}

const enc = (v: unknown) => encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v));

describe('SQLite migration 6: a version-5 database upgraded in place [sqlite]', () => {
  const rows = history();
  const dir = mkdtempSync(join(tmpdir(), 'lectern-lean-migration-'));
  const path = join(dir, 'old.sqlite');
  let fulls: string[];
  const logged: string[] = [];
  let migrated: TestLrs;
  let fresh: TestLrs;

  before(async () => {
    fulls = writeVersion5(path, rows);
    const logger = createLogger('info', new Writable({ write: (chunk, _enc, done) => (logged.push(String(chunk)), done()) }));
    migrated = await startTestLrs(undefined, { env: { LECTERN_SQLITE_PATH: path }, logger });
    // The reference: a fresh LRS that received the same statements through the API.
    fresh = await startTestLrs();
    for (const r of rows) {
      // The attachment's data went straight into the old file; the reference LRS gets a fileUrl instead.
      const { attachments, ...rest } = r.statement;
      const body = attachments ? { ...rest, attachments: attachments.map((a) => ({ ...a, fileUrl: 'http://example.com/a.txt' })) } : rest;
      const res = await fresh.fetch('/xAPI/statements', jsonInit('POST', body, { user: r.tenant === 'b' ? TENANT_B : ADMIN }));
      assert.equal(res.status, 200, await res.text());
    }
  });
  after(async () => {
    await migrated?.close();
    await fresh?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('start-up announces the rebuild; seqs and JSON are kept byte for byte; the old tables are gone', () => {
    assert.ok(
      logged.some((l) => l.includes(`rebuilding statements for lean storage: ${rows.length} statements`)),
      logged.join(''),
    );
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      const stored = (db.prepare('SELECT seq, full FROM statements ORDER BY seq').all() as { seq: number; full: string }[]).map((r) => ({ seq: r.seq, full: r.full }));
      assert.deepEqual(
        stored,
        fulls.map((full, i) => ({ seq: i + 1, full })),
      );
      const columns = (table: string) => (db.prepare(`SELECT name FROM pragma_table_info('${table}')`).all() as { name: string }[]).map((c) => c.name);
      // Migration 8 put the link rows into seq buckets.
      assert.deepEqual(columns('statement_agents'), ['tenant', 'bucket', 'agent', 'seq', 'role']);
      assert.deepEqual(columns('statement_activities'), ['tenant', 'bucket', 'activity', 'seq', 'direct']);
      assert.ok(
        logged.some((l) => l.includes(`putting link rows into seq buckets: ${rows.length} statements`)),
        logged.join(''),
      );
      assert.ok(columns('statements').includes('authority') && !columns('statements').includes('authority_key'));
      assert.equal((db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name LIKE '%_lean'").get() as { n: number }).n, 0);
      assert.equal((db.prepare("SELECT count(*) AS n FROM pragma_foreign_key_list('statement_agents')").get() as { n: number }).n, 0);
      assert.deepEqual(
        (db.prepare('SELECT name FROM tenants ORDER BY id').all() as { name: string }[]).map((r) => r.name),
        ['', 'b'],
      );
    } finally {
      db.close();
    }
  });

  test('GET by id, voided and voiding statements', async () => {
    const [s1, s2, , s4] = rows.map((r) => r.statement.id);
    const one = async (q: string, user = ADMIN) => {
      const res = await migrated.fetch(`/xAPI/statements?${q}`, { user });
      return { status: res.status, body: res.status === 200 ? await res.text() : '' };
    };
    assert.deepEqual(await one(`statementId=${s1}`), { status: 200, body: fulls[0] });
    assert.equal((await one(`statementId=${s2}`)).status, 404);
    assert.deepEqual(await one(`voidedStatementId=${s2}`), { status: 200, body: fulls[1] });
    assert.equal((await one(`statementId=${s4}`)).status, 200);
    // Another tenant's statement is not found; its own is.
    assert.equal((await one(`statementId=${rows.at(-1)!.statement.id}`)).status, 404);
    assert.equal((await one(`statementId=${rows.at(-1)!.statement.id}`, TENANT_B)).status, 200);
    // Voiding keeps working on migrated rows.
    const carol = rows[5].statement.id;
    const voidCarol = { id: randomUUID(), actor: BEN, verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: carol } };
    const res = await migrated.fetch('/xAPI/statements', jsonInit('POST', voidCarol));
    assert.equal(res.status, 200);
    assert.equal((await one(`statementId=${carol}`)).status, 404);
    assert.equal((await one(`voidedStatementId=${carol}`)).status, 200);
    // A re-sent statement is still a no-op, a different one under the same id still a conflict.
    assert.equal((await migrated.fetch('/xAPI/statements', jsonInit('POST', rows[0].statement))).status, 200);
    assert.equal((await migrated.fetch('/xAPI/statements', jsonInit('POST', { ...rows[0].statement, verb: verb('other') }))).status, 409);
    const freshRes = await fresh.fetch('/xAPI/statements', jsonInit('POST', voidCarol));
    assert.equal(freshRes.status, 200);
  });

  test('every filter, targeting and more paging answer as on a fresh LRS', async () => {
    const queries = [
      'limit=2',
      'limit=3&ascending=true',
      `agent=${enc(ANN)}`,
      `agent=${enc(BEN)}`,
      `agent=${enc(BEN)}&related_agents=true`,
      `agent=${enc({ mbox: 'mailto:nobody@example.com' })}`,
      `verb=${enc(verb('experienced').id)}&limit=2`,
      `verb=${enc(verb('completed').id)}`,
      `activity=${enc(activity('a1').id)}`,
      `activity=${enc(activity('course').id)}&related_activities=true`,
      `registration=${REGISTRATION}`,
      `agent=${enc(CAROL)}&verb=${enc(verb('experienced').id)}&activity=${enc(activity('a3').id)}&limit=1`,
      `mine=true&verb=${enc(verb('completed').id)}`,
    ];
    for (const q of queries) {
      assert.deepEqual(await ids(migrated, q), await ids(fresh, q), q);
      assert.deepEqual(await ids(migrated, q, TENANT_B), await ids(fresh, q, TENANT_B), `${q} (tenant b)`);
    }
    assert.deepEqual(
      await ids(migrated, `agent=${enc(ANN)}`),
      [rows[3], rows[2], rows[0]].map((r) => r.statement.id),
    );
  });

  test('since and until on migrated stored times', async () => {
    const iso = (ms: number) => new Date(ms).toISOString();
    const got = await ids(migrated, `since=${enc(iso(storedMsOf(2) - 1))}&until=${enc(iso(storedMsOf(5)))}&ascending=true`);
    assert.deepEqual(
      got,
      [2, 3, 4].map((i) => rows[i].statement.id),
    ); // statement 5 was voided above
  });

  test('attachments, activity definitions and the outbox survive', async () => {
    const res = await migrated.fetch(`/xAPI/statements?statementId=${rows[4].statement.id}&attachments=true`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), new RegExp(`\r\n\r\n${ATTACHMENT}\r\n`));
    const def = await (await migrated.fetch(`/xAPI/activities?activityId=${enc(activity('a1').id)}`)).json();
    assert.deepEqual(def.definition, { name: { en: 'A1' } });
    const store = new SqliteStore({ path });
    try {
      const [item, ...rest] = await store.outbox.claim('http://target.example', 'test', 10, 60_000);
      assert.deepEqual(rest, []);
      assert.deepEqual({ tenant: item.tenant, json: item.json }, { tenant: 'b', json: fulls.at(-1) });
    } finally {
      await store.close();
    }
  });

  test('new statements continue after the old seqs; erasure removes migrated link rows and keys', async () => {
    const [id] = await (await migrated.fetch('/xAPI/statements', jsonInit('POST', { actor: CAROL, verb: verb('experienced'), object: activity('a4') }))).json();
    const run = await runCli(migrated, ['erase', '--agent', JSON.stringify(CAROL)]);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(await ids(migrated, `agent=${enc(CAROL)}&related_agents=true`), []);
    assert.deepEqual(
      Object.entries(await danglingRows(migrated)).filter(([, n]) => n > 0),
      [],
    );
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      assert.equal((db.prepare("SELECT count(*) AS n FROM keys WHERE key = 'mbox:mailto:carol@example.com'").get() as { n: number }).n, 0);
      assert.ok(
        (db.prepare('SELECT seq FROM sqlite_sequence WHERE name = ?').get('statements') as { seq: number }).seq > rows.length + 1,
        `a seq after ${rows.length + 1} for ${id}`,
      );
      // No link row of the erased statements is left (erasure deleted them by primary key).
      assert.equal(
        (db.prepare('SELECT count(*) AS n FROM statement_agents a JOIN keys k ON k.id = a.agent WHERE k.key = ?').get('mbox:mailto:carol@example.com') as { n: number }).n,
        0,
      );
    } finally {
      db.close();
    }
    // Everything else still answers as before.
    assert.deepEqual(
      await ids(migrated, `agent=${enc(ANN)}`),
      [rows[3], rows[2], rows[0]].map((r) => r.statement.id),
    );
  });
});
