/**
 * `lectern credentials create|list|revoke|rotate`: credentials in the database of runserver's
 * settings, through the admin actions (src/ops/admin/credentials.ts), audited `via: cli`. create
 * and rotate print the secret, once; nothing else ever shows it.
 */
import { type CredentialInfo, createCredential, type IssuedCredential, listCredentials, revokeCredential, rotateCredential } from '../ops/admin/credentials.ts';
import { type AuthOptions, buildAgent } from './auth.ts';
import { withAdmin } from './datafiles.ts';
import { CliError } from './errors.ts';

interface Common {
  backend?: string;
  json?: boolean;
}

export interface CreateOptions extends Common {
  scope?: string[];
  target?: string;
  agentMbox?: string;
  agentMboxSha1sum?: string;
  agentOpenid?: string;
  agentAccount?: string[];
  agentName?: string;
  /** Epoch ms (the option reads it: ./options.ts, timeOption). */
  expires?: number;
  label?: string;
  validation?: string;
  key?: string;
}

const out = (text: string): void => void process.stdout.write(`${text}\n`);

function printIssued(c: IssuedCredential, json: boolean | undefined, what: string): void {
  if (json) {
    out(JSON.stringify(c, null, 2));
    return;
  }
  out(`key:    ${c.key}\nsecret: ${c.secret}`);
  const grace = c.previousSecretUntil ? `; the previous secret works until ${c.previousSecretUntil}` : '';
  process.stderr.write(`${what} credential ${c.key}${grace}. The secret is shown only now: Lectern keeps only its hash.\n`);
}

export async function createCommand(o: CreateOptions): Promise<void> {
  if (o.agentAccount !== undefined && o.agentAccount.length !== 2) throw new CliError('-A/--agent-account takes two values: NAME HOMEPAGE');
  const agentOptions: AuthOptions = {
    agentIfiMbox: o.agentMbox,
    agentIfiMboxSha1sum: o.agentMboxSha1sum,
    agentIfiOpenid: o.agentOpenid,
    agentIfiAccount: o.agentAccount,
    agentName: o.agentName,
  };
  const agent = buildAgent(agentOptions);
  await withAdmin(o.backend, async (ctx, by) => {
    const issued = await createCredential(ctx, by, {
      scopes: o.scope ?? [],
      agent,
      target: o.target,
      expires: o.expires === undefined ? undefined : new Date(o.expires).toISOString(),
      label: o.label,
      validation: o.validation,
      key: o.key,
    });
    printIssued(issued, o.json, 'created');
  });
}

/** The agent's identifier, short: `mailto:…`, `sha1:…`, the OpenID, `NAME@HOMEPAGE`. */
function agentText(c: CredentialInfo): string {
  const a = c.agent;
  return a.mbox ?? (a.mbox_sha1sum ? `sha1:${a.mbox_sha1sum}` : undefined) ?? a.openid ?? (a.account ? `${a.account.name}@${a.account.homePage}` : '');
}

function state(c: CredentialInfo, now: number): string {
  if (c.revoked) return `revoked ${c.revoked}`;
  if (c.expires && Date.parse(c.expires) <= now) return `expired ${c.expires}`;
  return 'active';
}

export async function listCommand(o: Common & { target?: string }): Promise<void> {
  await withAdmin(o.backend, async (ctx, by) => {
    const rows = (await listCredentials(ctx, by, { target: o.target })).credentials;
    if (o.json) return out(JSON.stringify(rows, null, 2));
    if (!rows.length) return out(o.target === undefined ? 'no credentials in the database' : `no credentials for the store ${JSON.stringify(o.target)}`);
    const now = Date.now();
    const header = ['key', 'target', 'scopes', 'agent', 'created', 'expires', 'last used', 'state', 'label'];
    const cells = rows.map((c) => [c.key, c.target, c.scopes.join(','), agentText(c), c.created, c.expires ?? '-', c.lastUsed ?? '-', state(c, now), c.label]);
    const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i].length)));
    for (const r of [header, ...cells])
      out(
        r
          .map((v, i) => (i === r.length - 1 ? v : v.padEnd(widths[i])))
          .join('  ')
          .trimEnd(),
      );
  });
}

export async function revokeCommand(key: string, o: Common): Promise<void> {
  await withAdmin(o.backend, async (ctx, by) => {
    const c = await revokeCredential(ctx, by, { key });
    if (o.json) return out(JSON.stringify(c, null, 2));
    out(`revoked credential ${c.key} (${c.revoked}): every server refuses it within LECTERN_AUTH_CREDENTIALS_REFRESH seconds`);
  });
}

export async function rotateCommand(key: string, o: Common & { grace?: string }): Promise<void> {
  const grace = o.grace === undefined ? undefined : /^\d+$/.test(o.grace) ? Number(o.grace) : Number.NaN;
  if (Number.isNaN(grace)) throw new CliError(`--grace takes a whole number of seconds, not ${JSON.stringify(o.grace)}`);
  await withAdmin(o.backend, async (ctx, by) => printIssued(await rotateCredential(ctx, by, { key, graceSeconds: grace }), o.json, 'rotated'));
}
