/**
 * The package as a user installs it: `npm pack`, then `npm install -g` into a throwaway prefix and
 * `npx` from the tarball (by a relative and by an absolute path), with the machine's own Node and
 * npm (/usr/bin: a Node 20 here, older than Lectern needs) and npx also with the bundled Node 24,
 * then `lectern runserver` answering HTTP; and what the tarball holds (LICENSE, the docs its README
 * links to). One pack per run; npm's download cache is shared (installs are offline when it holds
 * everything), its npx folder is not.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { spawnRunserver } from './helpers/runserver.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SYSTEM_PATH = '/usr/bin:/bin';
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
let dir: string;
let tarball: string;
let npmEnv: Record<string, string>;

/** How the machine reaches the registry (a proxy, or a certificate authority of its own): a user's install has them too. */
const NETWORK_ENV = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY', 'https_proxy', 'http_proxy', 'no_proxy'];

/** Runs a command to its end (5 minutes at most: npm retrying a registry it cannot reach fails the test, not hangs it); rejects with its output when it fails. */
function run(cmd: string, args: string[], opts: { cwd: string; env: Record<string, string> }): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code, signal) => (code === 0 ? resolve({ stdout, stderr }) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code ?? signal}\n${stdout}\n${stderr}`))));
  });
}

before(() => {
  assert.ok(existsSync(join(ROOT, 'dist/cli/main.js')), 'build first: npm run build');
  assert.ok(existsSync('/usr/bin/node') && existsSync('/usr/bin/npm'), 'the machine has no system node and npm in /usr/bin');
  dir = mkdtempSync(join(tmpdir(), 'lectern-install-'));
  // npm's cache of downloads is shared; npx installs into <cache>/_npx, which must not pile up.
  const realCache = process.env.npm_config_cache || join(homedir(), '.npm');
  mkdirSync(join(realCache, '_cacache'), { recursive: true });
  mkdirSync(join(dir, 'cache'));
  symlinkSync(join(realCache, '_cacache'), join(dir, 'cache', '_cacache'));
  // The real HOME: its .npmrc (and the machine's) set how npm reaches the registry.
  npmEnv = {
    ...Object.fromEntries(NETWORK_ENV.flatMap((k) => (process.env[k] ? [[k, process.env[k] as string]] : []))),
    PATH: SYSTEM_PATH,
    HOME: homedir(),
    npm_config_cache: join(dir, 'cache'),
    npm_config_prefer_offline: 'true',
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  };
  // The files a user gets (dist, built by `npm test` before the tests run: no prepack build here).
  execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: ROOT, env: npmEnv, stdio: 'ignore' });
  tarball = join(dir, `${pkg.name}-${pkg.version}.tgz`);
  assert.ok(existsSync(tarball));
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('the packed package, with the system Node', () => {
  const systemNode = () => execFileSync('/usr/bin/node', ['--version'], { encoding: 'utf8' }).trim();

  test('npm install -g: `lectern runserver` serves HTTP and stops gracefully on SIGTERM to its process group, exit code 0', async () => {
    const prefix = join(dir, 'prefix');
    await run('npm', ['install', '-g', '--prefix', prefix, tarball], { cwd: dir, env: npmEnv });
    const work = join(dir, 'work');
    mkdirSync(work);
    // `lectern` found on PATH, run by the `#!/usr/bin/env node` of its bin: the system Node.
    // In a process group of its own, stopped as systemd stops a unit: SIGTERM to every process.
    const server = await spawnRunserver({
      command: (argv) => ['lectern', ...argv.slice(2)],
      args: ['-p', '0'],
      cwd: work,
      env: { PATH: `${join(prefix, 'bin')}:${SYSTEM_PATH}`, HOME: dir },
      group: true,
    }).catch((err: Error) => {
      throw new Error(`under ${systemNode()}: ${err.message}`);
    });
    try {
      const { url } = server;
      const res = await fetch(`${url}/xAPI/about`);
      assert.equal(res.status, 200);
      assert.ok(((await res.json()) as { version: string[] }).version.includes('1.0.3'));
      assert.equal((await fetch(`${url}/xAPI/statements`)).status, 401, 'no user yet');
    } finally {
      server.signal('SIGTERM');
    }
    const code = await server.exited;
    const out = server.output();
    assert.equal(code, 0, out);
    assert.match(out, /"msg":"stopped"/, 'a graceful stop');
  });
});

