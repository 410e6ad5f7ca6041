/**
 * The query port the backends share code over: a `Program` is a generator that yields each SQL
 * statement and receives its result, so that documents (./documents.ts), the forwarding outbox
 * (./outbox.ts), credentials, kept rejections, the admin figures and the reach rows are written
 * once (./shared.ts runs them). SQLite runs a program synchronously on its one connection
 * (runSync, in sqlite/runner.ts: no promise per statement, and nothing else runs inside its
 * transaction); PostgreSQL awaits each statement on a pooled client (runAsync).
 */

type Row = Record<string, unknown>;

/**
 * One SQL statement of a program: `rows` answers with every row, `row` with the first (or
 * undefined), `run` with the rows changed. Its placeholders are spelled `$1`, `$2`, … on every
 * backend (`$n` is the n-th of `values`, and may appear more than once); SQLite reads them as its
 * own `?n` (sqlite/query.ts, sqliteSql).
 */
export interface SqlStep {
  text: string;
  values: unknown[];
  /** A name to prepare it under (PostgreSQL: once per connection). */
  name?: string;
  want: 'rows' | 'row' | 'run';
}

/** Statements yielded one at a time, each answered before the next (a transaction is the caller's). */
export type Program<T> = Generator<SqlStep, T, unknown>;

export function* rows(step: Omit<SqlStep, 'want'>): Program<Row[]> {
  return (yield { ...step, want: 'rows' }) as Row[];
}

export function* row(step: Omit<SqlStep, 'want'>): Program<Row | undefined> {
  return (yield { ...step, want: 'row' }) as Row | undefined;
}

export function* run(step: Omit<SqlStep, 'want'>): Program<number> {
  return (yield { ...step, want: 'run' }) as number;
}

/** Runs a program on a synchronous connection (SQLite). */
export function runSync<T>(program: Program<T>, exec: (step: SqlStep) => unknown): T {
  let next = program.next();
  while (!next.done) next = program.next(exec(next.value));
  return next.value;
}

/** Runs a program on an asynchronous connection (PostgreSQL). */
export async function runAsync<T>(program: Program<T>, exec: (step: SqlStep) => Promise<unknown>): Promise<T> {
  let next = program.next();
  while (!next.done) next = program.next(await exec(next.value));
  return next.value;
}

/**
 * How a backend runs programs: `run` alone (a read, or a write of one statement), `transaction`
 * all of it or nothing, opened by `begin` where the backend has a choice (PostgreSQL's isolation
 * level; SQLite always takes the write lock at BEGIN).
 */
export interface ProgramRunner {
  run<T>(program: Program<T>): Promise<T>;
  transaction<T>(program: Program<T>, begin?: string): Promise<T>;
}
