/**
 * A PostgreSQL server that stops answering without closing the connection (a host gone, a network
 * partition), simulated by a TCP proxy that stops forwarding: a request on a pooled connection
 * gets 503 once the connection has been silent longer than the statement timeout plus the connect
 * timeout, the server serves again once PostgreSQL answers, and a connection merely idle in the
 * pool for that long is kept.
 */
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Backend, startTestLrs, type TestLrs } from '../helpers/lrs.ts';
import { createDatabase, dropDatabase, postgresSkipped } from '../helpers/postgres.ts';

/** Forwards TCP to PostgreSQL; frozen, it reads nothing from either side (the bytes wait in the kernel). */
class Proxy {
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
    for (const s of this.sockets) if (frozen) s.pause();
    else s.resume();
  }
  close(): void {
    for (const s of this.sockets) s.destroy();
    this.server.close();
  }
}

describe('PostgreSQL that stops answering', { skip: postgresSkipped(), timeout: 60_000 }, () => {
  let url: string;
  let proxy: Proxy;
  let t: TestLrs;
  const statements = async () => (await t.fetch('/xAPI/statements?limit=1')).status;

  before(async () => {
    url = await createDatabase();
    const target = new URL(url);
    proxy = new Proxy({ host: target.hostname, port: Number(target.port) });
    await new Promise<void>((r) => proxy.server.listen(0, '127.0.0.1', r));
    const via = new URL(url);
    via.hostname = '127.0.0.1';
    via.port = String((proxy.server.address() as { port: number }).port);
    const backend: Backend = {
      name: 'postgres',
      settings: async () => ({
        LECTERN_RUNSERVER_BACKEND: 'postgres',
        LECTERN_POSTGRES_URL: via.toString(),
        // One connection, silent for 300 + 300 ms at most.
        LECTERN_POSTGRES_POOL_SIZE: '1',
        LECTERN_POSTGRES_STATEMENT_TIMEOUT: '300',
        LECTERN_POSTGRES_CONNECT_TIMEOUT: '300',
      }),
    };
    t = await startTestLrs(backend);
  });
  after(async () => {
    await t?.close();
    proxy?.close();
    if (url) await dropDatabase(url);
  });

  test('a connection idle in the pool longer than the limit is kept', async () => {
    assert.equal(await statements(), 200);
    const opened = proxy.connections;
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(await statements(), 200);
    assert.equal(proxy.connections, opened, 'the idle connection was reused, not replaced');
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
});
