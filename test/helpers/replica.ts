/**
 * A throwaway primary and streaming hot standby (scripts/postgres-cluster.ts, startStandby) on
 * loopback, for the read replica tests and the `postgres-replica` contract backend. Each test
 * process that asks starts its own pair (≈ 3 s), removed when the process exits.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PRIMARY_SETTINGS, type PgCluster, startCluster, startStandby } from '../../scripts/postgres-cluster.ts';

export interface ReplicaPair {
  primary: PgCluster;
  standby: PgCluster;
}

/**
 * `sync`: the standby is synchronous with remote_apply, so every commit is acknowledged once the
 * standby shows it (read-your-writes through the standby, as the contract suite needs); a
 * stopped or paused standby then holds every write back, so the failure tests use an
 * asynchronous pair.
 */
export async function startReplicaPair(opts: { sync?: boolean } = {}): Promise<ReplicaPair> {
  const primary = await startCluster({
    settings: [...PRIMARY_SETTINGS, ...(opts.sync ? ["synchronous_standby_names = '*'", 'synchronous_commit = remote_apply'] : [])],
  });
  const standby = await startStandby(primary, ["synchronous_standby_names = ''"]);
  return { primary, standby };
}

/** A URL of `cluster`'s database `name`, with an (ignored: trust) password that must never show. */
export function urlOf(cluster: PgCluster, name: string, password?: string): string {
  const u = new URL(cluster.url);
  u.pathname = `/${name}`;
  if (password) u.password = password;
  return u.toString();
}

/** Runs `sql` on a database of `cluster` on a connection of its own. */
export async function sqlOn<R extends pg.QueryResultRow = pg.QueryResultRow>(cluster: PgCluster, db: string, sql: string, values: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: urlOf(cluster, db), connectionTimeoutMillis: 10_000 });
  await c.connect();
  try {
    return (await c.query<R>(sql, values)).rows;
  } finally {
    await c.end();
  }
}

/** A fresh database on the primary, once the standby shows it too. */
export async function createReplicatedDatabase(pair: ReplicaPair): Promise<string> {
  const name = `lectern_replica_${process.pid}_${randomBytes(4).toString('hex')}`;
  await sqlOn(pair.primary, 'postgres', `CREATE DATABASE ${name}`);
  await until(async () => (await sqlOn(pair.standby, 'postgres', 'SELECT 1 FROM pg_database WHERE datname = $1', [name])).length === 1, 'the standby shows the new database');
  return name;
}

/** Polls `cond` until it holds (every 100 ms, for at most `capMs`): never a fixed wait. */
export async function until(cond: () => Promise<boolean> | boolean, what: string, capMs = 120_000): Promise<void> {
  const end = Date.now() + capMs;
  for (;;) {
    try {
      if (await cond()) return;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Pauses WAL replay on the standby and waits until it has stopped (pg_get_wal_replay_pause_state). */
export async function pauseReplay(standby: PgCluster): Promise<void> {
  await sqlOn(standby, 'postgres', 'SELECT pg_wal_replay_pause()');
  await until(async () => (await sqlOn<{ s: string }>(standby, 'postgres', 'SELECT pg_get_wal_replay_pause_state() AS s'))[0].s === 'paused', 'replay paused');
}

export async function resumeReplay(standby: PgCluster): Promise<void> {
  await sqlOn(standby, 'postgres', 'SELECT pg_wal_replay_resume()');
}
