/**
 * `lectern runserver` re-executes itself in place with the memory settings of src/cli/program.ts
 * (V8 semi-spaces, heap growth, when full collections start, malloc arenas and mmap threshold; sized for the SQLite writer thread when it runs): same process, still serving and stopping on
 * SIGTERM; the user's own flag or MALLOC_* setting wins. Read from /proc (Linux).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createDatabase, dropDatabase, postgresSkipped } from './helpers/postgres.ts';
import { spawnRunserver } from './helpers/runserver.ts';

const dir = mkdtempSync(join(tmpdir(), 'lectern-memory-settings-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Starts runserver (no IPC channel, as from a shell), returns its command line and environment once it listens. */
async function started(env: Record<string, string>, args: string[] = []): Promise<{ argv: string[]; env: Map<string, string>; url: string; stop: () => Promise<number | null> }> {
  const server = await spawnRunserver({
    args: ['--port', '0', ...args],
    cwd: dir,
    env: { LECTERN_SQLITE_PATH: join(dir, `${Math.random().toString(36).slice(2)}.sqlite`), LECTERN_AUTH_FILE: join(dir, 'none.json'), ...env },
  });
  const child = server.child;
  const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  const environ = new Map(
    readFileSync(`/proc/${child.pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv): [string, string] => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  return {
    argv,
    env: environ,
    url: server.url,
    stop: () => server.stop(),
  };
}

describe('runserver memory settings', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  test('the server process runs with them, serves, and stops on SIGTERM', async () => {
    const s = await started({});
    try {
      assert.ok(s.argv.includes('--max-semi-space-size=16'), s.argv.join(' '));
      assert.ok(s.argv.includes('--heap-growing-percent=50'), s.argv.join(' '));
      assert.ok(s.argv.includes('--incremental-marking-soft-trigger=50'), s.argv.join(' '));
      assert.equal(s.env.get('MALLOC_ARENA_MAX'), '2');
      assert.equal(s.env.get('MALLOC_MMAP_THRESHOLD_'), '1048576');
      assert.equal((await fetch(`${s.url}/lbheartbeat`)).status, 200);
    } finally {
      assert.equal(await s.stop(), 0);
    }
  });

  test('8 MB semi-spaces and one arena with the SQLite writer thread (LECTERN_SQLITE_WRITER_THREAD, also read from .env)', async () => {
    const s = await started({ LECTERN_SQLITE_WRITER_THREAD: 'true' });
    try {
      assert.ok(s.argv.includes('--max-semi-space-size=8'), s.argv.join(' '));
      assert.equal(s.env.get('MALLOC_ARENA_MAX'), '1');
      assert.equal((await fetch(`${s.url}/lbheartbeat`)).status, 200);
    } finally {
      assert.equal(await s.stop(), 0);
    }
    writeFileSync(join(dir, '.env'), 'LECTERN_SQLITE_WRITER_THREAD=true\n');
    try {
      const e = await started({});
      try {
        assert.ok(e.argv.includes('--max-semi-space-size=8'), e.argv.join(' '));
      } finally {
        assert.equal(await e.stop(), 0);
      }
    } finally {
      rmSync(join(dir, '.env'));
    }
  });

  test('--backend postgres: no writer thread (whatever LECTERN_SQLITE_WRITER_THREAD says), 16 MB semi-spaces and two arenas', { skip: postgresSkipped() }, async () => {
    const url = await createDatabase();
    try {
      const s = await started({ LECTERN_POSTGRES_URL: url, LECTERN_SQLITE_WRITER_THREAD: 'true' }, ['-bpostgres']);
      try {
        assert.ok(s.argv.includes('--max-semi-space-size=16'), s.argv.join(' '));
        assert.equal(s.env.get('MALLOC_ARENA_MAX'), '2');
      } finally {
        assert.equal(await s.stop(), 0);
      }
    } finally {
      await dropDatabase(url);
    }
  });

  test("the user's own flag and MALLOC_* settings win", async () => {
    const s = await started({ NODE_OPTIONS: '--max-semi-space-size=8', MALLOC_ARENA_MAX: '4', MALLOC_MMAP_THRESHOLD_: '262144' });
    try {
      assert.ok(!s.argv.some((a) => a.startsWith('--max-semi-space-size')), s.argv.join(' '));
      assert.ok(s.argv.includes('--heap-growing-percent=50'), s.argv.join(' '));
      assert.equal(s.env.get('MALLOC_ARENA_MAX'), '4');
      assert.equal(s.env.get('MALLOC_MMAP_THRESHOLD_'), '262144');
    } finally {
      assert.equal(await s.stop(), 0);
    }
  });
});
