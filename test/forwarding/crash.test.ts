/**
 * At-least-once across a crash: `lectern runserver` (the built CLI, a child process) is killed with
 * SIGKILL while its outbox still holds statements and client writes are in flight, then started
 * again on the same database. Every statement it stored reaches the target; none it did not store.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ADMIN, BACKENDS, basic, credentialEntries, statement } from '../helpers/lrs.ts';
import { eventually, Receiver } from '../helpers/receiver.ts';
import { CLI, type Runserver, spawnRunserver } from '../helpers/runserver.ts';

const headers = { authorization: basic(ADMIN), 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' };

async function postStatements(base: string, body: unknown[]): Promise<string[]> {
  const res = await fetch(`${base}/xAPI/statements`, { method: 'POST', headers, body: JSON.stringify(body) });
  assert.equal(res.status, 200);
  return (await res.json()) as string[];
}

for (const backend of BACKENDS) {
  test(`${backend.name}: kill -9 of the forwarding server mid-queue, then a restart: nothing lost, nothing forwarded that was not stored`, async () => {
    assert.ok(existsSync(CLI), 'build first: npm run build');
    const dir = mkdtempSync(join(tmpdir(), 'lectern-fwd-crash-'));
    const settings = await backend.settings(dir);
    const rec = await new Receiver().listen();
    // The first batch is delivered; the second gets no answer before the crash, so the queue is
    // certainly not drained when the process dies. After the restart every request succeeds.
    let crashed = false;
    rec.respond = (_r, n) => (n === 1 || crashed ? { status: 200 } : { hang: true });
    let srv: Runserver | undefined;
    try {
      writeFileSync(join(dir, 'auth.json'), JSON.stringify(await credentialEntries([ADMIN])));
      const env = {
        ...settings,
        LECTERN_POSTGRES_POOL_SIZE: '2',
        LECTERN_AUTH_FILE: join(dir, 'auth.json'),
        LECTERN_RUNSERVER_PORT: '0',
        LECTERN_XAPI_FORWARDINGS: JSON.stringify([{ is_active: true, url: rec.url, basic_username: 'u', basic_password: 'p', max_retries: 50, timeout: 5 }]),
        LECTERN_XAPI_FORWARDING_BACKOFF: '20',
        LECTERN_XAPI_FORWARDING_BATCH_SIZE: '3',
        LECTERN_XAPI_FORWARDING_LEASE: '1',
      };
      srv = await spawnRunserver({ env, cwd: dir });
      let base = srv.url;
      const acked: string[] = [];
      for (let i = 0; i < 10; i++) acked.push(...(await postStatements(base, [statement(), statement()])));
      await eventually('a second batch in flight', () => rec.requests.length >= 2);
      // More writes in flight as the process dies: stored or not, each either arrives or is not stored.
      const inflight = Array.from({ length: 6 }, () =>
        postStatements(base, [statement()]).then(
          (ids) => acked.push(...ids),
          () => undefined,
        ),
      );
      await srv.stop('SIGKILL');
      await Promise.all(inflight);
      crashed = true;
      assert.ok(new Set(rec.ids()).size < acked.length, 'killed with statements still queued');

      srv = await spawnRunserver({ env, cwd: dir });
      base = srv.url;
      const res = await fetch(`${base}/xAPI/statements?limit=0`, { headers });
      const stored = new Set(((await res.json()) as { statements: { id: string }[] }).statements.map((s) => s.id));
      for (const id of acked) assert.ok(stored.has(id), `acknowledged ${id} is stored`);
      await eventually('every stored statement at the target', () => [...stored].every((id) => rec.ids().includes(id)));
      // The figures from /metrics (the operator's: ADMIN is `all` in the default store).
      const hb = await eventually('an empty queue', async () => {
        const text = await (await fetch(`${base}/metrics`, { headers })).text();
        const value = (name: string) => Number(new RegExp(`^${name}\\{target="[^"]*"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
        return value('lectern_forwarding_queued') === 0 ? { delivered: value('lectern_forwarding_delivered_total') } : undefined;
      });
      assert.equal(hb.delivered, stored.size, 'each stored statement counted once as delivered');
      assert.deepEqual(new Set(rec.ids()), stored, 'nothing forwarded that was not stored');
      await srv.stop();
    } finally {
      await srv?.stop('SIGKILL');
      await rec.close();
      await backend.dispose?.(settings);
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
