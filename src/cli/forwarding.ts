/**
 * `lectern forwarding status|retry`: the forwarding outbox of the configured database, read and
 * mended from the command line (safe while servers run on it).
 */
import { loadConfig } from '../config.ts';
import { openConfiguredStore } from '../ops/open-store.ts';
import type { ForwardingStats, Store } from '../store/types.ts';
import { CliError } from './auth.ts';

async function withStore<T>(fn: (store: Store, active: Set<string>) => Promise<T>): Promise<T> {
  const config = loadConfig();
  let store: Store;
  try {
    store = await openConfiguredStore(config);
  } catch (err) {
    throw new CliError(`cannot open the ${config.backend} database: ${(err as Error).message}`);
  }
  try {
    return await fn(store, new Set(config.xapiForwardings.filter((t) => t.isActive).map((t) => t.url)));
  } finally {
    await store.close();
  }
}

/** Every active target (even with nothing yet) and every target the outbox still holds items of. */
function allTargets(stats: ForwardingStats[], active: Set<string>): (ForwardingStats & { active: boolean })[] {
  const byTarget = new Map(stats.map((s) => [s.target, s]));
  for (const url of active) if (!byTarget.has(url)) byTarget.set(url, { target: url, queued: 0, delivered: 0, retried: 0, dead: 0 });
  return [...byTarget.values()].map((s) => ({ ...s, active: active.has(s.target) }));
}

export async function forwardingStatus(opts: { json?: boolean }): Promise<void> {
  await withStore(async (store, active) => {
    const rows = allTargets(await store.outbox.stats(), active);
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
      return;
    }
    if (!rows.length) {
      process.stdout.write('no forwarding targets (LECTERN_XAPI_FORWARDINGS) and nothing in the outbox\n');
      return;
    }
    const header = ['target', 'queued', 'delivered', 'retried', 'dead'];
    const cells = rows.map((r) => [r.active ? r.target : `${r.target} (not active)`, ...[r.queued, r.delivered, r.retried, r.dead].map(String)]);
    const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
    const line = (c: string[]) => c.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
    const out = [line(header), ...cells.map(line)];
    for (const r of rows) if (r.lastError) out.push(`last dead letter error of ${r.target}: ${r.lastError}`);
    process.stdout.write(`${out.join('\n')}\n`);
  });
}

export async function forwardingRetry(opts: { target?: string }): Promise<void> {
  await withStore(async (store, active) => {
    if (opts.target !== undefined && !active.has(opts.target) && !(await store.outbox.stats()).some((s) => s.target === opts.target)) {
      throw new CliError(`${opts.target} is not an active forwarding target and the outbox holds nothing for it`);
    }
    const n = await store.outbox.requeueDead(opts.target);
    process.stdout.write(`re-queued ${n} dead letter${n === 1 ? '' : 's'}${opts.target ? ` of ${opts.target}` : ''}\n`);
  });
}
