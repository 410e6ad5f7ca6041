/**
 * This process's ingest rate over the last minutes: statements newly stored per clock minute, in
 * a ring of per-minute counts (a few dozen numbers, one add per stored request: nothing per
 * statement). Each process counts its own; the admin API's status reports the one it runs in.
 */
import { type Clock, systemClock } from '../clock.ts';

const MINUTE_MS = 60_000;

export interface MinuteCount {
  /** The minute's start, ISO 8601. */
  minute: string;
  statements: number;
}

export class IngestRate {
  private readonly clock: Clock;
  /** Per slot, the minute (epoch minutes) its count belongs to. */
  private readonly minutes: number[];
  private readonly counts: number[];

  /** `size`: the minutes kept, the current one included. */
  constructor(size = 15, clock: Clock = systemClock) {
    this.clock = clock;
    this.minutes = new Array<number>(size).fill(-1);
    this.counts = new Array<number>(size).fill(0);
  }

  /** Counts `n` statements stored now. */
  add(n: number): void {
    if (n <= 0) return;
    const m = Math.floor(this.clock.now() / MINUTE_MS);
    const i = m % this.minutes.length;
    if (this.minutes[i] !== m) {
      this.minutes[i] = m;
      this.counts[i] = 0;
    }
    this.counts[i] += n;
  }

  /** The kept minutes, oldest first, the current (partial) one last; minutes without statements count 0. */
  lastMinutes(): MinuteCount[] {
    const now = Math.floor(this.clock.now() / MINUTE_MS);
    const size = this.minutes.length;
    const out: MinuteCount[] = [];
    for (let m = now - size + 1; m <= now; m++) {
      const i = m % size;
      out.push({ minute: new Date(m * MINUTE_MS).toISOString(), statements: this.minutes[i] === m ? this.counts[i] : 0 });
    }
    return out;
  }
}
