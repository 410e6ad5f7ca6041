/**
 * The benchmark's statement generator (bench/generate.ts): what it makes is valid xAPI the LRS
 * accepts, the same for the same seed, and the query filters it hands the benchmark match what
 * it generated. The bench folder's shape: no imports from test/, no import cycles, results
 * git-ignored, and its tools run on today's schema. (The benchmark itself is never timed in
 * tests; `npm run bench -- --quick --check` is its smoke run, in .ci/run.)
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { queryFilters, statement } from '../bench/generate.ts';
import { paramsOf, postgresPlans, sqlitePlans } from '../bench/plans.ts';
import { pgQuery } from '../bench/harness.ts';
import { growthTable, type QueryFigure } from '../bench/report.ts';
import { latencyOf } from '../bench/load.ts';
import { openCluster, postgresSkipped, startCluster } from '../scripts/postgres-cluster.ts';
import { BACKENDS, jsonInit, startTestLrs } from './helpers/lrs.ts';
import { validateStatements } from '../src/xapi/validate.ts';

const SEED = 20261123;
// biome-ignore lint/suspicious/noExplicitAny: generated statements read field by field
type Loose = Record<string, any>;

test('generated statements are valid xAPI, ≈ 1.2 KB, with the promised mix', () => {
  const n = 3000;
  const batch = Array.from({ length: n }, (_, i) => statement(SEED, i)) as Loose[];
  const { issues } = validateStatements(batch, '1.0.3');
  assert.deepEqual(issues.slice(0, 3), []);
  const bytes = batch.reduce((a, s) => a + Buffer.byteLength(JSON.stringify(s)), 0) / n;
  assert.ok(bytes > 1000 && bytes < 1500, `average ${bytes} bytes`);
  const has = (f: (s: Loose) => boolean) => batch.some(f);
  assert.ok(
    has((s) => s.actor.objectType === 'Group' && s.actor.account),
    'identified groups',
  );
  assert.ok(
    has((s) => s.actor.objectType === 'Group' && !s.actor.account),
    'anonymous groups',
  );
  assert.ok(has((s) => s.actor.account) && has((s) => s.actor.mbox) && has((s) => s.actor.openid), 'account, mbox and openid agents');
  assert.ok(
    has((s) => s.verb.id.endsWith('/voided') && s.object.objectType === 'StatementRef'),
    'voidings',
  );
  assert.ok(
    has((s) => !s.verb.id.endsWith('/voided') && s.object.objectType === 'StatementRef'),
    'other StatementRefs',
  );
  assert.ok(
    has((s) => s.context?.contextActivities?.parent && s.context.registration && s.result?.score),
    'context activities, registrations, results',
  );
  assert.ok(new Set(batch.map((s) => s.verb.id)).size > 10, 'many verbs');
});

test('the stream is a function of (seed, i): any process makes the same statement', () => {
  assert.deepEqual(statement(SEED, 123_456), statement(SEED, 123_456));
  assert.notEqual(statement(SEED, 1).id, statement(SEED + 1, 1).id);
  const ids = new Set(Array.from({ length: 5000 }, (_, i) => statement(SEED, i).id));
  assert.equal(ids.size, 5000);
});

test('voidings target earlier statements that are not voidings themselves', () => {
  const idx = new Map<string, number>();
  for (let i = 0; i < 8000; i++) {
    const s = statement(SEED, i) as Loose;
    idx.set(s.id, i);
    if (!s.verb.id.endsWith('/voided')) continue;
    const target = idx.get(s.object.id);
    assert.ok(target !== undefined && target < i, `statement ${i} voids an earlier statement`);
    assert.ok(!(statement(SEED, target) as Loose).verb.id.endsWith('/voided'));
  }
});

test('every benchmark query filter matches statements among the first 2,000', () => {
  const batch = Array.from({ length: 2000 }, (_, i) => JSON.stringify(statement(SEED, i)));
  for (const [name, params] of Object.entries(queryFilters(SEED))) {
    for (const [key, value] of Object.entries(params)) {
      if (key.startsWith('related_')) continue;
      const needle = key === 'agent' ? value.slice(1, -1) : JSON.stringify(value);
      assert.ok(
        batch.some((s) => s.includes(needle)),
        `${name}: ${key}=${value} occurs`,
      );
    }
  }
});

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BENCH = join(ROOT, 'bench');

/** The source files under `dir` (bench/ by default) and the relative modules each imports (static and dynamic). */
function benchImports(dir = BENCH): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => /\.(ts|js)$/.test(f) && !f.startsWith('results'));
  for (const f of files) {
    const file = join(dir, f);
    const specs = [...readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]);
    graph.set(
      relative(ROOT, file),
      specs.map((spec) => relative(ROOT, resolve(dirname(file), spec))),
    );
  }
  return graph;
}

