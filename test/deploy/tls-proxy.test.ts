/**
 * deploy/Caddyfile and deploy/nginx-lectern.conf, as documented in docs/operations.md: each proxy
 * runs (unprivileged, on high loopback ports, its files in a temporary folder) with the documented
 * configuration, changed only for ports, certificate files and its own state paths, in front of a
 * Lectern set up as documented (LECTERN_RUNSERVER_TRUST_PROXY=127.0.0.1). Clients talk HTTPS to
 * it, trusting a throwaway self-signed certificate, from loopback addresses other than the
 * proxy's (127.0.0.2…), so that the client's address and the proxy's differ.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { createLogger } from '../../src/log.ts';
import { ADMIN, basic, sqliteBackend, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { chownTree, freePort, requireTool, run, unprivileged } from '../helpers/tools.ts';

const deployFile = (name: string): string => readFileSync(new URL(`../../deploy/${name}`, import.meta.url), 'utf8');

/** Replaces what must be in the documented file (so that the test notices when the file changes). */
function sub(text: string, from: string | RegExp, to: string): string {
  assert.ok(typeof from === 'string' ? text.includes(from) : from.test(text), `the documented configuration no longer holds ${String(from)}`);
  return text.replace(from, to);
}

interface Setup {
  dir: string;
  cert: string;
  key: string;
  https: number;
  http: number;
  upstream: number;
}

interface ProxyKind {
  name: string;
  debianPackage: string;
  /** Writes its configuration under `s.dir`; the command line that runs it in the foreground. */
  configure(s: Setup): string[];
  /** Whether the documented configuration redirects plain HTTP (on `s.http` in the test). */
  redirects: boolean;
}

