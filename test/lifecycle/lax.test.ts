/**
 * Lax validation through the built CLI, on every backend: statements stored through a lax
 * credential, `lectern violations` showing what a stored statement broke, `lectern export` then
 * `lectern import` restoring them with no flag (their violations recomputed, a tampered
 * violations file trusted for nothing more), an export without its violations file validated as
 * before, `lectern erase` of a lax statement, and `lectern auth --validation`.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { allStatements, runCli, withoutStored } from './helpers.ts';

const tag = randomUUID();
const ann = { objectType: 'Agent', mbox: `mailto:ann-${tag}@example.com` };
/** Slightly broken statements, each with the rule it breaks. */
const BROKEN = [
  {
    rule: 'value_error.iri',
    statement: {
      id: randomUUID(),
      actor: ann,
      verb: { id: 'http://example.com/verbs/did' },
      object: { id: 'http://example.com/a/1' },
      context: { contextActivities: { parent: [{ id: randomUUID() }] } },
    },
  },
  {
    rule: 'value_error.range',
    statement: { id: randomUUID(), actor: ann, verb: { id: 'http://example.com/verbs/did' }, object: { id: 'http://example.com/a/2' }, result: { score: { min: 1, max: 1 } } },
  },
  {
    rule: 'value_error.enum',
    statement: { id: randomUUID(), actor: ann, verb: { id: 'http://example.com/verbs/did' }, object: { objectType: 'Lesson', id: 'http://example.com/a/3' } },
  },
];
const VALID = { id: randomUUID(), actor: ann, verb: { id: 'http://example.com/verbs/did' }, object: { id: 'http://example.com/a/4' } };
/** A credential of its own validation: the server's default stays strict. */
const LAX: TestUser = { username: 'lms', password: 'lms-pass', scopes: ['all'], agent: { mbox: 'mailto:lms@example.com' }, validation: 'lax' };

type Violations = { type: string; loc: unknown[]; msg: string }[];
async function violationsOf(lrs: TestLrs, id: string, target?: string): Promise<Violations> {
  const r = await runCli(lrs, ['violations', id, '--json', ...(target ? ['-t', target] : [])]);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { violations: Violations }).violations;
}
const byId = (list: Record<string, unknown>[]) => list.map(withoutStored).sort((a, b) => String(a.id).localeCompare(String(b.id)));

