/**
 * The admin actions on kept rejections (docs/rejections.md): list, show, replay and clear, each in
 * the store the actor reaches. A replay sends each kept body through the path a new request takes,
 * under the kept writer's store, authority and access, and only while that writer still holds the
 * grant it wrote with (writerCheck): a revoked key's refused writes are not left armed for whoever
 * replays them later. An explicit override replays those too, and its audit entry says so.
 */
import { randomUUID } from 'node:crypto';
import { readCredentialsFile, type CredentialEntry } from '../../auth/credentials.ts';
import { credentialUser, sameUser } from '../../auth/database.ts';
import type { AuthUser } from '../../auth/types.ts';
import { authBackends } from '../../config.ts';
import { LrsError } from '../../errors.ts';
import type { KeptRejection, RejectionReason } from '../../store/types.ts';
import type { ValidationMode } from '../../xapi/accept.ts';
import { parseParams } from '../../xapi/params.ts';
import { negotiate } from '../../xapi/versions.ts';
import { writeDocument } from '../documents.ts';
import { OpsError } from '../errors.ts';
import type { OnProgress } from '../progress.ts';
import * as kept from '../rejections.ts';
import { receiveStatements, storeStatements, validationOf } from '../statements.ts';
import { type AdminActor, type AdminContext, changeAudit, listedStore, reachableStore, recordAudit, requireOperator } from './roles.ts';

/** The most kept rejections one page of the admin API lists. */
export const REJECTION_PAGE_MAX = 1000;

/** Kept rejections, oldest first (at most `limit`, default 1,000): an operator's of every store (or `target`'s), a store administrator's of its own. */
export function listRejections(ctx: AdminContext, by: AdminActor, input: { target?: string; since?: Date; reason?: string; limit?: number }): Promise<KeptRejection[]> {
  const { since, reason, limit } = input;
  return kept.listRejections(ctx.store, { tenant: listedStore(by.role, input.target), since, reason, limit, keepDays: ctx.config.rejectionsKeepDays, clock: ctx.clock });
}

/**
 * One kept rejection, with its body, in reach: a store administrator's own store's; with `target`
 * (the store the caller works in), that store's only. Any other is the 404 an unknown id gets.
 */
export async function showRejection(ctx: AdminContext, by: AdminActor, input: { id: string; target?: string }): Promise<KeptRejection> {
  const r = await kept.showRejection(ctx.store, input.id);
  const store = listedStore(by.role, input.target);
  if (store !== undefined && r.tenant !== store) throw new OpsError(`no kept rejection with id ${input.id}`, 'not_found');
  return r;
}

/** Removes the kept rejections of one store (a store administrator: its own), or with `all` (the operator's) of every store; audited. */
export async function clearRejections(ctx: AdminContext, by: AdminActor, input: { target?: string } | { all: true }): Promise<number> {
  const all = 'all' in input;
  if (all) requireOperator(by.role, "clearing every store's rejections");
  const tenant = all ? undefined : reachableStore(by.role, input.target);
  return kept.clearRejections(ctx.store, tenant, changeAudit(ctx, by, 'rejections.clear', tenant ?? null, { ...(all && { all: true }) }, 'cleared'));
}

export interface ReplayInput {
  /** The rejections to replay (each must be in reach; one listed twice is replayed once), or `all` of `target`'s (an operator without target: every store's). */
  ids?: string[];
  all?: boolean;
  target?: string;
  /** Replay under this validation mode instead of the writer's. */
  validation?: ValidationMode;
  /** Replay too those whose writer no longer holds the grant it wrote with (the audit entry records it). */
  overrideWriter?: boolean;
  signal?: AbortSignal;
  onProgress?: OnProgress<'replay', { stored: number }>;
}

export interface ReplayResult {
  id: string;
  /**
   * stored: accepted and removed from the list; refused: kept with its new reasons;
   * not_replayable: its body was not kept whole; skipped: its writer no longer holds its grant (kept as it was);
   * claimed: another replay under way holds it (or has just replayed it): left to that one.
   */
  outcome: 'stored' | 'refused' | 'not_replayable' | 'skipped' | 'claimed';
  status?: number;
  reasons?: RejectionReason[];
  /** Why its writer no longer holds the grant it wrote with: why it was skipped, or what the override replayed it despite. */
  writer?: string;
}

