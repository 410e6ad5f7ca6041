/** The status's ingest rate: a ring of per-minute counts, moved by a manual clock (no sleeping, no time asserted). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { IngestRate } from '../../src/monitoring/ingest.ts';

const MINUTE = 60_000;
const START = Date.UTC(2026, 0, 1, 12, 0, 30);

test('counts per minute, oldest first, the current minute last; old minutes fall out and empty ones count 0', () => {
  const clock = new ManualClock(START);
  const rate = new IngestRate(3, clock);
  rate.add(5);
  rate.add(2);
  clock.advance(MINUTE);
  rate.add(1);
  assert.deepEqual(rate.lastMinutes(), [
    { minute: '2026-01-01T11:59:00.000Z', statements: 0 },
    { minute: '2026-01-01T12:00:00.000Z', statements: 7 },
    { minute: '2026-01-01T12:01:00.000Z', statements: 1 },
  ]);
  // Three minutes on, the slot of 12:01 holds 12:04: its old count is not carried over.
  clock.advance(3 * MINUTE);
  rate.add(4);
  assert.deepEqual(
    rate.lastMinutes().map((m) => m.statements),
    [0, 0, 4],
  );
  rate.add(0);
  clock.advance(10 * MINUTE);
  assert.deepEqual(
    rate.lastMinutes().map((m) => m.statements),
    [0, 0, 0],
  );
});