const PROXIES: ProxyKind[] = [
  {
    name: 'caddy',
    debianPackage: 'caddy',
    redirects: false,
    configure(s) {
      let site = deployFile('Caddyfile');
      site = sub(site, /^lrs\.example\.com \{$/m, `https://127.0.0.1:${s.https} {\n\tbind 127.0.0.1`);
      site = sub(site, /^\t# tls \S+ \S+$/m, `\ttls ${s.cert} ${s.key}`);
      site = sub(site, 'reverse_proxy 127.0.0.1:8100', `reverse_proxy 127.0.0.1:${s.upstream}`);
      // Global options of the test only: no admin endpoint, state in the temporary folder, no
      // port 80 (the documented site redirects HTTP there), no system trust store.
      const global = `{\n\tadmin off\n\tstorage file_system ${join(s.dir, 'caddy-data')}\n\thttp_port ${s.http}\n\tauto_https disable_redirects\n\tskip_install_trust\n}\n`;
      writeFileSync(join(s.dir, 'Caddyfile'), global + site);
      return ['run', '--config', join(s.dir, 'Caddyfile'), '--adapter', 'caddyfile'];
    },
  },
  {
    name: 'nginx',
    debianPackage: 'nginx',
    redirects: true,
    configure(s) {
      let server = deployFile('nginx-lectern.conf');
      server = sub(server, 'listen 80;', `listen 127.0.0.1:${s.http};`);
      server = sub(server, 'listen 443 ssl http2;', `listen 127.0.0.1:${s.https} ssl http2;`);
      server = sub(server, /ssl_certificate +\S+;/, `ssl_certificate ${s.cert};`);
      server = sub(server, /ssl_certificate_key +\S+;/, `ssl_certificate_key ${s.key};`);
      server = sub(server, 'proxy_pass http://127.0.0.1:8100;', `proxy_pass http://127.0.0.1:${s.upstream};`);
      writeFileSync(join(s.dir, 'lectern.conf'), server);
      // The main file a Debian host has in /etc/nginx/nginx.conf, reduced to what runs it here.
      const temp = join(s.dir, 'temp');
      mkdirSync(temp);
      writeFileSync(
        join(s.dir, 'nginx.conf'),
        [
          `pid ${join(s.dir, 'nginx.pid')};`,
          `error_log ${join(s.dir, 'error.log')} info;`,
          'worker_processes 1;',
          'events { worker_connections 64; }',
          'http {',
          `  access_log ${join(s.dir, 'access.log')};`,
          ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${k}_temp_path ${join(temp, k)};`),
          `  include ${join(s.dir, 'lectern.conf')};`,
          '}',
        ].join('\n'),
      );
      return ['-p', s.dir, '-c', join(s.dir, 'nginx.conf'), '-e', join(s.dir, 'error.log'), '-g', 'daemon off;'];
    },
  },
];

/** A self-signed certificate for 127.0.0.1 and localhost, its own CA (the clients trust it). */
function makeCertificate(dir: string): { cert: string; key: string } {
  const openssl = requireTool('openssl', 'openssl');
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  const r = run(openssl, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1,DNS:localhost',
  ]);
  assert.equal(r.status, 0, r.out);
  return { cert, key };
}

async function until<T>(check: () => T | undefined | Promise<T | undefined>, what: string, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const kind of PROXIES) {
  describe(`behind ${kind.name} with deploy/'s configuration`, () => {
    let dir: string;
    let setup: Setup;
    let lrs: TestLrs;
    let proxy: ChildProcess;
    let proxyOutput = '';
    const logLines: Record<string, unknown>[] = [];
    const agents = new Map<string, Agent>();
    let ca: string;

    /** An HTTPS request through the proxy from the loopback address `from`. */
    const call = async (from: string, path: string, init: { method?: string; user?: TestUser | null; headers?: Record<string, string>; body?: string } = {}) => {
      let agent = agents.get(from);
      if (!agent) agents.set(from, (agent = new Agent({ connect: { ca }, localAddress: from })));
      const headers: Record<string, string> = { 'x-experience-api-version': '1.0.3', ...init.headers };
      if (init.user !== null) headers.authorization = basic(init.user ?? ADMIN);
      const res = await request(`https://127.0.0.1:${setup.https}${path}`, { dispatcher: agent, method: (init.method ?? 'GET') as 'GET', headers, body: init.body });
      const text = await res.body.text();
      return { status: res.statusCode, headers: res.headers, text };
    };

    before(async () => {
      const bin = requireTool(kind.name, kind.debianPackage);
      dir = mkdtempSync(join(tmpdir(), `lectern-${kind.name}-`));
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(JSON.parse(line) as Record<string, unknown>);
          done();
        },
      });
      // As docs/operations.md sets Lectern up behind a proxy on the same host.
      lrs = await startTestLrs(sqliteBackend, {
        logger: createLogger('info', sink),
        env: { LECTERN_RUNSERVER_HOST: '127.0.0.1', LECTERN_RUNSERVER_TRUST_PROXY: '127.0.0.1', LECTERN_AUTH_MAX_FAILURES: '2' },
      });
      const { cert, key } = makeCertificate(dir);
      ca = readFileSync(cert, 'utf8');
      setup = { dir, cert, key, https: await freePort(), http: await freePort(), upstream: Number(new URL(lrs.url).port) };
      const args = kind.configure(setup);
      const user = unprivileged();
      if (user) chownTree(dir, user);
      proxy = spawn(bin, args, {
        ...user,
        cwd: dir,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, XDG_DATA_HOME: join(dir, 'xdg-data'), XDG_CONFIG_HOME: join(dir, 'xdg-config') },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      proxy.stdout!.on('data', (d: Buffer) => (proxyOutput += d.toString('utf8')));
      proxy.stderr!.on('data', (d: Buffer) => (proxyOutput += d.toString('utf8')));
      const exited = new Promise<never>((_, reject) => proxy.once('exit', (code) => reject(new Error(`${kind.name} exited (${code}):\n${proxyOutput.slice(-3000)}`))));
      exited.catch(() => {});
      const ready = until(async () => {
        try {
          return (await call('127.0.0.1', '/lbheartbeat', { user: null })).status === 200 ? true : undefined;
        } catch {
          return undefined;
        }
      }, `${kind.name} to answer on port ${setup.https}`).catch((err: Error) => Promise.reject(new Error(`${err.message}\n${proxyOutput.slice(-3000)}`)));
      await Promise.race([ready, exited]);
    });

    after(async () => {
      if (proxy && proxy.exitCode === null) {
        const gone = new Promise((r) => proxy.once('exit', r));
        proxy.kill('SIGTERM');
        await gone;
      }
      await Promise.all([...agents.values()].map((a) => a.close()));
      await lrs?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test('statement pages: `more` is a path from the root, and followed through the proxy it gives the next page', async () => {
      const posted = await call('127.0.0.2', '/xAPI/statements', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify([statement(), statement(), statement()]),
      });
      assert.equal(posted.status, 200, posted.text);
      const ids = JSON.parse(posted.text) as string[];
      const first = await call('127.0.0.2', '/xAPI/statements?limit=2');
      assert.equal(first.status, 200, first.text);
      const page1 = JSON.parse(first.text) as { statements: { id: string }[]; more: string };
      assert.equal(page1.statements.length, 2);
      // Relative to the host the client used, whatever address the proxy reached Lectern on.
      assert.match(page1.more, /^\/xAPI\/statements\?/);
      const second = await call('127.0.0.2', page1.more);
      assert.equal(second.status, 200, second.text);
      const page2 = JSON.parse(second.text) as { statements: { id: string }[]; more: string };
      assert.equal(page2.more, '');
      assert.deepEqual([...page1.statements, ...page2.statements].map((s) => s.id).sort(), [...ids].sort());
    });

    test("the request log holds the client's address, not the proxy's, whatever X-Forwarded-For the client sends", async () => {
      const reqId = `tls-${kind.name}-log`;
      const res = await call('127.0.0.2', '/xAPI/about', { user: null, headers: { 'x-request-id': reqId, 'x-forwarded-for': '203.0.113.9' } });
      assert.equal(res.status, 200, res.text);
      const line = await until(() => logLines.find((l) => l.reqId === reqId && l.msg === 'request'), 'the request log line', 5000);
      assert.equal(line.ip, '127.0.0.2');
      assert.equal(line.path, '/xAPI/about');
    });

    test('failed sign-ins count against the client that made them, not against every client of the proxy', async () => {
      const wrong = { ...ADMIN, password: 'not-the-password' };
      for (let i = 0; i < 2; i++) assert.equal((await call('127.0.0.3', '/whoami', { user: wrong })).status, 401);
      const refused = await call('127.0.0.3', '/whoami', { user: wrong, headers: { 'x-request-id': `tls-${kind.name}-429` } });
      assert.equal(refused.status, 429, refused.text);
      assert.ok(refused.headers['retry-after']);
      const line = await until(() => logLines.find((l) => l.reqId === `tls-${kind.name}-429`), 'the 429 log line', 5000);
      assert.equal(line.ip, '127.0.0.3');
      // Another client behind the same proxy signs in.
      assert.equal((await call('127.0.0.4', '/whoami')).status, 200);
    });

    if (kind.redirects) {
      test('plain HTTP is redirected to HTTPS', async () => {
        const res = await request(`http://127.0.0.1:${setup.http}/xAPI/about?x=1`, { method: 'GET' });
        await res.body.dump();
        assert.equal(res.statusCode, 301);
        assert.equal(res.headers.location, 'https://127.0.0.1/xAPI/about?x=1');
      });
    }
  });
}