export interface ReplaySummary {
  /** stored + refused + notReplayable: the ones sent through the write path (or found unable to be). */
  replayed: number;
  stored: number;
  refused: number;
  notReplayable: number;
  skipped: number;
  claimed: number;
}

export type Replayed = { results: ReplayResult[] } & ReplaySummary;

function summary(results: ReplayResult[]): ReplaySummary {
  const count = (o: ReplayResult['outcome']) => results.filter((r) => r.outcome === o).length;
  const [stored, refused, notReplayable, skipped, claimed] = [count('stored'), count('refused'), count('not_replayable'), count('skipped'), count('claimed')];
  return { replayed: stored + refused + notReplayable, stored, refused, notReplayable, skipped, claimed };
}

/** Rejections claimed, replayed and settled at a time. */
const PAGE = 500;
/** How long a replay holds what it claimed without renewing the claim: a replay killed mid-way holds it no longer. */
const CLAIM_MS = 60_000;

/** The ids asked, each once (the first time it is listed), or undefined for all. */
function askedIds(input: ReplayInput): string[] | undefined {
  if (input.all === (input.ids !== undefined && input.ids.length > 0)) {
    throw new OpsError('choose the rejections to replay (their ids), or all of them (not both)', 'bad_request', 'ids');
  }
  return input.all ? undefined : [...new Set(input.ids)];
}

/**
 * The rejections a replay concerns, in pages: those of `ids`, every one checked to be in reach
 * before anything is replayed (here), or all of the store's (every store's), read as it goes.
 */
async function replayPages(ctx: AdminContext, by: AdminActor, input: ReplayInput, ids: string[] | undefined): Promise<AsyncGenerator<KeptRejection[]>> {
  if (ids) {
    const found: KeptRejection[] = [];
    for (const id of ids) found.push(await showRejection(ctx, by, { id, target: input.target }));
    return (async function* () {
      for (let i = 0; i < found.length; i += PAGE) yield found.slice(i, i + PAGE);
    })();
  }
  const tenant = listedStore(by.role, input.target);
  const sinceMs = ctx.clock.now() - ctx.config.rejectionsKeepDays * kept.DAY_MS;
  return (async function* () {
    for (let afterId: string | undefined; ; ) {
      const page = await ctx.store.listRejections({ tenant, sinceMs, afterId, limit: PAGE });
      if (page.length) yield page;
      if (page.length < PAGE) return;
      afterId = page[page.length - 1].id;
    }
  })();
}

/** A replay's hold on the rejections it replays (RejectionClaim): taken a page at a time, renewed while it runs. */
class ReplayClaim {
  readonly token = randomUUID();
  private readonly ctx: AdminContext;
  private untilMs = 0;

  constructor(ctx: AdminContext) {
    this.ctx = ctx;
  }

  /** Those of `ids` this replay now holds (the others are another's). */
  async take(ids: string[]): Promise<Set<string>> {
    const nowMs = this.ctx.clock.now();
    this.untilMs = nowMs + CLAIM_MS;
    return new Set(await this.ctx.store.claimRejections(ids, { token: this.token, untilMs: this.untilMs, nowMs }));
  }

  /** Renews the hold once half of it has passed. */
  async keep(): Promise<void> {
    const nowMs = this.ctx.clock.now();
    if (this.untilMs - nowMs > CLAIM_MS / 2) return;
    this.untilMs = nowMs + CLAIM_MS;
    await this.ctx.store.renewRejectionClaim(this.token, this.untilMs);
  }
}

