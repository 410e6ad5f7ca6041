/**
 * `node --test --test-global-setup`: one throwaway PostgreSQL for the whole run, handed to every
 * test process through LECTERN_TEST_POSTGRES_URL (test processes inherit this environment), so
 * each test file creates databases instead of a cluster. When PostgreSQL cannot be started here
 * nothing is set: the PostgreSQL tests then try on their own and fail with the reason.
 */
import { type PgCluster, postgresSkipped, startCluster } from './postgres.ts';

let cluster: PgCluster | undefined;

export async function globalSetup(): Promise<void> {
  if (postgresSkipped() || process.env.LECTERN_TEST_POSTGRES_URL) return;
  try {
    cluster = await startCluster();
    process.env.LECTERN_TEST_POSTGRES_URL = cluster.url;
  } catch (err) {
    process.stderr.write(`global setup: no shared PostgreSQL (${(err as Error).message})\n`);
  }
}

export async function globalTeardown(): Promise<void> {
  cluster?.destroy();
}
