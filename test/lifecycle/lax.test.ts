/**
 * Lax validation through the built CLI, on every backend: a server whose default is lax
 * (LECTERN_XAPI_VALIDATION), `lectern violations` showing what a stored statement broke,
 * `lectern export` then `lectern import` (refused under strict, stored with `--validation lax`),
 * `lectern erase` of a lax statement, and `lectern auth --validation`.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, jsonInit, startTestLrs, type TestLrs } from '../helpers/lrs.ts';
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
  { rule: 'value_error.range', statement: { id: randomUUID(), actor: ann, verb: { id: 'http://example.com/verbs/did' }, object: { id: 'http://example.com/a/2' }, result: { score: { min: 1, max: 1 } } } },
  { rule: 'value_error.enum', statement: { id: randomUUID(), actor: ann, verb: { id: 'http://example.com/verbs/did' }, object: { objectType: 'Lesson', id: 'http://example.com/a/3' } } },
];
const VALID = { id: randomUUID(), actor: ann, verb: { id: 'http://example.com/verbs/did' }, object: { id: 'http://example.com/a/4' } };

// The CLI opens the database itself: SQLite's threads are the server's, not the CLI's.
for (const backend of BACKENDS.filter((b) => b.name !== 'sqlite-threads')) {
  describe(`lax validation through the CLI (${backend.name})`, () => {
    let source: TestLrs;
    let copy: TestLrs;
    before(async () => {
      source = await startTestLrs(backend, { env: { LECTERN_XAPI_VALIDATION: 'lax' } });
      copy = await startTestLrs(backend);
      const res = await source.fetch('/xAPI/statements', jsonInit('POST', [...BROKEN.map((b) => b.statement), VALID]));
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
        assert.deepEqual(out.violations.map((v) => v.type), [b.rule]);
      }
      const valid = await runCli(source, ['violations', VALID.id]);
      assert.equal(valid.code, 0);
      assert.match(valid.stdout, /broke no rule/);
      const missing = await runCli(source, ['violations', randomUUID()]);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /no statement .* is stored/);
    });

    test('export, then import: refused under strict, stored as they were with --validation lax', async () => {
      const file = join(source.dir, 'lax.ndjson');
      const exp = await runCli(source, ['export', '-o', file]);
      assert.equal(exp.code, 0, exp.stderr);
      assert.equal(readFileSync(file, 'utf8').trim().split('\n').length, 4);

      const strict = await runCli(copy, ['import', file, '--rejects', join(copy.dir, 'strict.rejects.ndjson')]);
      assert.equal(strict.code, 1);
      assert.match(strict.stderr, /imported 4 statements: 1 stored, 0 already stored, 3 rejected/);

      const lax = await runCli(copy, ['import', file, '--validation', 'lax']);
      assert.equal(lax.code, 0, lax.stderr);
      assert.match(lax.stderr, /imported 4 statements: 3 stored, 1 already stored, 0 rejected/);
      const before = (await allStatements(source)).map(withoutStored);
      const now = (await allStatements(copy)).map(withoutStored);
      assert.deepEqual(
        now.sort((a, b) => String(a.id).localeCompare(String(b.id))),
        before.sort((a, b) => String(a.id).localeCompare(String(b.id))),
      );
      const v = await runCli(copy, ['violations', BROKEN[1].statement.id, '--json']);
      assert.deepEqual((JSON.parse(v.stdout) as { violations: { type: string }[] }).violations.map((x) => x.type), ['value_error.range']);

      const bad = await runCli(copy, ['import', file, '--validation', 'sloppy']);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /validation must be strict or lax, got "sloppy"/);
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
    const r = await runCli(lrs, ['auth', '-u', 'lms', '-p', 'lms-pass', '-s', 'all', '-M', 'mailto:lms@example.com', '--validation', 'lax', '-w'], { env: { LECTERN_AUTH_FILE: file } });
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