/**
 * Replays kept rejections as new requests would be, under the settings where it runs; each one's
 * writer re-checked first (skipped, with the reason, unless `overrideWriter`). Each is claimed
 * before it is replayed, so that two replays at once never replay one rejection twice (the second
 * finds it `claimed`), and a statement sent without an id gets the one its rejection gives it
 * (replayedStatementId), so that a replay cut mid-way and run again stores nothing twice. Audited
 * when it starts (what was asked) and when it ends (what came of it, in the transaction that lets
 * go of its claims), even when interrupted (`signal`: stops after the rejection in hand) or failed.
 */
export async function replayRejections(ctx: AdminContext, by: AdminActor, input: ReplayInput): Promise<Replayed> {
  const ids = askedIds(input);
  const pages = await replayPages(ctx, by, input, ids);
  const target = listedStore(by.role, input.target) ?? null;
  const { validation, overrideWriter } = input;
  const asked = { ...(ids ? { ids } : { all: true }), ...(validation && { validation }), ...(overrideWriter && { overrideWriter: true }) };
  const started = await recordAudit(ctx, by, 'rejections.replay', target, { phase: 'start', ...asked });
  const claim = new ReplayClaim(ctx);
  const results: ReplayResult[] = [];
  const end = (how: Record<string, unknown>) => {
    const overridden = overrideWriter ? { overridden: results.filter((x) => x.writer !== undefined).length } : {};
    const details = { phase: 'end', startId: started.id, ...asked, ...overridden, ...summary(results), ...how };
    return ctx.store.releaseRejections(claim.token, changeAudit(ctx, by, 'rejections.replay', target, details));
  };
  input.onProgress?.({ type: 'start', phase: 'replay', ...(ids && { total: ids.length }) });
  try {
    await replayEach(ctx, input, pages, claim, results);
  } catch (err) {
    // What was stored stays stored: its end entry says so, and that the replay failed.
    await end({ failed: true }).catch(() => undefined);
    throw err;
  }
  input.onProgress?.({ type: 'end', phase: 'replay' });
  await end(input.signal?.aborted ? { interrupted: true } : {});
  return { results, ...summary(results) };
}

/** Claims each page, then replays the rejections it holds (the writer checked first), one at a time, into `results`. */
async function replayEach(ctx: AdminContext, input: ReplayInput, pages: AsyncGenerator<KeptRejection[]>, claim: ReplayClaim, results: ReplayResult[]): Promise<void> {
  const check = writerCheck(ctx);
  for await (const page of pages) {
    if (input.signal?.aborted) return;
    const mine = await claim.take(page.map((r) => r.id));
    for (const r of page) {
      if (input.signal?.aborted) return;
      if (!mine.has(r.id)) {
        results.push({ id: r.id, outcome: 'claimed' });
        continue;
      }
      await claim.keep();
      const writer = await check(r);
      const result: ReplayResult = writer && !input.overrideWriter ? { id: r.id, outcome: 'skipped' } : await replayOne(ctx, r, input.validation);
      results.push(writer ? { ...result, writer } : result);
      input.onProgress?.({ type: 'advance', phase: 'replay', done: results.length, stored: results.filter((x) => x.outcome === 'stored').length });
    }
  }
}

