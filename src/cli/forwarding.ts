/**
 * `lectern forwarding status|retry`: the forwarding outbox of the configured database, printed
 * and mended from the command line through the admin actions (src/ops/admin/forwarding.ts); a
 * retry is audited `via: cli`.
 */
import { forwardingStatus as status, retryDeadLetters } from '../ops/admin/forwarding.ts';
import type { AdminActor, AdminContext } from '../ops/admin/roles.ts';
import { withAdmin } from './datafiles.ts';
import { CliError } from './errors.ts';

interface StoreOptions {
  backend?: string;
  target?: string;
}

async function withStore<T>(opts: StoreOptions, fn: (ctx: AdminContext, by: AdminActor) => Promise<T>): Promise<T> {
  if (opts.target !== undefined) {
    throw new CliError(
      /^https?:\/\//.test(opts.target)
        ? `-t/--target names a store; name a forwarding target with --url ${opts.target}`
        : '-t/--target does not apply to forwarding: the outbox is shared by every store of the database',
    );
  }
  return withAdmin(opts.backend, fn);
}

export async function forwardingStatus(opts: StoreOptions & { json?: boolean }): Promise<void> {
  await withStore(opts, async (ctx, by) => {
    const rows = await status(ctx, by);
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

export async function forwardingRetry(opts: StoreOptions & { url?: string }): Promise<void> {
  await withStore(opts, async (ctx, by) => {
    const n = await retryDeadLetters(ctx, by, { url: opts.url });
    process.stdout.write(`re-queued ${n} dead letter${n === 1 ? '' : 's'}${opts.url ? ` of ${opts.url}` : ''}\n`);
  });
}
