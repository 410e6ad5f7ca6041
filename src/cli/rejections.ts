/**
 * `lectern rejections list|show|replay|clear`: the refused writes the server keeps
 * (src/ops/rejections.ts, docs/rejections.md), read and mended from the command line.
 */
import { clearRejections, listRejections, replayRejections, replaySettings, replaySummary, showRejection } from '../ops/rejections.ts';
import { checkValidation } from '../ops/credentials.ts';
import type { KeptRejection, Store } from '../store/types.ts';
import type { Config } from '../config.ts';
import { parseTimestamp } from '../xapi/validate/syntax.ts';
import { openCliStore } from './datafiles.ts';
import { CliError } from './errors.ts';
import { interruptible } from './progress.ts';

interface StoreOptions {
  backend?: string;
  target?: string;
}

async function withStore<T>(opts: StoreOptions, fn: (store: Store, config: Config) => Promise<T>): Promise<T> {
  const { config, store } = await openCliStore(opts.backend);
  try {
    return await fn(store, config);
  } finally {
    await store.close();
  }
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

export async function rejectionsList(opts: StoreOptions & { json?: boolean; since?: string; reason?: string; limit?: string }): Promise<void> {
  let since: Date | undefined;
  if (opts.since !== undefined) {
    const ms = parseTimestamp(opts.since);
    if (ms === undefined) throw new CliError(`--since must be an ISO 8601 timestamp, e.g. 2026-01-31T00:00:00Z, not ${JSON.stringify(opts.since)}`);
    since = new Date(ms);
  }
  const limit = opts.limit === undefined ? undefined : Number(opts.limit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit > 0)) throw new CliError('--limit must be a positive integer');
  await withStore(opts, async (store, config) => {
    const rows = await listRejections(store, { tenant: opts.target, since, reason: opts.reason, limit, keepDays: config.rejectionsKeepDays });
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(rows.map((r) => ({ ...printable(r), body: undefined })), null, 2)}\n`);
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
  await withStore(opts, async (store) => {
    process.stdout.write(`${JSON.stringify(printable(await showRejection(store, id)), null, 2)}\n`);
  });
}

export async function rejectionsReplay(ids: string[], opts: StoreOptions & { all?: boolean; validation?: string; json?: boolean }): Promise<void> {
  if (opts.all && ids.length) throw new CliError('give rejection ids or --all, not both');
  if (!opts.all && !ids.length) throw new CliError('give the ids of the rejections to replay (`lectern rejections list`), or --all');
  const validation = checkValidation(opts.validation);
  const stop = interruptible();
  try {
    await withStore(opts, async (store, config) => {
      const results = await replayRejections(store, {
        ids,
        all: opts.all,
        tenant: opts.target,
        validation,
        ...replaySettings(config),
        signal: stop.signal,
      });
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
        return;
      }
      const lines = results.map((r) =>
        r.outcome === 'stored'
          ? `${r.id} stored`
          : r.outcome === 'refused'
            ? `${r.id} refused again (${r.status}): ${r.reasons!.map((x) => `${x.loc.join('.') || '(request)'}: ${x.msg}`).join('; ')}`
            : `${r.id} not replayable: its body was not kept whole (LECTERN_REJECTIONS_MAX_BODY)`,
      );
      const n = replaySummary(results);
      lines.push(`replayed ${n.replayed}: ${n.stored} stored and removed, ${n.refused} refused again (kept with their new reasons), ${n.notReplayable} not replayable`);
      process.stdout.write(`${lines.join('\n')}\n`);
    });
  } finally {
    stop.dispose();
  }
}

export async function rejectionsClear(opts: StoreOptions): Promise<void> {
  await withStore(opts, async (store) => {
    const n = await clearRejections(store, opts.target);
    process.stdout.write(`removed ${n} kept rejection${n === 1 ? '' : 's'}${opts.target === undefined ? '' : ` of the store ${storeName(opts.target)}`}\n`);
  });
}