/** A kept rejection sent through the path a new request takes (the Statement resource's use case, or the document write). */
async function replayOne(ctx: AdminContext, r: KeptRejection, asked: ValidationMode | undefined): Promise<ReplayResult> {
  const resource = kept.KEPT_RESOURCES.get(r.path);
  const whole = r.body !== undefined && r.body.length === r.bodyBytes;
  if (!resource || (r.method !== 'DELETE' && !whole)) return { id: r.id, outcome: 'not_replayable' };
  const writer = JSON.parse(r.writer) as kept.KeptWriter;
  const { config, store } = ctx;
  const limits = { maxStatements: config.maxStatementsPerRequest, maxJsonValues: config.maxJsonValues, maxDocumentSize: config.maxDocumentSize };
  // The writer's mode as it was (else the server's), or the mode the replay asks for.
  const validation = asked ?? validationOf(writer, config.xapiValidation);
  try {
    const version = negotiate(r.version || undefined, config.xapiVersions);
    if (resource === 'statements') {
      const id = parseParams('statements', r.method, r.query).statementId as string | undefined;
      const received = receiveStatements(r.body, r.headers['content-type'], version, limits);
      if (r.method === 'PUT' && Array.isArray(received.value)) {
        throw new LrsError('bad_request', 'PUT stores a single statement: send an object, not an array (use POST for batches)');
      }
      const idOf = (i: number) => kept.replayedStatementId(r, i);
      await storeStatements(store, r.tenant, received, version, { authority: writer.agent, define: writer.define, mineOnly: writer.mineOnly, validation }, id, idOf);
    } else {
      await writeDocument(store, r.tenant, resource, { method: r.method as 'PUT' | 'POST' | 'DELETE', query: r.query, headers: r.headers, body: r.body, version }, limits);
    }
  } catch (err) {
    if (!(err instanceof LrsError)) throw err;
    const reasons = kept.reasonsOfError(r.path, err);
    await store.updateRejection(r.id, { status: err.status, reasons, atMs: ctx.clock.now() });
    return { id: r.id, outcome: 'refused', status: err.status, reasons };
  }
  await store.deleteRejections([r.id]);
  return { id: r.id, outcome: 'stored' };
}

const fileUser = (e: CredentialEntry): AuthUser => ({
  username: e.username,
  scopes: e.scopes,
  agent: { ...e.agent, objectType: 'Agent' },
  target: e.target ?? '',
  ...(e.validation && { validation: e.validation }),
});

/**
 * Whether a kept rejection's writer still holds the grant it wrote with (the same scopes, store,
 * agent and validation), as the server would let it sign in now: a credentials-file user still in
 * the file (it takes precedence over a database credential of its name), else a database
 * credential that exists, unrevoked and unexpired. Gives why not, or undefined when it does. A
 * token's subject cannot be checked again here, nor a rejection kept before writers were recorded.
 * One read of the file and one row per writer for a whole replay.
 */
function writerCheck(ctx: AdminContext): (r: KeptRejection) => Promise<string | undefined> {
  let file: Map<string, CredentialEntry> | Error | undefined;
  const answers = new Map<string, Promise<string | undefined>>();
  const check = async (r: KeptRejection): Promise<string | undefined> => {
    const w = JSON.parse(r.writer) as kept.KeptWriter;
    const name = JSON.stringify(r.username);
    if (w.signIn === 'token') return `its writer ${name} signed in with an OpenID Connect token, whose grant cannot be checked again here`;
    if (w.scopes === undefined) return 'it was kept before replays checked their writer: its grant cannot be checked again';
    if (!authBackends(ctx.config).includes('basic')) return `Basic authentication is not enabled here: its writer ${name} could not sign in`;
    const then: AuthUser = { username: r.username, scopes: w.scopes, agent: w.agent, target: r.tenant, ...(w.validation && { validation: w.validation }) };
    try {
      file ??= new Map(readCredentialsFile(ctx.config.authFile).map((e) => [e.username, e]));
    } catch (err) {
      file = err as Error;
    }
    if (file instanceof Error) return `the credentials file cannot be read, so its writer ${name} cannot be checked: ${file.message}`;
    const entry = file.get(r.username);
    if (entry) return sameUser(fileUser(entry), then) ? undefined : `the credentials file's user ${name} no longer has the grant it wrote with`;
    const row = await ctx.store.getCredential(r.username);
    if (!row) return `its writer ${name} is neither a user of the credentials file nor a database credential any more`;
    if (row.revokedMs !== undefined) return `its writer, the credential ${name}, is revoked`;
    if (row.expiresMs !== undefined && ctx.clock.now() >= row.expiresMs) return `its writer, the credential ${name}, has expired`;
    return sameUser(credentialUser(row), then) ? undefined : `its writer, the credential ${name}, no longer has the grant it wrote with (scopes, store, agent or validation)`;
  };
  return (r) => {
    const key = `${r.tenant}\0${r.username}\0${r.writer}`;
    let answer = answers.get(key);
    if (!answer) answers.set(key, (answer = check(r)));
    return answer;
  };
}
