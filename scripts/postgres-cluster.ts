/**
 * A throwaway PostgreSQL cluster (initdb/pg_ctl in a temporary folder on a free loopback port,
 * removed when the process exits), shared by the test suite (test/helpers/postgres.ts) and the
 * benchmark. It lives in scripts/ so that bench/ and test/ both import it and neither imports
 * the other; the product (src/) does not ship it.
 */
import { execFile, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const INSTALL_HINT =
  'PostgreSQL server binaries (initdb, pg_ctl) were not found on PATH nor in /usr/lib/postgresql/*/bin. ' +
  'Install them (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql@15), or point ' +
  'LECTERN_TEST_POSTGRES_URL at a server where the URL user may CREATE DATABASE, or set ' +
  'LECTERN_TEST_SKIP_POSTGRES=1 to run the suite on SQLite only.';

export const postgresSkipped = (): boolean => process.env.LECTERN_TEST_SKIP_POSTGRES === '1';

/** The folder holding initdb and pg_ctl: PATH first, then Debian's versioned folders (newest first). */
export function findPgBin(): string | undefined {
  const has = (dir: string) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'));
  for (const dir of (process.env.PATH ?? '').split(delimiter)) if (dir && has(dir)) return dir;
  for (const root of ['/usr/lib/postgresql', '/usr/local/opt']) {
    if (!existsSync(root)) continue;
    const versions = readdirSync(root)
      .filter((v) => /^\d+/.test(v) || v.startsWith('postgresql'))
      .sort((a, b) => Number.parseInt(b.replace(/\D+/g, ''), 10) - Number.parseInt(a.replace(/\D+/g, ''), 10));
    for (const v of versions) if (has(join(root, v, 'bin'))) return join(root, v, 'bin');
  }
  return undefined;
}

/** initdb refuses to run as root: as root, the cluster belongs to (and runs as) this user. */
function clusterUser(): { name: string; uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    const r = spawnSync('id', ['-u', name], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', name], { encoding: 'utf8' });
    if (r.status === 0 && g.status === 0) return { name, uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) };
  }
  throw new Error('running as root, and neither a postgres nor a nobody user exists to own the test cluster');
}

/** runuser lives in /usr/sbin, which a root PATH may lack; su is the fallback. */
function asUser(user: string, argv: string[]): [string, string[]] {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  const runuser = dirs.map((d) => join(d, 'runuser')).find((f) => existsSync(f));
  if (runuser) return [runuser, ['-u', user, '--', ...argv]];
  const quoted = argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  return ['su', ['-s', '/bin/sh', user, '-c', quoted]];
}

