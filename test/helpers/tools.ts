/**
 * System programs the deploy/ tests run (caddy, nginx, promtool, systemd-analyze, openssl): found on
 * PATH or in the sbin folders a non-login PATH lacks, or an error naming the package to install —
 * these tests never skip. As root, the servers among them run as `nobody`.
 */
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, readdirSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';

/** The program's path; throws naming the Debian package that brings it (.ci/run installs them). */
export function requireTool(name: string, debianPackage: string): string {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin'];
  for (const dir of dirs) {
    const file = join(dir, name);
    if (dir && existsSync(file) && statSync(file).isFile()) return file;
  }
  throw new Error(`${name} was not found on PATH: install it (Debian/Ubuntu: apt-get install ${debianPackage}; .ci/run does) to run the deploy/ tests`);
}

/** Runs a program to completion; its exit status and both outputs. */
export function run(file: string, args: string[]): { status: number | null; out: string } {
  const r = spawnSync(file, args, { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

/** As root, the user servers run as (nobody), so that they run unprivileged as they would in production. */
export function unprivileged(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const u = spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' });
  const g = spawnSync('id', ['-g', 'nobody'], { encoding: 'utf8' });
  if (u.status !== 0 || g.status !== 0) throw new Error('running as root, and no nobody user exists to run the proxies as');
  return { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) };
}

/** Gives `dir` and everything in it to `user` (a server running as it writes there). */
export function chownTree(dir: string, user: { uid: number; gid: number }): void {
  chownSync(dir, user.uid, user.gid);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) chownTree(path, user);
    else chownSync(path, user.uid, user.gid);
  }
}

/** A loopback TCP port free right now (the caller's server takes it next). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
