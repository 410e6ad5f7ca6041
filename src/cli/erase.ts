/**
 * `lectern erase --agent JSON`: removes one person from a store (GDPR art. 17) — every statement
 * in which they stand anywhere (src/xapi/erasure.ts), the statements that void or otherwise target
 * those (transitively), the attachments no remaining statement links, and their State and Agent
 * Profile documents. With `--pseudonymize`, replaces them by a keyed pseudonym instead, everywhere,
 * keeping the statements. Prints what it did (or, with --dry-run, would do) and appends an audit
 * line (what, when, how many; never who or what the data was) to LECTERN_AUDIT_FILE.
 */
import { appendFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import type { DocumentKey, Store, StatementRewrite } from '../store/types.ts';
import { actorFromKey, actorKeys, ifiKey } from '../xapi/agents.ts';
import { mentionsPerson, personKey, pseudonymFor, pseudonymizeStatement } from '../xapi/erasure.ts';
import { prepareStatement } from '../xapi/statement.ts';
import type { Actor, Statement } from '../xapi/types.ts';
import { statementRules } from '../xapi/versions.ts';
import { CliError } from './errors.ts';
import { openCliStore, parseAgentOption } from './datafiles.ts';
import { interruptible, Progress } from './progress.ts';

export interface EraseOptions {
  agent?: string;
  target?: string;
  backend?: string;
  dryRun?: boolean;
  pseudonymize?: boolean;
  /** Also print each statement id and document key. */
  list?: boolean;
  progressInterval?: string;
}

const PAGE = 1000;
const CHUNK = 500;

function parseAgent(raw: string | undefined): { actor: Actor; key: string } {
  if (raw === undefined) throw new CliError('--agent is required: the Agent (or identified Group) as JSON, e.g. \'{"mbox":"mailto:ben@example.com"}\'');
  const actor = parseAgentOption(raw, '--agent');
  return { actor, key: personKey(actor)! };
}

/** The person's State and Agent Profile documents (the key compared as personKey does). */
async function documentsOf(store: Store, tenant: string, key: string): Promise<DocumentKey[]> {
  const out: DocumentKey[] = [];
  let after: DocumentKey | undefined;
  for (;;) {
    const page = await store.scanDocuments(tenant, { after, limit: 500 });
    for (const d of page) if (d.key.kind !== 'activity_profile' && personKey(actorFromKey(d.key.agent)) === key) out.push(d.key);
    if (page.length < 500) return out;
    after = page[page.length - 1].key;
  }
}

interface Report {
  action: 'erase' | 'pseudonymize';
  dryRun: boolean;
  target: string;
  statements: number;
  /** Of `statements`: those that void or target an erased statement without naming the person. */
  referring?: number;
  attachments?: number;
  documents: number;
  complete: boolean;
}

export async function eraseCommand(opts: EraseOptions): Promise<void> {
  const { key } = parseAgent(opts.agent);
  const { config, store } = await openCliStore(opts.backend);
  const secret = config.pseudonymizeKey;
  if (opts.pseudonymize && secret === '') {
    await store.close();
    throw new CliError('--pseudonymize needs LECTERN_PSEUDONYMIZE_KEY (a secret of at least 16 characters, in the environment or .env)');
  }
  const tenant = opts.target ?? '';
  const dryRun = opts.dryRun === true;
  const stop = interruptible();
  const report: Report = { action: opts.pseudonymize ? 'pseudonymize' : 'erase', dryRun, target: tenant, statements: 0, documents: 0, complete: false };
  const ids: string[] = [];
  const listed: string[] = [];
  try {
    const total = await store.countStatements(tenant, {});
    const progress = new Progress({ label: opts.pseudonymize ? 'pseudonymize: scan' : 'erase: scan', unit: 'statements', total, intervalMs: Number(opts.progressInterval ?? 10) * 1000 });
    const pseudonym = opts.pseudonymize ? pseudonymFor(key, secret) : undefined;
    // One pass over the store in stored order: the person may stand where no index reaches
    // (SubStatement context, xAPI 2.0 context agents), so every statement is looked at.
    let after: string | undefined;
    let scanned = 0;
    for (;;) {
      if (stop.signal.aborted) break;
      const page = await store.scanStatements(tenant, { after, limit: PAGE });
      const rewrites: StatementRewrite[] = [];
      for (const row of page.rows) {
        const s = JSON.parse(row.json) as Statement & { id: string };
        if (!mentionsPerson(s, key)) continue;
        report.statements++;
        if (opts.list && pseudonym) listed.push(`statement ${s.id}`);
        if (!pseudonym) {
          ids.push(s.id);
          continue;
        }
        const next = pseudonymizeStatement(s, key, pseudonym);
        const p = prepareStatement(next, next.authority!, statementRules(next));
        rewrites.push({ id: s.id, json: JSON.stringify(next), agents: p.agents, authorityKey: next.authority ? (actorKeys(next.authority)[0] ?? null) : null });
      }
      if (rewrites.length && !dryRun) await store.rewriteStatements(tenant, rewrites);
      scanned += page.rows.length;
      progress.update(scanned, { extra: `${report.statements} ${pseudonym ? 'to pseudonymize' : 'naming the agent'}` });
      if (!page.next) break;
      after = page.next;
    }
    progress.finish();
    if (!stop.signal.aborted && !pseudonym) {
      // Statements voiding or targeting erased ones, layer by layer; deleted referrers first, so an
      // interrupted run leaves nothing that a re-run would no longer find.
      const layers: string[][] = [ids];
      const seen = new Set(ids);
      for (let layer = ids; layer.length; ) {
        const next: string[] = [];
        for (let i = 0; i < layer.length; i += CHUNK) {
          for (const id of await store.referringStatements(tenant, layer.slice(i, i + CHUNK))) {
            if (seen.has(id)) continue;
            seen.add(id);
            next.push(id);
          }
        }
        if (next.length) layers.push(next);
        layer = next;
      }
      if (opts.list) for (const id of seen) listed.push(`statement ${id}`);
      report.referring = seen.size - ids.length;
      report.statements = seen.size;
      report.attachments = 0;
      if (!dryRun) {
        const del = new Progress({ label: 'erase: delete', unit: 'statements', total: seen.size, intervalMs: Number(opts.progressInterval ?? 10) * 1000 });
        let deleted = 0;
        outer: for (const layer of layers.reverse()) {
          for (let i = 0; i < layer.length; i += CHUNK) {
            if (stop.signal.aborted) break outer;
            const r = await store.deleteStatements(tenant, layer.slice(i, i + CHUNK));
            deleted += r.statements;
            report.attachments += r.attachments;
            del.update(deleted);
          }
        }
        del.finish();
        report.statements = deleted;
      }
    }
    if (!stop.signal.aborted) {
      const docs = await documentsOf(store, tenant, key);
      report.documents = docs.length;
      if (opts.list) for (const d of docs) listed.push(`document ${JSON.stringify({ kind: d.kind, activityId: d.activityId || undefined, registration: d.registration || undefined, id: d.docId })}`);
      if (!dryRun && docs.length) {
        if (pseudonym) await store.moveDocuments(tenant, docs, ifiKey(pseudonym)!);
        else for (const d of docs) await store.deleteDocument(tenant, d, {});
      }
      report.complete = true;
    }
  } finally {
    stop.dispose();
    await store.close();
  }
  const verb = dryRun ? 'would' : '';
  const did = (past: string, present: string) => (dryRun ? `${verb} ${present}` : past);
  const lines = [
    opts.pseudonymize
      ? `${did('pseudonymized', 'pseudonymize')} the agent in ${report.statements} statements and ${report.documents} documents`
      : `${did('erased', 'erase')} ${report.statements} statements (${report.referring ?? 0} of them voiding or targeting the agent's statements), ` +
        `${dryRun ? 'their attachments no other statement uses' : `${report.attachments} attachments no other statement used`}, and ${report.documents} State/Agent Profile documents`,
  ];
  if (!report.complete) lines.push('interrupted before the end: run the same command again to finish (what is done stays done)');
  process.stdout.write(`${[...listed, ...lines].join('\n')}\n${JSON.stringify(report)}\n`);
  if (!dryRun) {
    // The audit trail: what, when, where, how many. Never the agent or any statement content.
    const audit = { time: new Date().toISOString(), command: `erase${opts.pseudonymize ? ' --pseudonymize' : ''}`, user: safeUser(), host: hostname(), ...report };
    appendFileSync(config.auditFile, `${JSON.stringify(audit)}\n`);
  }
  if (!report.complete) process.exitCode = 130;
}

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return '';
  }
}