test('the growth table compares a filter that was one short page at the smallest size by its twin limited to that page', () => {
  const run = (p50: number, p99: number) => ({ requests: 100, rps: 100, seconds: 1, latency: { p50, p90: p99, p99, max: p99, mean: p50 }, failed: 0, statusCodes: { 200: 100 } });
  const qs: QueryFigure[] = [
    { filter: 'rare', size: 1000, first: run(4, 10), pagesFound: 1, firstPageCount: 24 },
    { filter: 'rare', size: 10000, first: run(8, 20), pagesFound: 3 },
    { filter: 'rare, limit 24 (its whole answer at 1,000)', size: 10000, first: run(5, 12), pagesFound: 10, sameAnswerAs: 'rare' },
    { filter: 'busy', size: 1000, first: run(4, 10), deep: run(4, 10), pagesFound: 10 },
    { filter: 'busy', size: 10000, first: run(8, 10), deep: run(4, 10), pagesFound: 10 },
  ];
  const table = growthTable('sqlite', qs, 1000, 10000, { pages: 10, rawRows: 0, querySeconds: 2 });
  assert.match(table, /target ≤ 1\.5×: 1 of 2 filters/);
  assert.match(table, /\| rare, limit 24 \(its whole answer at 1,000\) +\| 1\.25× +\| 1\.20× +\| – +\| – +\| yes +\|/);
  assert.match(table, /\| busy +\| 2\.00× .*\| no +\|/);
  assert.doesNotMatch(table, /\| rare +\|/, 'the full-page row is not judged');
});

test('under the growth table, the machine check at both sizes with the wait for the machine to fall quiet', () => {
  const run = (p50: number) => ({ requests: 100, rps: 100, seconds: 1, latency: { p50, p90: p50, p99: p50, max: p50, mean: p50 }, failed: 0, statusCodes: { 200: 100 } });
  const qs: QueryFigure[] = [
    { filter: 'plain', size: 1000, first: run(4), pagesFound: 1 },
    { filter: 'plain', size: 10000, first: run(5), pagesFound: 1 },
  ];
  const drift = {
    from: { size: 1000, getRps: 10_000, settled: { seconds: 2, busy: 0.03, steal: 0 } },
    to: { size: 10000, getRps: 5_000, settled: { seconds: 64, busy: 0.09, steal: 0.02 } },
  };
  const table = growthTable('postgres', qs, 1000, 10000, { pages: 10, rawRows: 0, querySeconds: 2 }, drift);
  assert.match(table, /10,000 req\/s at 1,000, 5,000 at 10,000 \(0\.50×\)/);
  assert.match(table, /at 10,000 the machine fell quiet after 64 s \(9 % busy, 2 % stolen by the host\)/);
  assert.doesNotMatch(growthTable('postgres', qs, 1000, 10000, { pages: 10, rawRows: 0, querySeconds: 2 }), /Machine check/);
});

test("load percentiles keep fractions of a millisecond (autocannon's histogram rounds to whole ones)", () => {
  const times = Array.from({ length: 100 }, (_, i) => 6 + (i + 1) / 100);
  const { mean, ...percentiles } = latencyOf(times.reverse());
  assert.deepEqual(percentiles, { p50: 6.5, p90: 6.9, p99: 6.99, max: 7 });
  assert.ok(Math.abs(mean - 6.505) < 1e-9);
  assert.equal(latencyOf([3.25]).p99, 3.25);
});

test('bench/ imports nothing from test/ and has no import cycles', () => {
  const graph = benchImports();
  assert.ok(graph.has('bench/run.ts') && graph.size > 5);
  for (const [file, deps] of graph) {
    for (const dep of deps) assert.ok(!dep.startsWith('test/'), `${file} imports ${dep}`);
  }
  const state = new Map<string, 'open' | 'done'>();
  const visit = (file: string, path: string[]): void => {
    if (state.get(file) === 'done') return;
    assert.notEqual(state.get(file), 'open', `import cycle: ${[...path.slice(path.indexOf(file)), file].join(' -> ')}`);
    state.set(file, 'open');
    for (const dep of graph.get(file) ?? []) if (graph.has(dep)) visit(dep, [...path, file]);
    state.set(file, 'done');
  };
  for (const file of graph.keys()) visit(file, []);
});

