/** Shared by the lifecycle tests: the built CLI run as a user would, and a store seeded through HTTP. */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { jsonInit, statement, type TestLrs } from '../helpers/lrs.ts';

export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Starts `lectern ARGS` on the LRS's settings (its database); `onStderr` sees output as it comes. */
export function startCli(lrs: TestLrs, args: string[], opts: { cwd?: string; env?: Record<string, string>; onStderr?: (text: string, child: ChildProcess) => void } = {}) {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: opts.cwd ?? lrs.dir,
    env: { PATH: process.env.PATH ?? '', ...lrs.env, LECTERN_LOG_LEVEL: 'warn', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
    opts.onStderr?.(stderr, child);
  });
  const done = new Promise<CliRun>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, done };
}

export const runCli = (lrs: TestLrs, args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<CliRun> => startCli(lrs, args, opts).done;

export const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

/** Every statement the LRS serves (not voided), oldest first, following `more` links with pages of `limit`. */
export async function allStatements(lrs: TestLrs, query = '', limit = 50): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  let path = `/xAPI/statements?ascending=true&limit=${limit}${query}`;
  for (;;) {
    const res = await lrs.fetch(path);
    assert.equal(res.status, 200, await res.clone().text());
    const body = (await res.json()) as { statements: Record<string, unknown>[]; more: string };
    out.push(...body.statements);
    if (!body.more) return out;
    path = body.more;
  }
}

/** The statement without what the importing LRS sets anew. */
export const withoutStored = (s: Record<string, unknown>): Record<string, unknown> => {
  const { stored: _, ...rest } = s;
  return rest;
};

