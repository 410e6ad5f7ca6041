/**
 * `lectern rejections list|show|replay|clear`: the refused writes the server keeps
 * (docs/rejections.md), read and mended from the command line through the admin actions
 * (src/ops/admin/rejections.ts); replay and clear are audited `via: cli`.
 */
import { clearRejections, listRejections, type ReplayResult, replayRejections, showRejection } from '../ops/admin/rejections.ts';
import { checkValidation } from '../ops/credentials.ts';
import type { KeptRejection } from '../store/types.ts';
import { withAdmin } from './datafiles.ts';
import { CliError } from './errors.ts';
import { interruptible } from './progress.ts';

interface StoreOptions {
  backend?: string;
  target?: string;
}

const storeName = (tenant: string): string => (tenant === '' ? '(default)' : tenant);
const typesOf = (r: KeptRejection): string => [...new Set(r.reasons.map((x) => x.type))].join(',');

/** A rejection as printed: everything kept, the body as JSON when it parses (else its text). */
function printable(r: KeptRejection): Record<string, unknown> {
  const text = r.body?.toString('utf8');
  let body: unknown = text;
  try {
    if (text !== undefined) body = JSON.parse(text);
  } catch {
    // Cut or not JSON: its text.
  }
  return {
    id: r.id,
    time: new Date(r.atMs).toISOString(),
    store: r.tenant,
    user: r.username,
    method: r.method,
    path: r.path,
    query: r.query,
    status: r.status,
    reasons: r.reasons,
    headers: r.headers,
    version: r.version,
    bodyBytes: r.bodyBytes,
    bodyCut: r.body !== undefined && r.body.length < r.bodyBytes,
    body,
  };
}

/** `since`: epoch ms (the option reads it: ./options.ts, timeOption). */
export async function rejectionsList(opts: StoreOptions & { json?: boolean; since?: number; reason?: string; limit?: string }): Promise<void> {
  const since = opts.since === undefined ? undefined : new Date(opts.since);
  const limit = opts.limit === undefined ? undefined : Number(opts.limit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit > 0)) throw new CliError('--limit must be a positive integer');
  await withAdmin(opts.backend, async (ctx, by) => {
    const rows = await listRejections(ctx, by, { target: opts.target, since, reason: opts.reason, limit });
    if (opts.json) {
      process.stdout.write(
        `${JSON.stringify(
          rows.map((r) => ({ ...printable(r), body: undefined })),
          null,
          2,
        )}\n`,
      );
      return;
    }
    if (!rows.length) {
      process.stdout.write('no kept rejections\n');
      return;
    }
    const header = ['id', 'time', 'store', 'user', 'request', 'status', 'reasons'];
    const cells = rows.map((r) => [r.id, new Date(r.atMs).toISOString(), storeName(r.tenant), r.username, `${r.method} ${r.path}`, String(r.status), typesOf(r)]);
    const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
    const line = (c: string[]) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i]))).join('  ');
    process.stdout.write(`${[line(header), ...cells.map(line)].join('\n')}\n`);
  });
}

export async function rejectionsShow(id: string, opts: StoreOptions): Promise<void> {
  await withAdmin(opts.backend, async (ctx, by) => {
    process.stdout.write(`${JSON.stringify(printable(await showRejection(ctx, by, { id, target: opts.target })), null, 2)}\n`);
  });
}

/** What became of one replayed rejection, in a line. */
function replayLine(r: ReplayResult): string {
  const despite = r.writer && r.outcome !== 'skipped' ? ` (by --override-writer: ${r.writer})` : '';
  switch (r.outcome) {
    case 'stored':
      return `${r.id} stored${despite}`;
    case 'refused':
      return `${r.id} refused again (${r.status}): ${r.reasons!.map((x) => `${x.loc.join('.') || '(request)'}: ${x.msg}`).join('; ')}${despite}`;
    case 'not_replayable':
      return `${r.id} not replayable: its body was not kept whole (LECTERN_REJECTIONS_MAX_BODY)${despite}`;
    case 'skipped':
      return `${r.id} skipped: ${r.writer} (--override-writer replays it anyway)`;
    case 'claimed':
      return `${r.id} left to another replay under way (it holds it, or has just replayed it)`;
  }
}

export async function rejectionsReplay(ids: string[], opts: StoreOptions & { all?: boolean; validation?: string; overrideWriter?: boolean; json?: boolean }): Promise<void> {
  if (opts.all && ids.length) throw new CliError('give rejection ids or --all, not both');
  if (!opts.all && !ids.length) throw new CliError('give the ids of the rejections to replay (`lectern rejections list`), or --all');
  const validation = checkValidation(opts.validation);
  const stop = interruptible();
  try {
    await withAdmin(opts.backend, async (ctx, by) => {
      const input = { ids: opts.all ? undefined : ids, all: opts.all === true, target: opts.target, validation, overrideWriter: opts.overrideWriter === true, signal: stop.signal };
      const n = await replayRejections(ctx, by, input);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(n.results, null, 2)}\n`);
        return;
      }
      const lines = n.results.map(replayLine);
      const skipped = n.skipped ? `; ${n.skipped} skipped (their writer no longer holds the grant it wrote with)` : '';
      const claimed = n.claimed ? `; ${n.claimed} left to another replay under way` : '';
      lines.push(
        `replayed ${n.replayed}: ${n.stored} stored and removed, ${n.refused} refused again (kept with their new reasons), ${n.notReplayable} not replayable${skipped}${claimed}`,
      );
      process.stdout.write(`${lines.join('\n')}\n`);
    });
  } finally {
    stop.dispose();
  }
}

export async function rejectionsClear(opts: StoreOptions): Promise<void> {
  await withAdmin(opts.backend, async (ctx, by) => {
    const n = await clearRejections(ctx, by, opts.target === undefined ? { all: true } : { target: opts.target });
    process.stdout.write(`removed ${n} kept rejection${n === 1 ? '' : 's'}${opts.target === undefined ? '' : ` of the store ${storeName(opts.target)}`}\n`);
  });
}
