/**
 * SQLite on a disk that refuses writes (issue 27, item 12): `lectern runserver` (the built CLI, a
 * child process), on one event loop and with the writer thread, on a disk that fills up in two
 * real ways: a file size limit (prlimit --fsize: past it a write fails with EFBIG, which SQLite
 * reports as SQLITE_IOERR; Node ignores SIGXFSZ), and, where the test runs as root, a small tmpfs
 * in a mount namespace of the server's own (ENOSPC: SQLITE_FULL). Writes get 503 with a JSON body
 * saying why, the log names the real cause, nothing of a refused request is stored; once space
 * returns (the limit lifted, the tmpfs grown) writes succeed again without a restart, and every
 * acknowledged statement is there, in a database that checks clean.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ADMIN, basic, credentialEntries, statement } from '../helpers/lrs.ts';
import { eventually } from '../helpers/receiver.ts';
import { CLI, spawnRunserver } from '../helpers/runserver.ts';

/** Bytes the disk holds while it is "full" (per file, or the whole tmpfs). */
const LIMIT = 6 * 1024 * 1024;
const headers = { authorization: basic(ADMIN), 'x-experience-api-version': '1.0.3', 'content-type': 'application/json' };
const runs = (cmd: string, args: string[]) => process.platform === 'linux' && spawnSync(cmd, args).status === 0;

/** A way to fill the disk: the command line that runs the server's (same pid: it executes the server in place, and runserver re-executes in place), how space returns, how to run a program that sees the server's files. */
interface FullDisk {
  name: string;
  skip: string | false;
  wrap(disk: string, argv: string[]): string[];
  free(pid: number, disk: string): void;
  inside(pid: number, argv: string[]): ReturnType<typeof spawnSync>;
}

const DISKS: FullDisk[] = [
  {
    name: 'a file size limit (EFBIG)',
    skip: !runs('prlimit', ['--version']) && 'needs Linux and prlimit',
    wrap: (_disk, argv) => ['prlimit', `--fsize=${LIMIT}:unlimited`, '--', ...argv],
    free: (pid) => assert.equal(spawnSync('prlimit', ['--pid', String(pid), '--fsize=unlimited:unlimited']).status, 0),
    inside: (_pid, argv) => spawnSync(argv[0], argv.slice(1), { encoding: 'utf8' }),
  },
  {
    name: 'a full tmpfs (ENOSPC)',
    skip: !(process.getuid?.() === 0 && runs('unshare', ['-m', 'true']) && runs('nsenter', ['--version'])) && 'needs root, unshare and nsenter',
    // The tmpfs exists in the server's mount namespace only: nothing to clean up after it.
    wrap: (disk, argv) => ['unshare', '-m', '--propagation', 'private', 'sh', '-c', `mount -t tmpfs -o size=${LIMIT} lectern-test "$0" && exec "$@"`, disk, ...argv],
    free: (pid, disk) => assert.equal(spawnSync('nsenter', ['-t', String(pid), '-m', 'mount', '-o', 'remount,size=256m', disk]).status, 0),
    inside: (pid, argv) => spawnSync('nsenter', ['-t', String(pid), '-m', '--', ...argv], { encoding: 'utf8' }),
  },
];

/** A batch that takes room: 20 statements of ≈ 8 KB each. */
const batch = () => Array.from({ length: 20 }, () => statement({ id: randomUUID(), result: { response: randomUUID().repeat(220) } }));

async function postBatch(base: string, body: unknown[]): Promise<Response> {
  return fetch(`${base}/xAPI/statements`, { method: 'POST', headers, body: JSON.stringify(body) });
}

async function storedIds(base: string): Promise<Set<string>> {
  const ids = new Set<string>();
  for (let next = '/xAPI/statements?limit=100&format=ids'; next; ) {
    const res = await fetch(`${base}${next}`, { headers });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { statements: { id: string }[]; more: string };
    for (const s of body.statements) ids.add(s.id);
    next = body.more;
  }
  return ids;
}

