/**
 * One rule for the times every command takes (issue 48, item 10): `prune --before`, `export
 * --since/--until`, `rejections list --since` and `credentials create --expires` take a bare date
 * as that day's start in UTC and a date-time only with its offset, say so in their help, and
 * refuse anything else with the same words naming the option. The statements are stored on either
 * side of a midnight (an in-process SQLite store's clock), so that the bare date is seen to be
 * that instant.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { GIVEN_TIME, parseGivenTime } from '../../src/xapi/validate.ts';
import { sqliteBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { post, runCli } from './helpers.ts';

const MIDNIGHT = Date.parse('2026-12-01T00:00:00Z');
const HOUR = 3_600_000;

test('parseGivenTime: a bare date is its start in UTC, a date-time needs its offset', () => {
  assert.equal(parseGivenTime('2026-12-01'), MIDNIGHT);
  assert.equal(parseGivenTime('2026-12-01T00:00:00Z'), MIDNIGHT);
  assert.equal(parseGivenTime('2026-12-01T02:00:00+02:00'), MIDNIGHT);
  assert.equal(parseGivenTime('2026-11-30T19:00-05'), MIDNIGHT);
  assert.equal(parseGivenTime('2026-12-01T01:30:00.250+0130'), MIDNIGHT + 250);
  for (const bad of ['2026-12-01T00:00:00', '2026-12-01T00:00', '2026-02-30', '2026-12', '20261201', 'tomorrow', '', '2026-12-01T00:00:00-00:00', ' 2026-12-01']) {
    assert.equal(parseGivenTime(bad), undefined, bad);
  }
});

describe('times on the command line', () => {
  let lrs: TestLrs;
  let late: string;
  before(async () => {
    const clock = new ManualClock(MIDNIGHT - HOUR, 1);
    lrs = await startTestLrs(sqliteBackend, { storeClock: clock });
    await post(lrs, statement());
    clock.advance(2 * HOUR);
    [late] = await post(lrs, statement());
  });
  after(async () => lrs?.close());

  const ids = (stdout: string) =>
    stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { id: string }).id);

  test("a bare date is that day's start in UTC: export --since/--until and prune --before cut at that midnight", async () => {
    const since = await runCli(lrs, ['export', '-o', '-', '--since', '2026-12-01']);
    assert.equal(since.code, 0, since.stderr);
    assert.deepEqual(ids(since.stdout), [late]);
    const until = await runCli(lrs, ['export', '-o', '-', '--until', '2026-12-01']);
    assert.equal(until.code, 0, until.stderr);
    assert.equal(ids(until.stdout).length, 1);
    assert.notEqual(ids(until.stdout)[0], late);
    // The same instant written with an offset.
    const offset = await runCli(lrs, ['export', '-o', '-', '--since', '2026-12-01T01:00:00+01:00']);
    assert.deepEqual(ids(offset.stdout), [late]);

    const prune = await runCli(lrs, ['prune', '--before', '2026-12-01', '--dry-run', '--json']);
    assert.equal(prune.code, 0, prune.stderr);
    const report = JSON.parse(prune.stdout) as { before: string; statements: number };
    assert.equal(report.before, '2026-12-01T00:00:00.000Z');
    assert.equal(report.statements, 1);

    const rejections = await runCli(lrs, ['rejections', 'list', '--since', '2026-12-01', '--json']);
    assert.equal(rejections.code, 0, rejections.stderr);

    const credential = await runCli(lrs, ['credentials', 'create', '-s', 'all', '-M', 'mailto:ops@example.com', '--expires', '2999-06-30', '--json']);
    assert.equal(credential.code, 0, credential.stderr);
    assert.equal((JSON.parse(credential.stdout) as { expires: string }).expires, '2999-06-30T00:00:00.000Z');
  });

  test('anything else, a date-time without its offset included, is refused with the same words naming the option', async () => {
    const cases: [string[], string][] = [
      [['prune', '--before', '2026-12-01T00:00:00', '--dry-run'], '--before'],
      [['export', '-o', '-', '--since', '2026-12-01T00:00:00'], '--since'],
      [['export', '-o', '-', '--until', 'yesterday'], '--until'],
      [['rejections', 'list', '--since', '2026-13-01'], '--since'],
      [['credentials', 'create', '-s', 'all', '-M', 'mailto:ops@example.com', '--expires', '2999-06-30T18:00'], '--expires'],
    ];
    for (const [args, option] of cases) {
      const r = await runCli(lrs, args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      const value = args[args.indexOf(option) + 1];
      assert.equal(r.stderr, `lectern: error: ${option} must be ${GIVEN_TIME}, not ${JSON.stringify(value)}\n`, args.join(' '));
    }
    const missing = await runCli(lrs, ['prune', '--dry-run']);
    assert.equal(missing.code, 2);
    assert.equal(missing.stderr, `lectern: error: --before is required: ${GIVEN_TIME}\n`);
  });

  test("each time option's help gives the rule", async () => {
    for (const [command, option] of [
      [['prune'], '--before'],
      [['export'], '--since'],
      [['export'], '--until'],
      [['rejections', 'list'], '--since'],
      [['credentials', 'create'], '--expires'],
    ] as const) {
      const r = await runCli(lrs, [...command, '--help']);
      assert.equal(r.code, 0, r.stderr);
      // Help lines wrap at the terminal's width.
      const help = r.stdout.replace(/\s+/g, ' ');
      assert.match(help, new RegExp(`${option} <time> [^-]*: ${GIVEN_TIME.replace(/[()+.]/g, '\\$&')}`), `${command.join(' ')} ${option}`);
    }
  });
});
