/**
 * A PostgreSQL server that stops answering without closing the connection (a host gone, a network
 * partition), simulated by a TCP proxy that stops forwarding: a request on a pooled connection
 * gets 503 once the connection has been silent longer than the statement timeout plus the connect
 * timeout, the server serves again once PostgreSQL answers, and a connection merely idle in the
 * pool for that long is kept. The same over TLS (a cluster of its own with a self-signed
 * certificate made by openssl), where the watched socket is the one pg wraps in TLS.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { postgresAt, startTestLrs, type TestLrs } from '../helpers/lrs.ts';
import { createDatabase, dropDatabase, findPgBin, type PgCluster, postgresSkipped, startCluster } from '../helpers/postgres.ts';

/** Forwards TCP to PostgreSQL; frozen, it reads nothing from either side (the bytes wait in the kernel). */
class TcpProxy {
  readonly server: Server;
  connections = 0;
  private frozen = false;
  private readonly sockets: Socket[] = [];
  constructor(target: { host: string; port: number }) {
    this.server = createServer((client) => {
      this.connections++;
      const upstream = connect(target.port, target.host);
      for (const [from, to] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        from.on('data', (d) => to.write(d));
        from.on('error', () => to.destroy());
        from.on('close', () => to.destroy());
        this.sockets.push(from);
        if (this.frozen) from.pause();
      }
    });
  }
  freeze(frozen: boolean): void {
    this.frozen = frozen;
    for (const s of this.sockets)
      if (frozen) s.pause();
      else s.resume();
  }
  close(): void {
    for (const s of this.sockets) s.destroy();
    this.server.close();
  }
}

/** The tests, given a database URL (created and dropped by the caller) and query parameters for the server's connections. */
function silentServer(database: () => Promise<string>, params: string, tls: boolean): void {
  let url: string;
  let proxy: TcpProxy;
  let t: TestLrs;
  const statements = async () => (await t.fetch('/xAPI/statements?limit=1')).status;

  before(async () => {
    url = await database();
    const target = new URL(url);
    proxy = new TcpProxy({ host: target.hostname, port: Number(target.port) });
    await new Promise<void>((r) => proxy.server.listen(0, '127.0.0.1', r));
    const via = new URL(url);
    via.hostname = '127.0.0.1';
    via.port = String((proxy.server.address() as { port: number }).port);
    via.search = params;
    t = await startTestLrs(
      postgresAt(via.toString(), {
        // One connection, silent for 300 + 300 ms at most.
        LECTERN_POSTGRES_POOL_SIZE: '1',
        LECTERN_POSTGRES_STATEMENT_TIMEOUT: '300',
        LECTERN_POSTGRES_CONNECT_TIMEOUT: '300',
      }),
    );
  });
  after(async () => {
    await t?.close();
    proxy?.close();
  });

  test('a connection idle in the pool longer than the limit is kept', async () => {
    assert.equal(await statements(), 200);
    const opened = proxy.connections;
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(await statements(), 200);
    assert.equal(proxy.connections, opened, 'the idle connection was reused, not replaced');
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const r = await c.query<{ ssl: boolean }>(
        "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'lectern' AND a.datname = current_database()",
      );
      assert.deepEqual(
        r.rows.map((row) => row.ssl),
        [tls],
        "the server's one connection, encrypted or not as asked",
      );
    } finally {
      await c.end();
    }
  });

  test('a silent server: 503 with a JSON detail instead of a request that never ends; served again once it answers', async () => {
    assert.equal(await statements(), 200);
    proxy.freeze(true);
    const res = await t.fetch('/xAPI/statements?limit=1');
    assert.equal(res.status, 503);
    assert.match(((await res.json()) as { detail: string }).detail, /database is unavailable/);
    proxy.freeze(false);
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = await statements();
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200);
  });
}

describe('PostgreSQL that stops answering', { skip: postgresSkipped(), timeout: 60_000 }, () => {
  let url: string | undefined;
  after(async () => {
    if (url) await dropDatabase(url);
  });
  silentServer(async () => (url = await createDatabase()), '', false);
});

// Its own cluster, with TLS; needs the PostgreSQL binaries and openssl to make the certificate.
const openssl = spawnSync('openssl', ['version']).status === 0;
const tlsSkip = postgresSkipped() || (!findPgBin() ? 'needs initdb and pg_ctl to run its own server' : !openssl ? 'needs openssl to make a certificate' : false);

describe('PostgreSQL that stops answering, over TLS', { skip: tlsSkip, timeout: 60_000 }, () => {
  let cluster: PgCluster | undefined;
  after(() => cluster?.destroy());
  silentServer(
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'lectern-tls-'));
      try {
        const made = spawnSync('openssl', [
          'req',
          '-new',
          '-x509',
          '-days',
          '2',
          '-nodes',
          '-subj',
          '/CN=localhost',
          '-out',
          join(dir, 'server.crt'),
          '-keyout',
          join(dir, 'server.key'),
        ]);
        assert.equal(made.status, 0, made.stderr?.toString());
        cluster = await startCluster({
          settings: ['ssl = on'],
          files: { 'server.crt': readFileSync(join(dir, 'server.crt'), 'utf8'), 'server.key': readFileSync(join(dir, 'server.key'), 'utf8') },
        });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      return cluster.url;
    },
    // pg's own name for "encrypted, certificate not verified" (a self-signed certificate).
    '?sslmode=no-verify',
    true,
  );
});