for (const how of DISKS) {
  for (const writerThread of ['false', 'true']) {
    describe(`SQLite on ${how.name}, LECTERN_SQLITE_WRITER_THREAD=${writerThread}`, { skip: how.skip }, () => {
      test('503 with a clear body and the real cause logged; after space returns, writes succeed and every acknowledged statement is there', async () => {
        assert.ok(existsSync(CLI), 'build first: npm run build');
        const dir = mkdtempSync(join(tmpdir(), 'lectern-disk-full-'));
        const disk = join(dir, 'disk');
        mkdirSync(disk);
        writeFileSync(join(dir, 'auth.json'), JSON.stringify(await credentialEntries([ADMIN])));
        const path = join(disk, 'lrs.sqlite');
        const started = spawnRunserver({
          command: (argv) => how.wrap(disk, argv),
          cwd: dir,
          env: {
            LECTERN_SQLITE_PATH: path,
            LECTERN_SQLITE_WRITER_THREAD: writerThread,
            LECTERN_AUTH_FILE: join(dir, 'auth.json'),
            LECTERN_RUNSERVER_PORT: '0',
            LECTERN_LOG_LEVEL: 'info',
          },
        });
        try {
          const srv = await started;
          const base = srv.url;
          const acked = new Set<string>();
          const refused: string[] = [];
          // Fill the disk: every answer is 200 (stored) until it is full, then 503.
          let full: Response | undefined;
          for (let i = 0; i < 200 && !full; i++) {
            const body = batch();
            const res = await postBatch(base, body);
            if (res.status === 200) for (const id of (await res.json()) as string[]) acked.add(id);
            else {
              full = res;
              refused.push(...body.map((s) => s.id as string));
            }
          }
          assert.ok(full, 'the disk filled up');
          assert.ok(acked.size > 0, 'some writes succeeded first');
          assert.equal(full.status, 503, await full.clone().text());
          assert.equal(full.headers.get('retry-after'), '5');
          assert.match(full.headers.get('content-type') ?? '', /^application\/json/);
          assert.match(((await full.json()) as { detail: string }).detail, /cannot write to its database .*disk is full or failing.*nothing of this request was stored/);
          // Every write is refused alike while the disk is full: statements and documents (random, so it needs the room it takes).
          const again = batch();
          assert.equal((await postBatch(base, again)).status, 503);
          refused.push(...again.map((s) => s.id as string));
          const doc = `${base}/xAPI/activities/state?activityId=http://example.com/a&stateId=s&agent=${encodeURIComponent('{"mbox":"mailto:ben@example.com"}')}`;
          const put = await fetch(doc, { method: 'PUT', headers, body: JSON.stringify({ page: randomBytes(300_000).toString('base64') }) });
          assert.equal(put.status, 503, await put.text());
          // Reads go on.
          assert.deepEqual(await storedIds(base), acked);

          await eventually('the cause in the log', () => srv.output().includes('SQLite cannot write'));
          const log = srv.output();
          assert.match(log, /"err":"disk I\/O error \(SQLITE_IOERR \d+\)"|"err":"database or disk is full \(SQLITE_FULL \d+\)"/, 'the real cause is logged');
          assert.doesNotMatch(log, /cannot rollback|no transaction is active/);
          assert.doesNotMatch(log, /unhandled error/, 'no 500');

          // Space returns: the running server writes again, without a restart.
          how.free(srv.child.pid!, disk);
          const after = batch();
          const res = await postBatch(base, after);
          assert.equal(res.status, 200, await res.clone().text());
          for (const id of (await res.json()) as string[]) acked.add(id);
          const stored = await fetch(doc, { method: 'PUT', headers, body: JSON.stringify({ page: 1 }) });
          assert.equal(stored.status, 204);
          await eventually('the recovery in the log', () => srv.output().includes('SQLite writes again'));

          const ids = await storedIds(base);
          for (const id of acked) assert.ok(ids.has(id), `acknowledged ${id} is stored`);
          for (const id of refused) assert.ok(!ids.has(id), `refused ${id} is not stored`);
          assert.equal(ids.size, acked.size);
          // The file itself, read beside the running server (WAL: a reader sees every commit).
          const check = how.inside(srv.child.pid!, [
            process.execPath,
            '-e',
            `const db = new (require('node:sqlite').DatabaseSync)(${JSON.stringify(path)}, { readOnly: true });` +
              `console.log(JSON.stringify([db.prepare('PRAGMA integrity_check').get().integrity_check, db.prepare('SELECT count(*) AS n FROM statements').get().n]))`,
          ]);
          assert.equal(check.status, 0, String(check.stderr));
          assert.deepEqual(JSON.parse(String(check.stdout)), ['ok', acked.size]);
          assert.equal(await srv.stop(), 0);
        } finally {
          await started.then(
            (srv) => srv.stop('SIGKILL'),
            () => undefined,
          );
          rmSync(dir, { recursive: true, force: true });
        }
      });
    });
  }
}