/**
 * npx from the tarball as the operations page says: by a path relative to the working folder, and
 * by an absolute one written `file:…` (npx runs a bare absolute path as a program, the tarball
 * itself: "Permission denied"). The runs on Node 24 find the installs of the runs on Node 20 in
 * npx's folder (one per way of naming the tarball): npm and Lectern on that Node, not the install.
 */
function npxForms(label: string, path: string) {
  describe(`npx from the tarball, ${label}`, () => {
    test('by a relative path: `lectern auth` prints an entry (bcrypt loads), `--version` the version', async () => {
      const npx = (args: string[]) => run('npx', ['--yes', `./${basename(tarball)}`, ...args], { cwd: dir, env: { ...npmEnv, PATH: path } });
      const { stdout } = await npx(['auth', '-u', 'jane', '-p', 'pw', '-s', 'all', '-M', 'mailto:jane@example.com']);
      assert.equal(JSON.parse(stdout).username, 'jane');
      assert.equal((await npx(['--version'])).stdout.trim(), pkg.version);
    });

    test('by an absolute path, from another folder: `--version` the version', async () => {
      const work = join(dir, 'elsewhere');
      mkdirSync(work, { recursive: true });
      const { stdout } = await run('npx', ['--yes', `file:${tarball}`, '--version'], { cwd: work, env: { ...npmEnv, PATH: path } });
      assert.equal(stdout.trim(), pkg.version);
    });
  });
}

npxForms('with the system Node', SYSTEM_PATH);
// The machine's npm on the bundled Node, first on PATH as under `npm test`.
npxForms('with the bundled Node 24', `${join(ROOT, 'node_modules/.bin')}:${SYSTEM_PATH}`);

test('the package holds its LICENSE, an executable `lectern`, and every file its README and docs link to', () => {
  const unpacked = join(dir, 'unpacked');
  mkdirSync(unpacked);
  execFileSync('tar', ['-xzf', tarball, '-C', unpacked]);
  const root = join(unpacked, 'package');
  const license = readFileSync(join(root, 'LICENSE'), 'utf8');
  assert.match(license, /^MIT License\n\nCopyright \(c\) \d{4} Lectern contributors\n/);
  assert.ok(statSync(join(root, 'dist/cli/main.js')).mode & 0o111, 'the bin is executable in the tarball');
  const pages = [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  assert.ok(pages.length > 5, pages.join(' '));
  const missing = pages.flatMap((page) =>
    relativeLinks(readFileSync(join(root, page), 'utf8'))
      .map((target) => resolve(root, dirname(page), target))
      .filter((file) => !existsSync(file))
      .map((file) => `${page} links to ${relative(root, file)}`),
  );
  assert.deepEqual(missing, []);
  assert.ok(existsSync(join(root, 'deploy/lectern.service')));
});

/** The relative targets of a Markdown page's links and images, outside code, without their #anchor (test/docs-links.test.ts checks those). */
function relativeLinks(markdown: string): string[] {
  let fenced = false;
  const out: string[] = [];
  for (const line of markdown.split('\n')) {
    if (/^\s{0,3}(`{3,}|~{3,})/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const text = line.replace(/(`+)[^`]*?\1/g, '');
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|\bsrc="([^"]+)"/g)) {
      const target = (m[1] ?? m[2]!).split('#')[0]!;
      if (target && !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith('//')) out.push(decodeURIComponent(target));
    }
  }
  return out;
}

test("a clean install has nothing to warn of but its dependencies' engines: every install script is allowed or denied, Lectern accepts Node 20", () => {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string }; allowScripts: Record<string, boolean> };
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean }> };
  const scripted = Object.entries(lock.packages)
    .filter(([, p]) => p.hasInstallScript)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
  assert.ok(scripted.length > 0);
  for (const name of scripted) assert.ok(name in manifest.allowScripts, `allowScripts says nothing of ${name}: npm ci warns`);
  assert.equal(manifest.engines.node, '>=20');
});
