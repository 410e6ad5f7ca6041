/**
 * The time the stores and the forwarder read. Injected so that tests can give distinct `stored`
 * instants or move time forward without sleeping; production uses the system clock.
 */
export interface Clock {
  /** Milliseconds since the epoch, as `Date.now()`. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that a test moves by hand; each read may also advance it by `stepMs`. */
export class ManualClock implements Clock {
  private ms: number;
  private readonly stepMs: number;
  constructor(startMs: number, stepMs = 0) {
    this.ms = startMs;
    this.stepMs = stepMs;
  }
  now(): number {
    const at = this.ms;
    this.ms += this.stepMs;
    return at;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}
