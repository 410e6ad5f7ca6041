/**
 * deploy/prometheus/lectern-alerts.yml: valid (`promtool check rules`), each alert firing on the
 * series of its unit test (`promtool test rules` on lectern-alerts.test.yml), and written against
 * metrics a running Lectern really serves on /metrics, so that the rules cannot drift from them.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { jsonInit, sqliteBackend, startTestLrs, statement } from '../helpers/lrs.ts';
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

test('every metric the rules use, and every label they match on, is on a running server\'s /metrics', async () => {
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