// The CLI opens the database itself: SQLite's threads are the server's, not the CLI's.
for (const backend of BACKENDS.filter((b) => b.name !== 'sqlite-threads')) {
  describe(`lax validation through the CLI (${backend.name})`, () => {
    let source: TestLrs;
    let copy: TestLrs;
    before(async () => {
      source = await startTestLrs(backend, { users: [ADMIN, LAX] });
      copy = await startTestLrs(backend);
      const res = await source.fetch('/xAPI/statements', jsonInit('POST', [...BROKEN.map((b) => b.statement), VALID], { user: LAX }));
      assert.equal(res.status, 200, await res.clone().text());
    });
    after(async () => {
      await source?.close();
      await copy?.close();
    });

    test('lectern violations shows what each statement broke', async () => {
      const r = await runCli(source, ['violations', BROKEN[0].statement.id]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /1 violation:\ncontext\.contextActivities\.parent\.0\.id: must be an absolute IRI .* \[value_error\.iri\]\n/);
      for (const b of BROKEN) {
        const json = await runCli(source, ['violations', b.statement.id, '--json']);
        assert.equal(json.code, 0, json.stderr);
        const out = JSON.parse(json.stdout) as { id: string; violations: { type: string; loc: unknown[]; msg: string }[] };
        assert.equal(out.id, b.statement.id);
        assert.deepEqual(
          out.violations.map((v) => v.type),
          [b.rule],
        );
      }
      const valid = await runCli(source, ['violations', VALID.id]);
      assert.equal(valid.code, 0);
      assert.match(valid.stdout, /broke no rule/);
      const missing = await runCli(source, ['violations', randomUUID()]);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /no statement .* is stored/);
    });

    test('a restore of an export takes every statement back with no flag, their violations recomputed as the source recorded them', async () => {
      const file = join(source.dir, 'lax.ndjson');
      const exp = await runCli(source, ['export', '-o', file]);
      assert.equal(exp.code, 0, exp.stderr);
      assert.match(exp.stderr, /exported 4 statements to .*lax\.ndjson, 3 of them stored under lax validation: their violations in .*lax\.violations\.ndjson/);
      assert.equal(readFileSync(file, 'utf8').trim().split('\n').length, 4);
      const marks = readFileSync(join(source.dir, 'lax.violations.ndjson'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: string; violations: Violations });
      assert.deepEqual(marks.map((m) => m.id).sort(), BROKEN.map((b) => b.statement.id).sort());

      // The copy's default is strict and the import gives no --validation.
      const restore = await runCli(copy, ['import', file]);
      assert.equal(restore.code, 0, restore.stderr);
      assert.match(restore.stderr, /imported 4 statements: 4 stored, 0 already stored, 0 rejected; 3 of them stored under lax validation at the source, their violations kept/);
      assert.deepEqual(byId(await allStatements(copy)), byId(await allStatements(source)));
      for (const b of BROKEN) assert.deepEqual(await violationsOf(copy, b.statement.id), await violationsOf(source, b.statement.id));
      assert.deepEqual(await violationsOf(copy, VALID.id), []);

      // Whatever --validation says: again under strict, everything is already there.
      const again = await runCli(copy, ['import', file, '--validation', 'strict']);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stderr, /imported 4 statements: 0 stored, 4 already stored, 0 rejected; 3 of them stored under lax validation at the source/);
    });

    test("a tampered violations file: violations recomputed, never the file's; a statement it does not name is validated as before", async () => {
      const file = join(source.dir, 'tampered.ndjson');
      assert.equal((await runCli(source, ['export', '-o', file])).code, 0);
      const marksFile = join(source.dir, 'tampered.violations.ndjson');
      const marks = readFileSync(marksFile, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: string; violations: Violations });
      const fake = [{ type: 'made_up', loc: ['nowhere'], msg: 'not what it broke' }];
      const edited = marks
        .filter((m) => m.id !== BROKEN[2].statement.id)
        .map((m) => (m.id === BROKEN[1].statement.id ? { ...m, violations: fake } : m))
        // A statement the source held as valid, marked: stored as lax stores it (no violation to record).
        .concat([{ id: VALID.id, violations: fake }]);
      writeFileSync(marksFile, edited.map((m) => `${JSON.stringify(m)}\n`).join(''));
      const r = await runCli(copy, ['import', file, '-t', 'tampered', '--rejects', join(copy.dir, 'tampered.rejects.ndjson')]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /imported 4 statements: 3 stored, 0 already stored, 1 rejected; 3 of them stored under lax validation at the source/);
      assert.deepEqual(
        (await violationsOf(copy, BROKEN[1].statement.id, 'tampered')).map((v) => v.type),
        ['value_error.range'],
      );
      assert.deepEqual(await violationsOf(copy, VALID.id, 'tampered'), []);
      const rejected = readFileSync(join(copy.dir, 'tampered.rejects.ndjson'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: string });
      assert.deepEqual(
        rejected.map((x) => x.id),
        [BROKEN[2].statement.id],
      );

      // A line that names no statement stops the import before it stores anything.
      writeFileSync(marksFile, `${JSON.stringify({ id: VALID.id, violations: [] })}\n{"violations": []}\n`);
      const bad = await runCli(copy, ['import', file, '-t', 'refused']);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /tampered\.violations\.ndjson, line 2: each line needs the "id" of a statement \(a UUID\)/);
    });

    test("an export without its violations file (an older Lectern's, a foreign file): refused under strict, stored with --validation lax", async () => {
      const file = join(source.dir, 'old.ndjson');
      assert.equal((await runCli(source, ['export', '-o', file])).code, 0);
      rmSync(join(source.dir, 'old.violations.ndjson'));
      const strict = await runCli(copy, ['import', file, '-t', 'old', '--rejects', join(copy.dir, 'strict.rejects.ndjson')]);
      assert.equal(strict.code, 1);
      assert.match(strict.stderr, /imported 4 statements: 1 stored, 0 already stored, 3 rejected \(/);

      const lax = await runCli(copy, ['import', file, '-t', 'old', '--validation', 'lax']);
      assert.equal(lax.code, 0, lax.stderr);
      assert.match(lax.stderr, /imported 4 statements: 3 stored, 1 already stored, 0 rejected\n/);
      assert.deepEqual(
        (await violationsOf(copy, BROKEN[1].statement.id, 'old')).map((x) => x.type),
        ['value_error.range'],
      );

      const bad = await runCli(copy, ['import', file, '--validation', 'sloppy']);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /validation must be strict or lax, got "sloppy"/);
    });

    test('an export with no lax statement writes no violations file, and removes a stale one', async () => {
      const file = join(source.dir, 'strict-only.ndjson');
      const marksFile = join(source.dir, 'strict-only.violations.ndjson');
      writeFileSync(marksFile, `${JSON.stringify({ id: VALID.id, violations: [] })}\n`);
      const r = await runCli(source, ['export', '-o', file, '--verb', 'http://example.com/verbs/none']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(existsSync(marksFile), false);
    });

    test('lectern erase removes a lax statement and what it broke', async () => {
      const r = await runCli(source, ['erase', '--agent', JSON.stringify(ann)]);
      assert.equal(r.code, 0, r.stderr);
      for (const b of BROKEN) assert.equal((await source.fetch(`/xAPI/statements?statementId=${b.statement.id}`)).status, 404);
      const v = await runCli(source, ['violations', BROKEN[0].statement.id]);
      assert.equal(v.code, 2);
    });
  });
}

