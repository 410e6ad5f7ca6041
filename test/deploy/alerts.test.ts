/**
 * deploy/prometheus/lectern-alerts.yml: valid (`promtool check rules`), each alert firing on the
 * series of its unit test (`promtool test rules` on lectern-alerts.test.yml), and written against
 * metrics a running Lectern really serves on /metrics, so that the rules cannot drift from them;
 * and LecternDatabaseDown fires on what a real server's /metrics shows when its PostgreSQL stops.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { jsonInit, postgresAt, sqliteBackend, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { findPgBin, postgresSkipped, startCluster } from '../helpers/postgres.ts';
import { Receiver } from '../helpers/receiver.ts';
import { requireTool, run } from '../helpers/tools.ts';

const RULES = fileURLToPath(new URL('../../deploy/prometheus/lectern-alerts.yml', import.meta.url));
const RULE_TESTS = fileURLToPath(new URL('../../deploy/prometheus/lectern-alerts.test.yml', import.meta.url));
/** Series Prometheus makes itself, not Lectern. */
const PROMETHEUS_OWN = new Set(['up']);

test('promtool check rules accepts the alert rules', () => {
  const r = run(requireTool('promtool', 'prometheus'), ['check', 'rules', RULES]);
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /SUCCESS: 7 rules found/);
});

test('promtool test rules: each alert fires on its unit test series, and not before', () => {
  const r = run(requireTool('promtool', 'prometheus'), ['test', 'rules', RULE_TESTS]);
  assert.equal(r.status, 0, r.out);
  const rules = readFileSync(RULES, 'utf8');
  const tests = readFileSync(RULE_TESTS, 'utf8');
  for (const [, name] of rules.matchAll(/- alert: (\w+)/g)) {
    assert.ok(tests.includes(`alertname: ${name}\n        exp_alerts:\n          - exp_labels`), `no unit test fires ${name}`);
  }
});

test("every metric the rules use, and every label they match on, is on a running server's /metrics", async () => {
  const receiver = await new Receiver().listen();
  // Forwarding configured, so that its per-target series exist.
  const target = { is_active: true, url: receiver.url, basic_username: 'u', basic_password: 'p', max_retries: 1, timeout: 5 };
  const t = await startTestLrs(sqliteBackend, { env: { LECTERN_METRICS_ACCESS: 'open', LECTERN_XAPI_FORWARDINGS: JSON.stringify([target]) } });
  try {
    // A stored statement, a refused one, a heartbeat: the labelled series the rules read exist once used.
    assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', statement()))).status, 200);
    assert.equal((await t.fetch('/xAPI/statements', jsonInit('POST', { not: 'a statement' }))).status, 400);
    assert.equal((await t.fetch('/heartbeat', { user: null })).status, 200);
    const res = await t.fetch('/metrics', { user: null });
    assert.equal(res.status, 200);
    const exposition = await res.text();
    /** Metric name → the label names its samples carry. */
    const served = new Map<string, Set<string>>();
    for (const line of exposition.split('\n')) {
      const m = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? /.exec(line);
      if (!m) continue;
      const labels = served.get(m[1]!) ?? new Set<string>();
      for (const [, label] of (m[2] ?? '').matchAll(/(\w+)="/g)) labels.add(label!);
      served.set(m[1]!, labels);
    }
    const rules = readFileSync(RULES, 'utf8');
    const used = new Set([...rules.matchAll(/\b(lectern_\w+)/g)].map((m) => m[1]!));
    assert.ok(used.size >= 8, `the rules use ${[...used].join(', ')}`);
    for (const name of used) assert.ok(served.has(name), `${name} is in the alert rules but not on /metrics`);
    for (const [, name, matchers] of rules.matchAll(/\b(\w+)\{([^}]*)\}/g)) {
      if (PROMETHEUS_OWN.has(name!) || !name!.startsWith('lectern_')) continue;
      for (const [, label] of matchers!.matchAll(/(\w+)\s*=~?/g)) {
        if (label === 'job' || label === 'instance') continue; // added by Prometheus
        assert.ok(served.get(name!)?.has(label!), `${name} has no label ${label} on /metrics`);
      }
    }
  } finally {
    await t.close();
    await receiver.close();
  }
});

/** Samples of a /metrics text: `name{labels}` → value. */
function samples(exposition: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of exposition.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

// Its own cluster, stopped under the server (as test/postgres/fault.test.ts).
const skip = postgresSkipped() || (process.env.LECTERN_TEST_POSTGRES_URL && !findPgBin() ? 'needs initdb and pg_ctl to run its own server' : false);

test('LecternDatabaseDown fires on the /metrics of a server whose PostgreSQL stopped', { skip, timeout: 120_000 }, async () => {
  const cluster = await startCluster();
  let t: TestLrs | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'lectern-alerts-'));
  try {
    t = await startTestLrs(postgresAt(cluster.url, { LECTERN_POSTGRES_POOL_SIZE: '2', LECTERN_POSTGRES_CONNECT_TIMEOUT: '1000', LECTERN_METRICS_ACCESS: 'open' }));
    const scrape = async () => samples(await (await t!.fetch('/metrics', { user: null })).text());
    // Scraped once a minute in the unit test below: one healthy scrape, then six with the database gone.
    assert.equal((await t.fetch('/heartbeat', { user: null })).status, 200);
    const scrapes = [await scrape()];
    await cluster.stop('immediate');
    for (let i = 0; i < 6; i++) {
      assert.equal((await t.fetch('/heartbeat', { user: null })).status, 500);
      scrapes.push(await scrape());
    }
    const names = new Set(
      scrapes.flatMap((s) => [...s.keys()]).filter((k) => k.startsWith('lectern_db_query_duration_seconds_count') || k.startsWith('lectern_http_requests_total')),
    );
    assert.ok(
      [...names].some((k) => k.includes('outcome="error"')),
      'failed storage operations are counted',
    );
    const series = [...names].map((name) => {
      const labelled = name.includes('{') ? name.replace('{', '{job="lectern",instance="real:8100",') : `${name}{job="lectern",instance="real:8100"}`;
      const values = scrapes.map((s) => (s.has(name) ? String(s.get(name)) : '_')).join(' ');
      return `      - series: '${labelled}'\n        values: '${values}'`;
    });
    // The alert's annotations as the rules file renders them for this instance.
    const rules = readFileSync(RULES, 'utf8');
    const rule = rules.slice(rules.indexOf('- alert: LecternDatabaseDown'));
    const annotation = (key: string) => JSON.parse(new RegExp(`${key}: (".*")`).exec(rule)![1]!).replaceAll('{{ $labels.instance }}', 'real:8100') as string;
    const unitTest = [
      `rule_files: [${JSON.stringify(RULES)}]`,
      'evaluation_interval: 1m',
      'tests:',
      '  - interval: 1m',
      '    input_series:',
      ...series,
      '    alert_rule_test:',
      '      - eval_time: 6m',
      '        alertname: LecternDatabaseDown',
      '        exp_alerts:',
      '          - exp_labels: { severity: critical, job: lectern, instance: "real:8100" }',
      '            exp_annotations:',
      `              summary: ${JSON.stringify(annotation('summary'))}`,
      `              description: ${JSON.stringify(annotation('description'))}`,
    ].join('\n');
    writeFileSync(join(dir, 'database-down.test.yml'), unitTest);
    const r = run(requireTool('promtool', 'prometheus'), ['test', 'rules', join(dir, 'database-down.test.yml')]);
    assert.equal(r.status, 0, `${r.out}\n${unitTest}`);
  } finally {
    await t?.close().catch(() => {});
    cluster.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
});
