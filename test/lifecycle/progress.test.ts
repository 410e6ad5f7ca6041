/** Progress output: a redrawn bar with rate and ETA on a terminal, plain periodic lines otherwise. */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { Progress } from '../../src/cli/progress.ts';
import { ManualClock } from '../../src/clock.ts';

function sink(tty: boolean): { stream: NodeJS.WriteStream; text(): string } {
  const s = new PassThrough();
  let out = '';
  s.on('data', (d: Buffer) => (out += d.toString()));
  return { stream: Object.assign(s, { isTTY: tty }) as unknown as NodeJS.WriteStream, text: () => out };
}

test('on a terminal: one redrawn line with a bar, percentage, rate and ETA', () => {
  const out = sink(true);
  const clock = new ManualClock(0);
  const p = new Progress({ label: 'export', unit: 'statements', total: 1000, stream: out.stream, clock });
  p.update(100);
  clock.advance(120);
  p.update(250);
  p.finish();
  const frames = out.text().split('\r\x1b[2K').filter(Boolean);
  assert.match(frames[0], /^\[##----------------------\] export: 100 statements of 1,000 \(10%\), [\d,]+\/s, ETA \d+:\d\d$/);
  assert.match(frames[1], /^\[######------------------\] export: 250 statements of 1,000 \(25%\)/);
  assert.match(frames.at(-1)!, /export: 250 statements of 1,000 \(25%\), [\d,]+\/s, ETA \d+:\d\d\n$/);
});

test('not on a terminal: a plain line per interval, nothing in between', () => {
  const out = sink(false);
  const clock = new ManualClock(0);
  const p = new Progress({ label: 'import', unit: 'statements', stream: out.stream, intervalMs: 50, clock });
  p.update(1);
  clock.advance(49);
  p.update(2);
  clock.advance(11);
  p.update(3, { extra: '3 new' });
  p.finish();
  assert.deepEqual(
    out
      .text()
      .trim()
      .split('\n')
      .map((l) => l.replace(/, [\d,]+\/s/, '')),
    ['import: 3 statements, 3 new', 'import: 3 statements, 3 new'],
  );
});
