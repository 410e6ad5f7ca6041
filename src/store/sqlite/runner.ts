/**
 * SQLite's program runner: a shared program (../program.ts) run synchronously on the store's one
 * connection, one cached prepared statement after the other, with no promise per statement and
 * nothing else running inside its transaction.
 */
import type { SQLInputValue, StatementSync } from 'node:sqlite';
import { type Program, runSync, type SqlStep } from '../program.ts';

/** What the store's connection lends its dialect and outbox: its cached prepared statements, its transaction helper, its clock and its keys. */
export interface SqliteHandle {
  q(sql: string): StatementSync;
  tx<T>(fn: () => T): T;
  /** The store's clock (epoch ms). */
  now(): number;
  /** In a write transaction: a tenant's key ids, created when new (the writer's cache and its own inserts). */
  keyIds(tenant: number, keys: string[]): Map<string, number>;
}

/** Runs a program on the store's connection (a transaction is the caller's). */
export function runProgram<T>(h: SqliteHandle, program: Program<T>): T {
  return runSync(program, (step: SqlStep) => {
    const st = h.q(step.text);
    const values = step.values as SQLInputValue[];
    if (step.want === 'rows') return st.all(...values);
    if (step.want === 'row') return st.get(...values);
    return Number(st.run(...values).changes);
  });
}