test('the cluster and scripts shared by bench/ and test/ import neither; the test helpers import nothing from bench/', () => {
  const scripts = benchImports(join(ROOT, 'scripts'));
  assert.ok(scripts.has('scripts/postgres-cluster.ts'));
  for (const [file, deps] of scripts) {
    for (const dep of deps) assert.ok(!/^(bench|test)\//.test(dep), `${file} imports ${dep}`);
  }
  const helpers = benchImports(join(ROOT, 'test', 'helpers'));
  assert.ok(helpers.has('test/helpers/postgres.ts'));
  for (const [file, deps] of helpers) {
    for (const dep of deps) assert.ok(!dep.startsWith('bench/'), `${file} imports ${dep}`);
  }
});

test('bench results are git-ignored and none is tracked', (t) => {
  const git = (...args: string[]) => spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
  if (git('rev-parse', '--is-inside-work-tree').stdout.trim() !== 'true') return t.skip('not a git checkout');
  assert.equal(git('check-ignore', '-q', 'bench/results/bench-x.json').status, 0, 'bench/results/ is ignored');
  assert.equal(git('ls-files', 'bench/results').stdout, '', 'no tracked file under bench/results/');
});

test("the bench tools run on today's schema: store-write and experiments/canonical-fanout, tiny sizes", () => {
  const node = (...args: string[]) => execFileSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', env: { ...process.env, LECTERN_LOG_LEVEL: 'silent' }, timeout: 60_000 });
  const writes = node('bench/store-write.ts', '400', '100', '2', 'sqlite');
  assert.match(writes, /^sqlite\s+[\d,]+ statements\/s/m);
  const fanout = node('bench/experiments/canonical-fanout.ts', 'sqlite', '2', '20');
  assert.match(fanout, /^sqlite mine: canonical 200 .*other client's limit=1 200/m);
  assert.match(fanout, /^sqlite reader: canonical 200 .*other client's limit=1 200/m);
});

test('the bench refuses a query window that is not a positive number of seconds, before it starts anything', () => {
  for (const bad of ['0', 'two']) {
    const r = spawnSync(process.execPath, ['bench/run.ts', '--quick', '--query-seconds', bad], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--query-seconds takes a number of seconds above 0/);
  }
});

test('every bench file the docs name exists, and CI runs the smoke run after the tests', () => {
  const pages = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  let named = 0;
  for (const page of pages) {
    for (const [path] of readFileSync(join(ROOT, page), 'utf8').matchAll(/\bbench\/[\w./-]+\.(?:ts|js)\b/g)) {
      named++;
      assert.ok(existsSync(join(ROOT, path)), `${page} names ${path}`);
    }
  }
  assert.ok(named > 5);
  const last = readFileSync(join(ROOT, '.ci/run'), 'utf8').trim().split('\n').at(-1) ?? '';
  assert.match(last, /npm test && npm run bench -- --quick --check/);
});

for (const backend of BACKENDS.filter((b) => b.name !== 'sqlite-threads')) {
  test(`${backend.name}: the bench's plans phase explains a page reached by its \`more\` cursor`, async () => {
    const t = await startTestLrs(backend);
    try {
      const batch = Array.from({ length: 30 }, (_, i) => statement(SEED, i));
      assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', batch))).status, 200);
      const first = (await (await t.fetch('/xAPI/statements?limit=10')).json()) as { more: string };
      assert.ok(first.more);
      const cases = [
        { name: 'plain', params: {} },
        { name: 'plain (page 2)', params: paramsOf(first.more) },
      ];
      const plans = backend.name === 'postgres' ? await postgresPlans(t.env.LECTERN_POSTGRES_URL, cases) : sqlitePlans(t.env.LECTERN_SQLITE_PATH, cases);
      // The page query reads one row past the limit (to know whether there is a next page): 10 + 1 after the cursor.
      assert.deepEqual(
        plans.map((p) => [p.name, p.rows]),
        [
          ['plain', 30],
          ['plain (page 2)', 11],
        ],
      );
    } finally {
      await t.close();
    }
  });
}

test('a kept PostgreSQL cluster (bench --keep) survives its process and opens again elsewhere (bench --reuse)', { skip: postgresSkipped() }, async () => {
  const at = join(mkdtempSync(join(tmpdir(), 'lectern-kept-')), 'postgres');
  chmodSync(dirname(at), 0o755); // as root the cluster runs as another user, who must reach it
  try {
    const kept = await startCluster({ at });
    await pgQuery(kept.url, 'CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)');
    kept.destroy();
    assert.ok(existsSync(join(at, 'data', 'PG_VERSION')), 'the data directory stays');
    assert.ok(!existsSync(join(at, 'data', 'postmaster.pid')), 'stopped cleanly');
    await assert.rejects(startCluster({ at }), /not empty/);
    // Moved: its postgresql.conf still names the old socket folder, which is gone.
    const moved = join(dirname(at), 'moved');
    renameSync(at, moved);
    const reopened = await openCluster(moved);
    try {
      assert.deepEqual(await pgQuery(reopened.url, 'SELECT n FROM kept'), [{ n: 42 }]);
    } finally {
      reopened.destroy();
    }
    assert.ok(existsSync(join(moved, 'data', 'PG_VERSION')));
  } finally {
    rmSync(dirname(at), { recursive: true, force: true });
  }
});
