/**
 * A real PostgreSQL for the tests. `LECTERN_TEST_POSTGRES_URL` (a superuser URL) when set — the
 * global setup sets it to one throwaway cluster shared by every test process of `npm test` —
 * else a throwaway cluster of this process, created with initdb/pg_ctl in a temporary folder on a
 * free loopback port and removed when the process exits. Each test LRS gets its own database.
 * `LECTERN_TEST_SKIP_POSTGRES=1` leaves PostgreSQL out; without it, missing binaries fail loudly.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type PgCluster, startCluster } from '../../scripts/postgres-cluster.ts';

export { findPgBin, INSTALL_HINT, type PgCluster, postgresSkipped, startCluster } from '../../scripts/postgres-cluster.ts';

let own: Promise<PgCluster> | undefined;

/** Superuser URL of the server test databases are created on. */
export async function adminUrl(): Promise<string> {
  const given = process.env.LECTERN_TEST_POSTGRES_URL;
  if (given) return given;
  own ??= startCluster();
  return (await own).url;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: await adminUrl() });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A fresh, empty database; returns its URL. */
export async function createDatabase(): Promise<string> {
  const name = `lectern_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(await adminUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  if (!/^lectern_test_\w+$/.test(name)) return;
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}
