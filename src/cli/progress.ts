/**
 * Progress of long CLI work on stderr (stdout may carry the data): a redrawn bar with rate and ETA
 * on a terminal, a plain line every `intervalMs` otherwise (logs, CI, `kubectl logs`). Also the
 * Ctrl-C handling those commands share: the first SIGINT asks the work to stop after the batch in
 * hand, a second one exits at once.
 */
import type { Clock } from '../clock.ts';
import type { OnProgress, ProgressEvent } from '../ops/progress.ts';

export interface ProgressOptions {
  /** What is being done, e.g. "import". */
  label: string;
  /** Unit of `done`/`total`, e.g. "statements". */
  unit: string;
  /** Amount of work in `units` of the ETA measure, when known. */
  total?: number;
  stream?: NodeJS.WriteStream;
  /** Non-terminal output: one line this often. */
  intervalMs?: number;
  /** Only intervals are measured: by default the monotonic clock, which no clock adjustment moves. */
  clock?: Clock;
}

const monotonic: Clock = { now: () => performance.now() };

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (x: number) => String(x).padStart(2, '0');
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

export class Progress {
  private readonly opts: ProgressOptions;
  private readonly stream: NodeJS.WriteStream;
  private readonly tty: boolean;
  private readonly clock: Clock;
  private readonly started: number;
  private last = 0;
  private done = 0;
  /** Position in the ETA measure (bytes read, for an import), when it is not `done`. */
  private measure: number | undefined;
  private extra = '';

  constructor(opts: ProgressOptions) {
    this.opts = opts;
    this.stream = opts.stream ?? process.stderr;
    this.tty = this.stream.isTTY === true;
    this.clock = opts.clock ?? monotonic;
    this.started = this.clock.now();
    // A terminal gets its first frame at once (performance.now() may still be under 100 ms in a new process).
    this.last = this.tty ? -Infinity : this.started;
  }

  /** Records progress: `done` units so far; `measure` when the total is counted in another measure. */
  update(done: number, opts: { measure?: number; extra?: string } = {}): void {
    this.done = done;
    this.measure = opts.measure;
    if (opts.extra !== undefined) this.extra = opts.extra;
    const now = this.clock.now();
    if (now - this.last < (this.tty ? 100 : (this.opts.intervalMs ?? 10_000))) return;
    this.last = now;
    this.draw();
  }

  private line(): { text: string; fraction?: number } {
    const secs = (this.clock.now() - this.started) / 1000;
    const rate = secs > 0 ? this.done / secs : 0;
    const { total } = this.opts;
    const at = this.measure ?? this.done;
    let text = `${this.opts.label}: ${fmt(this.done)} ${this.opts.unit}`;
    let fraction: number | undefined;
    if (total !== undefined && total > 0) {
      fraction = Math.min(1, at / total);
      if (this.measure === undefined) text += ` of ${fmt(total)}`;
      text += ` (${Math.floor(fraction * 100)}%)`;
    }
    text += `, ${fmt(rate)}/s`;
    if (fraction !== undefined && fraction > 0 && fraction < 1) text += `, ETA ${duration((secs / fraction) * (1 - fraction))}`;
    if (this.extra) text += `, ${this.extra}`;
    return { text, fraction };
  }

  private draw(): void {
    const { text, fraction } = this.line();
    if (!this.tty) {
      this.stream.write(`${text}\n`);
      return;
    }
    const width = 24;
    const bar = fraction === undefined ? '' : `[${'#'.repeat(Math.round(fraction * width)).padEnd(width, '-')}] `;
    this.stream.write(`\r\x1b[2K${bar}${text}`);
  }

  /** Draws the final state and ends the line. */
  finish(): void {
    const { text } = this.line();
    this.stream.write(this.tty ? `\r\x1b[2K${text}\n` : `${text}\n`);
  }

  /** Writes a message without tearing the bar. */
  say(message: string): void {
    say(message, this.stream);
  }
}

/** Writes a message on its own line, clearing a bar a terminal may show. */
export function say(message: string, stream: NodeJS.WriteStream = process.stderr): void {
  stream.write(stream.isTTY === true ? `\r\x1b[2K${message}\n` : `${message}\n`);
}

/**
 * A use case's progress events (src/ops/progress.ts) drawn as bars: one Progress per phase,
 * created when the phase starts (its rate counts from then; a total given here, in another
 * measure, wins over the event's) and finished when it ends. `figures` turns an advance's own
 * figures into the bar's measure and extra text.
 */
export function progressBars<Phase extends string, Figures extends object = object>(
  phases: Record<Phase, { label: string; unit: string; total?: number }>,
  intervalMs: number,
  figures?: (event: Extract<ProgressEvent<Phase, Figures>, { type: 'advance' }>) => { measure?: number; extra?: string },
): OnProgress<Phase, Figures> {
  const bars = new Map<Phase, Progress>();
  return (event) => {
    if (event.type === 'start') {
      bars.set(event.phase, new Progress({ ...phases[event.phase], total: phases[event.phase].total ?? event.total, intervalMs }));
    } else if (event.type === 'advance') {
      bars.get(event.phase)?.update(event.done, figures?.(event as Extract<ProgressEvent<Phase, Figures>, { type: 'advance' }>));
    } else {
      bars.get(event.phase)?.finish();
    }
  };
}

/**
 * Ctrl-C for batch work: the first SIGINT (or SIGTERM) aborts the returned signal, so the loop
 * stops after the batch in hand and reports how to resume; a second one exits at once.
 */
export function interruptible(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = () => {
    if (controller.signal.aborted) process.exit(130);
    process.stderr.write('\nstopping after the current batch (Ctrl-C again to quit at once)\n');
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/**
 * The command line that was run, for "to resume, run ..." messages: without the options in `drop`
 * (true: the option takes a value), secrets replaced by placeholders, `add` appended.
 */
export function rerun(drop: Record<string, boolean>, add: string[]): string {
  const secret = new Set(['--password', '-p', '--token']);
  const args = process.argv.slice(2);
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const [name] = a.split('=', 1);
    if (name in drop) {
      if (drop[name] && !a.includes('=')) i++;
      continue;
    }
    if (secret.has(name)) {
      out.push(name, `<${name.replace(/^-+/, '') === 'p' ? 'password' : name.replace(/^-+/, '')}>`);
      if (!a.includes('=')) i++;
      continue;
    }
    out.push(/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`);
  }
  return ['lectern', ...out, ...add].join(' ');
}
