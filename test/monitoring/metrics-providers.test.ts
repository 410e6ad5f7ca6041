/** /metrics still renders when a forwarding figures provider fails (the database is down). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Metrics } from '../../src/monitoring/metrics.ts';

test('a failing forwarding provider leaves its figures out and the rest renders', async () => {
  const metrics = new Metrics();
  metrics.registerForwarding(async () => {
    throw new Error('connect ECONNREFUSED');
  });
  metrics.registerForwarding(() => [{ target: 'https://lrs.example.com/xAPI/statements', queued: 2, delivered: 5, retried: 1, dead: 0 }]);
  const text = await metrics.render();
  assert.match(text, /^lectern_forwarding_queued\{target="https:\/\/lrs\.example\.com\/xAPI\/statements"\} 2$/m);
  assert.match(text, /^process_resident_memory_bytes \d/m);
});