/** A multipart/mixed POST of statements with the given attachment data. */
export function multipartPost(statements: unknown, datas: { data: Buffer | string; contentType: string }[]): RequestInit {
  const b = `lectern-${randomUUID()}`;
  const chunks: Buffer[] = [Buffer.from(`--${b}\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(statements)}\r\n`)];
  for (const d of datas) {
    chunks.push(
      Buffer.from(`--${b}\r\nContent-Type: ${d.contentType}\r\nContent-Transfer-Encoding: binary\r\nX-Experience-API-Hash: ${sha256(d.data)}\r\n\r\n`),
      Buffer.from(d.data),
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${b}--`));
  return { method: 'POST', headers: { 'content-type': `multipart/mixed; boundary=${b}` }, body: new Uint8Array(Buffer.concat(chunks)) };
}

export function attachmentOf(data: Buffer | string, contentType: string): Record<string, unknown> {
  return { usageType: 'http://example.com/usage/cert', display: { en: 'certificate' }, contentType, length: Buffer.byteLength(data), sha2: sha256(data) };
}

export const BEN = { objectType: 'Agent', name: 'Ben', mbox: 'mailto:ben@example.com' };
export const ANN = { objectType: 'Agent', name: 'Ann', mbox: 'mailto:ann@example.com' };

export async function post(lrs: TestLrs, body: unknown): Promise<string[]> {
  const res = await lrs.fetch('/xAPI/statements', jsonInit('POST', body));
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as string[];
}

export async function putDocument(lrs: TestLrs, path: string, content: Buffer | string, contentType: string): Promise<void> {
  // Profiles want a precondition to create (If-None-Match: *); State takes one too.
  const res = await lrs.fetch(path, { method: 'PUT', headers: { 'content-type': contentType, 'if-none-match': '*' }, body: new Uint8Array(Buffer.from(content)) });
  assert.equal(res.status, 204, await res.clone().text());
}

/**
 * A varied store: plain statements of two people, a statement with an attachment, a voided one and
 * its voiding statement, a SubStatement, a Group, a StatementRef; State, Activity Profile and Agent
 * Profile documents, JSON and binary. Returns what the tests look for.
 */
export async function seed(lrs: TestLrs): Promise<{ cert: string; voidedId: string; photo: Buffer }> {
  const cert = 'certificate of Ben, PDF bytes \u0000\u00ff';
  const photo = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3, 255]);
  const ids = await post(lrs, [
    statement({ actor: BEN, result: { score: { scaled: 0.5 }, success: true } }),
    statement({ actor: ANN, context: { instructor: BEN, registration: randomUUID(), contextActivities: { parent: { id: 'http://example.com/course' } } } }),
    statement({ actor: ANN, object: { objectType: 'SubStatement', actor: BEN, verb: { id: 'http://example.com/verbs/helped' }, object: { id: 'http://example.com/a' } } }),
    statement({ actor: { objectType: 'Group', name: 'team', member: [ANN, BEN] }, timestamp: '2024-01-02T03:04:05.678+02:00' }),
    statement({ actor: ANN, verb: { id: 'http://adlnet.gov/expapi/verbs/attempted' } }),
  ]);
  const res = await lrs.fetch(
    '/xAPI/statements',
    multipartPost([statement({ actor: BEN, attachments: [attachmentOf(cert, 'application/pdf')] })], [{ data: cert, contentType: 'application/pdf' }]),
  );
  assert.equal(res.status, 200, await res.clone().text());
  await post(lrs, statement({ actor: ANN, object: { objectType: 'StatementRef', id: ids[4] } }));
  await post(lrs, statement({ actor: ANN, verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: ids[4] } }));
  const act = encodeURIComponent('http://example.com/activities/explosives-training');
  const ben = encodeURIComponent(JSON.stringify(BEN));
  const ann = encodeURIComponent(JSON.stringify(ANN));
  await putDocument(lrs, `/xAPI/activities/state?activityId=${act}&agent=${ben}&stateId=bookmark`, '{"page":3}', 'application/json');
  await putDocument(lrs, `/xAPI/activities/state?activityId=${act}&agent=${ben}&stateId=photo&registration=${randomUUID()}`, photo, 'image/png');
  await putDocument(lrs, `/xAPI/activities/state?activityId=${act}&agent=${ann}&stateId=bookmark`, '{"page":9}', 'application/json');
  await putDocument(lrs, `/xAPI/agents/profile?agent=${ben}&profileId=prefs`, '{"lang":"fr"}', 'application/json');
  await putDocument(lrs, `/xAPI/agents/profile?agent=${ann}&profileId=prefs`, '{"lang":"de"}', 'application/json');
  await putDocument(lrs, `/xAPI/activities/profile?activityId=${act}&profileId=syllabus`, 'plain text', 'text/plain');
  return { cert, voidedId: ids[4], photo };
}

/**
 * Rows that would betray an inconsistent store: link and index rows whose statement is gone,
 * attachments no statement links. Read straight from the database.
 */
export async function danglingRows(lrs: TestLrs): Promise<Record<string, number>> {
  const checks = {
    agents: 'SELECT count(*) AS n FROM statement_agents a WHERE NOT EXISTS (SELECT 1 FROM statements s WHERE s.seq = a.seq)',
    activities: 'SELECT count(*) AS n FROM statement_activities a WHERE NOT EXISTS (SELECT 1 FROM statements s WHERE s.seq = a.seq)',
    links: 'SELECT count(*) AS n FROM statement_attachments a WHERE NOT EXISTS (SELECT 1 FROM statements s WHERE s.seq = a.seq)',
    // Data no statement carried (a statement that only declares the hash keeps nothing).
    attachments:
      'SELECT count(*) AS n FROM attachments a WHERE NOT EXISTS (SELECT 1 FROM statement_attachments l JOIN statements s ON s.seq = l.seq JOIN tenants t ON t.id = s.tenant WHERE l.sha2 = a.sha2 AND l.carrier IS NOT NULL AND t.name = a.tenant)',
    // A carrying link names its statement's authority (0 for none), also after pseudonymization.
    carriers: 'SELECT count(*) AS n FROM statement_attachments l JOIN statements s ON s.seq = l.seq WHERE l.carrier IS NOT NULL AND l.carrier <> coalesce(s.authority, 0)',
  };
  const out: Record<string, number> = {};
  if (lrs.config.backend === 'sqlite') {
    const db = new DatabaseSync(lrs.config.sqlitePath, { readOnly: true });
    // SQLite's statement ids live in tables of their own (both levels: the statement_seqs view).
    const ids = 'SELECT count(*) AS n FROM statement_seqs i WHERE NOT EXISTS (SELECT 1 FROM statements s WHERE s.seq = i.seq)';
    for (const [k, sql] of Object.entries({ ...checks, ids })) out[k] = Number((db.prepare(sql).get() as { n: number }).n);
    db.close();
  } else {
    const c = new pg.Client({ connectionString: lrs.config.postgresUrl });
    await c.connect();
    for (const [k, sql] of Object.entries(checks)) out[k] = Number((await c.query<{ n: string }>(sql)).rows[0].n);
    await c.end();
  }
  return out;
}

/** Counts of rows of a table (straight from the database). */
export function countRows(lrs: TestLrs, table: 'attachments' | 'documents' | 'statements'): Promise<number> {
  return countSql(lrs, `SELECT count(*) AS n FROM ${table}`);
}

/** The `n` a counting query answers, read straight from the test server's database. */
export async function countSql(lrs: TestLrs, sql: string): Promise<number> {
  if (lrs.config.backend === 'sqlite') {
    const db = new DatabaseSync(lrs.config.sqlitePath, { readOnly: true });
    const n = Number((db.prepare(sql).get() as { n: number }).n);
    db.close();
    return n;
  }
  const c = new pg.Client({ connectionString: lrs.config.postgresUrl });
  await c.connect();
  const n = Number((await c.query<{ n: string }>(sql)).rows[0].n);
  await c.end();
  return n;
}

/** Runs SQL statements straight on the test server's database, one after another (a rewound schema, a trigger). */
export async function runSql(lrs: TestLrs, statements: string[]): Promise<void> {
  if (lrs.config.backend === 'sqlite') {
    const db = new DatabaseSync(lrs.config.sqlitePath);
    try {
      for (const s of statements) db.exec(s);
    } finally {
      db.close();
    }
    return;
  }
  const c = new pg.Client({ connectionString: lrs.config.postgresUrl });
  await c.connect();
  try {
    for (const s of statements) await c.query(s);
  } finally {
    await c.end();
  }
}