function command(bin: string, tool: string, args: string[], user: ReturnType<typeof clusterUser>): [string, string[]] {
  return user ? asUser(user.name, [join(bin, tool), ...args]) : [join(bin, tool), args];
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

const PREFIX = 'lectern-pg-';

/** Removes clusters left behind by test processes that were killed before their clean-up ran. */
function reapOrphans(bin: string, user: ReturnType<typeof clusterUser>): void {
  for (const name of readdirSync(tmpdir())) {
    const m = new RegExp(`^${PREFIX}(\\d+)-`).exec(name);
    if (!m) continue;
    try {
      process.kill(Number(m[1]), 0);
      continue; // its owner is alive
    } catch {
      // owner gone
    }
    const dir = join(tmpdir(), name);
    if (existsSync(join(dir, 'data', 'postmaster.pid'))) {
      const [cmd, args] = command(bin, 'pg_ctl', ['-D', join(dir, 'data'), '-m', 'immediate', 'stop'], user);
      spawnSync(cmd, args, { stdio: 'ignore', timeout: 10_000 });
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface PgCluster {
  /** Superuser URL of the `postgres` database. */
  url: string;
  port: number;
  dir: string;
  /** pg_ctl stop (fast: disconnects clients, clean shutdown). */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** Stops the server and deletes its folder; synchronous so it can run at process exit. */
  destroy(): void;
}

export interface ClusterOptions {
  /** Keep fsync and full WAL (benchmarks); by default durability is traded for speed. */
  durable?: boolean;
  /** Extra postgresql.conf lines. */
  settings?: string[];
  /** Files written into the data directory before the server starts (owned by its user, mode 0600), e.g. a TLS key. */
  files?: Record<string, string>;
  /**
   * Create the cluster in this folder (its data in `<at>/data`) and keep it: `destroy()` and
   * process exit stop the server cleanly and leave the folder (bench --keep). It must not exist
   * or be empty.
   */
  at?: string;
}

/** Lines that make a cluster a primary a streaming standby can follow (ClusterOptions.settings; later lines win). */
export const PRIMARY_SETTINGS = ['wal_level = replica', 'max_wal_senders = 10', 'max_replication_slots = 10'];

/** A new folder (owned by the cluster's user) for a cluster's data: `at`, or a temporary one. */
function clusterDir(user: ReturnType<typeof clusterUser>, at?: string): { dir: string; data: string } {
  if (at) {
    mkdirSync(at, { recursive: true });
    if (readdirSync(at).length) throw new Error(`${at} is not empty: a kept cluster is not overwritten`);
  }
  const dir = at ?? mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  const data = join(dir, 'data');
  mkdirSync(data, { mode: 0o700 });
  if (user) {
    chownSync(dir, user.uid, user.gid);
    chownSync(data, user.uid, user.gid);
  }
  return { dir, data };
}

/** Runs one of PostgreSQL's tools (as the cluster's user), its stderr in the error. */
function tool(bin: string, user: ReturnType<typeof clusterUser>, timeout = 60_000): (name: string, args: string[]) => Promise<void> {
  return async (name, args) => {
    const [cmd, argv] = command(bin, name, args, user);
    try {
      await run(cmd, argv, { timeout });
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new Error(`${name} failed: ${e.stderr?.trim() || e.message}`);
    }
  };
}

function appendConf(data: string, lines: string[]): void {
  writeFileSync(join(data, 'postgresql.conf'), `${readFileSync(join(data, 'postgresql.conf'), 'utf8')}\n${lines.join('\n')}\n`);
}

/**
 * Starts the server of a data folder on a free loopback port (its socket in `dir`); the PgCluster
 * that controls it. A kept cluster is stopped cleanly, never deleted, by destroy() and at exit.
 */
async function launch(bin: string, user: ReturnType<typeof clusterUser>, dir: string, data: string, keep = false): Promise<PgCluster> {
  // pg_ctl's own -t bounds start and stop (a 10M-statement cluster's checkpoint or recovery takes minutes).
  const exec = tool(bin, user, 700_000);
  let port = 0;
  const start = async () => {
    // Another process may take the port between the probe and the bind: try a few.
    for (let attempt = 1; ; attempt++) {
      port = port || (await freePort());
      try {
        // -k: a kept cluster may have been moved since its postgresql.conf was written.
        await exec('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '600', '-o', `-p ${port} -k ${dir}`, 'start']);
        return;
      } catch (err) {
        if (attempt >= 3) throw new Error(`${(err as Error).message}\n${existsSync(join(dir, 'server.log')) ? readFileSync(join(dir, 'server.log'), 'utf8').slice(-2000) : ''}`);
        port = 0;
      }
    }
  };
  await start();
  let destroyed = false;
  const cluster: PgCluster = {
    get url() {
      return `postgres://postgres@127.0.0.1:${port}/postgres`;
    },
    get port() {
      return port;
    },
    dir,
    stop: (mode = 'fast') => exec('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '600', 'stop']),
    start,
    destroy() {
      if (destroyed) return;
      destroyed = true;
      if (existsSync(join(data, 'postmaster.pid'))) {
        const [cmd, args] = command(bin, 'pg_ctl', ['-D', data, '-m', keep ? 'fast' : 'immediate', '-w', '-t', '600', 'stop'], user);
        spawnSync(cmd, args, { stdio: 'ignore', timeout: keep ? 600_000 : 30_000 });
      }
      if (!keep) rmSync(dir, { recursive: true, force: true });
    },
  };
  process.once('exit', () => cluster.destroy());
  return cluster;
}

/** Creates and starts a throwaway cluster (≈ 1 s). Settings favour speed over durability. */
export async function startCluster(opts: ClusterOptions = {}): Promise<PgCluster> {
  const bin = findPgBin();
  if (!bin) throw new Error(INSTALL_HINT);
  const user = clusterUser();
  reapOrphans(bin, user);
  const { dir, data } = clusterDir(user, opts.at);
  await tool(bin, user)('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions']);
  appendConf(data, [
    "listen_addresses = '127.0.0.1'",
    `unix_socket_directories = '${dir}'`,
    'max_connections = 300',
    // Throwaway data: no fsync, no WAL beyond what crash recovery needs.
    ...(opts.durable ? [] : ['fsync = off', 'synchronous_commit = off', 'full_page_writes = off', 'wal_level = minimal', 'max_wal_senders = 0', 'shared_buffers = 32MB']),
    ...(opts.settings ?? []),
  ]);
  for (const [name, content] of Object.entries(opts.files ?? {})) {
    writeFileSync(join(data, name), content, { mode: 0o600 });
    if (user) chownSync(join(data, name), user.uid, user.gid);
  }
  return launch(bin, user, dir, data, opts.at !== undefined);
}

/**
 * Starts a cluster kept by `startCluster({ at })` (or a standby's folder): `dir` holds `data/`.
 * Kept as `at` is: stopped cleanly, never deleted.
 */
export async function openCluster(dir: string): Promise<PgCluster> {
  const bin = findPgBin();
  if (!bin) throw new Error(INSTALL_HINT);
  const data = join(dir, 'data');
  if (!existsSync(join(data, 'PG_VERSION'))) throw new Error(`${dir} holds no PostgreSQL cluster (no data/PG_VERSION)`);
  if (existsSync(join(data, 'postmaster.pid'))) throw new Error(`${data}/postmaster.pid exists: that cluster is running, or was not stopped cleanly`);
  return launch(bin, clusterUser(), dir, data, true);
}

/**
 * A streaming hot standby of `primary` (started with PRIMARY_SETTINGS; initdb's pg_hba lets
 * loopback replication in): pg_basebackup -R with a replication slot of its own (the primary
 * keeps the WAL it has not received while it is stopped), started on another free port.
 */
export async function startStandby(primary: PgCluster, settings: string[] = [], at?: string): Promise<PgCluster> {
  const found = findPgBin();
  if (!found) throw new Error(INSTALL_HINT);
  // pg_basebackup sits with the real initdb (PATH may hold only links to initdb and pg_ctl).
  const bin = dirname(realpathSync(join(found, 'initdb')));
  const user = clusterUser();
  const { dir, data } = clusterDir(user, at);
  const slot = `standby_${process.pid}_${Date.now().toString(36)}`;
  await tool(
    bin,
    user,
    0,
  )('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', data, '-R', '-X', 'stream', '-C', '-S', slot, '--no-sync', '-c', 'fast']);
  appendConf(data, [`unix_socket_directories = '${dir}'`, 'hot_standby = on', ...settings]);
  return launch(bin, user, dir, data, at !== undefined);
}
