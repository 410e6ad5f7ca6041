/**
 * `lectern import` from files: refused lines reported and the rest stored, the POST rules
 * (conflicts, voiding), JSON arrays and gzip, progress lines when not on a terminal, a crash and a
 * Ctrl-C in the middle then a resume that stores nothing twice.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { sqliteBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { allStatements, runCli, startCli } from './helpers.ts';

const many = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify(statement({ id: randomUUID(), actor: { mbox: `mailto:${tag}${i % 50}@example.com` }, object: { id: `http://example.com/${tag}/${i}` } })),
  );

describe('lectern import (files)', () => {
  let lrs: TestLrs;
  before(async () => {
    lrs = await startTestLrs(sqliteBackend);
  });
  after(async () => lrs?.close());

  test('refused lines are reported with line and reason; everything else is stored', async () => {
    const conflictId = randomUUID();
    const voiding = randomUUID();
    const lines = [
      JSON.stringify(statement({ id: conflictId })),
      '{"actor": oops',
      JSON.stringify(statement({ actor: { mbox: 'ben@example.com' } })),
      '',
      '[1, 2]',
      JSON.stringify(statement({ id: conflictId, verb: { id: 'http://example.com/other' } })),
      JSON.stringify(statement({ id: voiding, verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: conflictId } })),
      // Voiding a voiding statement is refused, as POST refuses it.
      JSON.stringify(statement({ verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: voiding } })),
      JSON.stringify(statement({ actor: { mbox: 'mailto:no-id@example.com' } })),
    ];
    const file = join(lrs.dir, 'mixed.ndjson');
    // A BOM first, and a last line with a byte that is not UTF-8 (POST refuses those too).
    const invalid = Buffer.from(JSON.stringify(statement({ actor: { name: 'Zoé', mbox: 'mailto:z@example.com' } })).replace('é', '\u0000'));
    invalid[invalid.indexOf(0)] = 0xe9;
    writeFileSync(file, Buffer.concat([Buffer.from(`\ufeff${lines.join('\n')}\n`), invalid, Buffer.from('\n')]));
    const r = await runCli(lrs, ['import', file, '--batch-size', '3']);
    assert.equal(r.code, 1, 'rejects make the exit code 1');
    assert.match(r.stderr, /imported 9 statements: 3 stored, 0 already stored, 6 rejected \(reasons in .*mixed\.rejects\.ndjson\)/);
    const rejects = readFileSync(join(lrs.dir, 'mixed.rejects.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      rejects.map((x) => [x.line, x.status]),
      [
        [2, 400],
        [3, 400],
        [5, 400],
        [6, 409],
        [8, 400],
        [10, 400],
      ],
    );
    assert.equal(rejects[5].error, 'not valid UTF-8');
    assert.match(rejects[0].error, /malformed JSON/);
    assert.match(rejects[1].error, /^actor\.mbox: must be a "mailto:" IRI/);
    assert.deepEqual(rejects[1].issues[0].loc, ['actor', 'mbox']);
    assert.match(rejects[3].error, /different statement with id/);
    assert.match(rejects[4].error, /itself a voiding statement/);
    // The voided statement is voided; the one without an id got one, and a re-run stores it once.
    assert.equal((await lrs.fetch(`/xAPI/statements?voidedStatementId=${conflictId}`)).status, 200);
    const again = await runCli(lrs, ['import', file]);
    assert.match(again.stderr, /imported 9 statements: 0 stored, 3 already stored, 6 rejected/);
  });

  test('a statement holding a lone surrogate escape is refused as POST refuses it (review of issue 27, item 8)', async () => {
    const good = JSON.stringify(statement({ id: randomUUID() }));
    const lone = JSON.stringify(statement({ id: randomUUID(), actor: { mbox: 'mailto:LONE@example.com' } })).replace('LONE', '\\udc80');
    const file = join(lrs.dir, 'surrogate.ndjson');
    writeFileSync(file, `${good}\n${lone}\n`);
    const r = await runCli(lrs, ['import', file]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /imported 2 statements: 1 stored, 0 already stored, 1 rejected/);
    const [reject] = readFileSync(join(lrs.dir, 'surrogate.rejects.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(reject.line, 2);
    assert.match(reject.error, /^at actor\.mbox: this string holds an unpaired UTF-16 surrogate/);
  });

  test('a gzipped JSON array, with progress lines when stderr is not a terminal', async () => {
    const body = many(600, 'array');
    const file = join(lrs.dir, 'array.json.gz');
    writeFileSync(file, gzipSync(`[\n${body.join(',\n')}\n]`));
    const r = await runCli(lrs, ['import', file, '--batch-size', '100', '--progress-interval', '0']);
    assert.equal(r.code, 0, r.stderr);
    const progress = r.stderr.split('\n').filter((l) => l.startsWith('import: '));
    assert.ok(progress.length >= 6, r.stderr);
    for (const line of progress) assert.match(line, /^import: [\d,]+ statements \(\d+%\), [\d,]+\/s(, ETA \d+:\d\d)?, [\d,]+ new, [\d,]+ already stored, [\d,]+ rejected$/);
    assert.ok(!r.stderr.includes('\r'), 'no terminal control characters');
    assert.match(r.stderr, /imported 600 statements: 600 stored/);
  });

  test('killed mid-import, then run again: every statement stored exactly once', async () => {
    const body = many(2500, 'crash');
    const file = join(lrs.dir, 'crash.ndjson');
    writeFileSync(file, `${body.join('\n')}\n`);
    const run = startCli(lrs, ['import', file, '--batch-size', '100', '--progress-interval', '0'], {
      onStderr: (text, child) => {
        if (/import: [\d,]+ statements/.test(text) && child.exitCode === null) child.kill('SIGKILL');
      },
    });
    const killed = await run.done;
    assert.equal(killed.signal, 'SIGKILL');
    const partial = (await allStatements(lrs, `&activity=${encodeURIComponent('http://example.com/crash/0')}`)).length;
    assert.ok(partial <= 1);
    const r = await runCli(lrs, ['import', file]);
    assert.equal(r.code, 0, r.stderr);
    const m = /imported 2500 statements: (\d+) stored, (\d+) already stored, 0 rejected/.exec(r.stderr);
    assert.ok(m, r.stderr);
    assert.ok(Number(m[2]) > 0, 'the killed run had stored some');
    const ids = new Set(body.map((l) => JSON.parse(l).id as string));
    const stored = (await allStatements(lrs, '', 500)).filter((s) => ids.has(s.id as string));
    assert.equal(stored.length, 2500);
  });

  test('Ctrl-C stops after the batch in hand and says how to resume; the resume completes', async () => {
    const body = many(2500, 'sigint');
    const file = join(lrs.dir, 'sigint.ndjson');
    writeFileSync(file, `${body.join('\n')}\n`);
    const run = startCli(lrs, ['import', file, '--batch-size', '100', '--progress-interval', '0'], {
      onStderr: (text, child) => {
        if (/import: [\d,]+ statements/.test(text) && !child.killed) child.kill('SIGINT');
      },
    });
    const stopped = await run.done;
    assert.equal(stopped.code, 130, stopped.stderr);
    const m = /To resume: lectern import (.*) --skip (\d+) /.exec(stopped.stderr);
    assert.ok(m, stopped.stderr);
    const skip = Number(m[2]);
    assert.ok(skip > 0 && skip < 2500 && skip % 100 === 0, `skip ${skip}`);
    const r = await runCli(lrs, ['import', file, '--skip', String(skip)]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`imported ${2500 - skip} statements: ${2500 - skip} stored, 0 already stored`));
    const ids = new Set(body.map((l) => JSON.parse(l).id as string));
    assert.equal((await allStatements(lrs, '', 500)).filter((s) => ids.has(s.id as string)).length, 2500);
  });
});