describe('lectern auth --validation', () => {
  let lrs: TestLrs;
  before(async () => {
    lrs = await startTestLrs(BACKENDS[0]);
  });
  after(async () => lrs?.close());

  test('writes the choice into the entry; the server applies it to that user', async () => {
    const file = join(lrs.dir, 'auth.json');
    const r = await runCli(lrs, ['auth', '-u', 'lms', '-p', 'lms-pass', '-s', 'all', '-M', 'mailto:lms@example.com', '--validation', 'lax', '-w'], {
      env: { LECTERN_AUTH_FILE: file },
    });
    assert.equal(r.code, 0, r.stderr);
    const entry = (JSON.parse(readFileSync(file, 'utf8')) as { username: string; validation?: string }[]).find((e) => e.username === 'lms');
    assert.equal(entry?.validation, 'lax');
    // The server re-reads the file when it changes.
    const broken = { ...VALID, id: randomUUID(), result: { score: { min: 1, max: 1 } } };
    const post = () => lrs.fetch('/xAPI/statements', jsonInit('POST', broken, { user: { username: 'lms', password: 'lms-pass', scopes: [], agent: {} } }));
    let res = await post();
    for (let i = 0; i < 50 && res.status === 401; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      res = await post();
    }
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal((await lrs.fetch('/xAPI/statements', jsonInit('POST', { ...broken, id: randomUUID() }))).status, 400, 'the other users keep the default');
  });

  test('a value other than strict or lax is refused', async () => {
    const r = await runCli(lrs, ['auth', '-u', 'x', '-p', 'p', '-s', 'all', '-M', 'mailto:x@example.com', '--validation', 'loose']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /validation must be strict or lax/);
  });

  test('an auth.json entry with another validation stops the server with a message naming it', async () => {
    const file = join(lrs.dir, 'bad-auth.json');
    const entries = JSON.parse(readFileSync(join(lrs.dir, 'auth.json'), 'utf8')) as Record<string, unknown>[];
    writeFileSync(file, JSON.stringify([{ ...entries[0], validation: 'loose' }]));
    const r = await runCli(lrs, ['runserver'], { env: { LECTERN_AUTH_FILE: file, LECTERN_RUNSERVER_PORT: '0' } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /entry 0 \(admin\) has a validation that is neither "strict" nor "lax"/);
  });
});
