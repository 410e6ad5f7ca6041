/** The console's admin pages: the stores (the operator's switcher) and Access (./pages.ts has the frame and the escaping). */
import { XAPI_SCOPES } from '../../auth/scopes.ts';
import type { AuthUser } from '../../auth/types.ts';
import type { CredentialInfo, FileUser } from '../../ops/admin/credentials.ts';
import type { ErasureReport } from '../../ops/erase.ts';
import type { AuditEntry, StoreSummary } from '../../store/types.ts';
import { type Html, html, page, type PageContext, storeName } from './pages.ts';
import { agentLabel } from './views.ts';

/** The scopes the create form offers; `admin` only to an operator (checkGrantable refuses it to a store administrator). */
export const GRANTABLE: readonly string[] = [...XAPI_SCOPES, 'admin/store', 'admin'];

/** A key this short (a generated one has 19 characters) is shown unbroken; a longer one may break anywhere. */
const TOKEN_MAX = 24;
const keyCode = (key: string): Html => html`<code${key.length < TOKEN_MAX ? html` class="token"` : ''}>${key}</code>`;

const when = (iso: string | undefined | null): string => (iso ? iso.replace('T', ' ').replace(/\.\d+/, '').replace(/Z$/, ' UTC') : '');

/** A time in a table's cell: its date unbroken (a narrow column breaks between date and time, never inside the date). */
function whenCell(iso: string | undefined | null, none = ''): Html | string {
  const [date, ...time] = when(iso).split(' ');
  return date ? html`<span class="token">${date}</span> ${time.join(' ')}` : none;
}

export function storesPage(ctx: PageContext, v: { stores: StoreSummary[]; operator: boolean; next?: string }): string {
  const current = ctx.session!.store;
  const main = html`<h1>Stores</h1>
<p class="context">The console works in one store at a time: now the ${storeName(current)}.</p>
<form method="post" action="/console/store" class="card filters" aria-label="Switch store">
  <input type="hidden" name="csrf" value="${ctx.session!.csrf}">
  <input type="hidden" name="next" value="${v.next ?? '/console/statements'}">
  <div class="field"><label for="f-store">Store</label>
  <input id="f-store" name="store" list="store-names" value="${current}" aria-describedby="h-store">
  <small id="h-store" class="hint">A store’s name (its credentials’ target); empty for the default store. A store without statements yet may be named too.</small>
  <datalist id="store-names">${v.stores.map((s) => html`<option value="${s.target}"></option>`)}</datalist></div>
  <div class="actions"><button type="submit" class="primary">Work in this store</button></div>
</form>
<table class="list">
<caption>Stores with statements or documents</caption>
<thead><tr><th scope="col">Store</th><th scope="col">Statements</th><th scope="col">Documents</th><th scope="col">Last statement</th><th scope="col">Switch</th></tr></thead>
<tbody>${v.stores.map(
    (
      s,
    ) => html`<tr><td data-label="Store">${s.target === '' ? html`<em>default</em>` : s.target}</td><td data-label="Statements">${s.statements}</td><td data-label="Documents">${s.documents}</td>
<td data-label="Last statement">${s.lastStoredMs === null ? '—' : whenCell(new Date(s.lastStoredMs).toISOString())}</td>
<td data-label="Switch">${s.target === current ? html`current` : html`<form method="post" action="/console/store" class="inline"><input type="hidden" name="csrf" value="${ctx.session!.csrf}"><input type="hidden" name="store" value="${s.target}"><input type="hidden" name="next" value="${v.next ?? '/console/statements'}"><button type="submit" aria-label="Work here: the ${storeName(s.target)}">Work here</button></form>`}</td></tr>`,
  )}</tbody>
</table>`;
  return page(ctx, 'Stores', 'stores', main);
}

export interface AccessView {
  credentials: CredentialInfo[];
  /** The keys the session's user may rotate or revoke (src/ops/admin/roles.ts, mayManageCredential): only those get the forms. */
  manageable: ReadonlySet<string>;
  /** The credentials file's users of the store (read-only here), or why the file cannot be read. */
  fileUsers: { users: FileUser[] } | { problem: string };
  audit: AuditEntry[];
  /** The audit list's next page, or ''. */
  more: string;
  error?: string;
}

function credentialState(c: CredentialInfo): string {
  if (c.revoked) return `revoked ${when(c.revoked)}`;
  if (c.expires && Date.parse(c.expires) <= Date.now()) return `expired ${when(c.expires)}`;
  return c.previousSecretUntil ? `active; the previous secret works until ${when(c.previousSecretUntil)}` : 'active';
}

/** The credentials of the working store, with the Rotate and Revoke forms where the actor may use them. */
function credentialsSection(store: string, v: AccessView, csrf: Html): Html {
  return html`<section aria-labelledby="credentials-title">
<h2 id="credentials-title">Credentials</h2>
${
  v.credentials.length
    ? html`<table class="list credentials">
<caption>Credentials in the ${storeName(store)}</caption>
<thead><tr><th scope="col">Key</th><th scope="col">Label</th><th scope="col">Scopes</th><th scope="col">Agent</th><th scope="col">Created</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col">State</th><th scope="col">Actions</th></tr></thead>
<tbody>${v.credentials.map(
        (c) => html`<tr data-key="${c.key}">
<td data-label="Key">${keyCode(c.key)}</td><td data-label="Label">${c.label}</td><td data-label="Scopes">${c.scopes.join(' ')}${c.validation ? html` <span class="badge">${c.validation}</span>` : ''}</td>
<td data-label="Agent">${agentLabel(c.agent)}</td><td data-label="Created">${whenCell(c.created)}</td><td data-label="Expires">${whenCell(c.expires, 'never')}</td>
<td data-label="Last used">${whenCell(c.lastUsed, 'never')}</td><td data-label="State">${credentialState(c)}</td>
<td data-label="Actions">${
          c.revoked
            ? ''
            : !v.manageable.has(c.key)
              ? html`<span class="hint">an administrator’s: the operator rotates or revokes it</span>`
              : html`<form method="post" action="/console/access/rotate" class="row-action">${csrf}<input type="hidden" name="key" value="${c.key}">
<label for="grace-${c.key}">Grace (s)</label> <input id="grace-${c.key}" name="grace" type="number" min="0" max="2592000" value="0" class="short" aria-describedby="h-grace">
<button type="submit" aria-label="Rotate ${c.key}">Rotate</button></form>
<form method="post" action="/console/access/revoke" class="row-action">${csrf}<input type="hidden" name="key" value="${c.key}"><button type="submit" class="danger" aria-label="Revoke ${c.key}">Revoke</button></form>`
        }</td>
</tr>`,
      )}</tbody>
</table>
<p class="hint" id="h-grace">Rotating gives a new secret; for the grace’s seconds the old one still works (up to 30 days).</p>`
    : html`<p class="empty">No credentials in the database for this store (the credentials file’s users are listed below).</p>`
}
</section>`;
}

/** The credentials file's users of the working store, beside the database credentials: read-only here, changed with `lectern auth`. */
function fileUsersSection(store: string, v: AccessView): Html {
  const f = v.fileUsers;
  return html`<section aria-labelledby="file-users-title">
<h2 id="file-users-title">Users of the credentials file</h2>
<p class="hint">HTTP Basic users kept in the server’s credentials file (<code>LECTERN_AUTH_FILE</code>), not in the database: listed here, changed with <code>lectern auth</code> on the server (a new password, scopes or store; the file is re-read when it changes). Their passwords are never shown.</p>
${
  'problem' in f
    ? html`<p class="error">The credentials file cannot be read: ${f.problem}</p>`
    : f.users.length
      ? html`<table class="list file-users">
<caption>Users of the credentials file in the ${storeName(store)}</caption>
<thead><tr><th scope="col">User</th><th scope="col">Scopes</th><th scope="col">Agent</th><th scope="col">Store</th><th scope="col">Kind</th></tr></thead>
<tbody>${f.users.map(
          (u) =>
            html`<tr data-user="${u.username}"><td data-label="User"><code>${u.username}</code></td><td data-label="Scopes">${u.scopes.join(' ')}${u.validation ? html` <span class="badge">${u.validation}</span>` : ''}</td><td data-label="Agent">${agentLabel(u.agent)}</td><td data-label="Store">${u.target === '' ? 'default' : u.target}</td><td data-label="Kind"><span class="badge">credentials file</span></td></tr>`,
        )}</tbody>
</table>`
      : html`<p class="empty">No user of the credentials file works in this store.</p>`
}
</section>`;
}

/** The form that creates a credential, offering the scopes the session's role may give. */
function createSection(operator: boolean, csrf: Html): Html {
  const offered = GRANTABLE.filter((sc) => sc !== 'admin' || operator);
  return html`<section aria-labelledby="create-title" class="card">
<h2 id="create-title">New credential</h2>
<form method="post" action="/console/access/create">
  ${csrf}
  <div class="grid">
  <div class="field"><label for="c-label">Label</label><input id="c-label" name="label" aria-describedby="h-label"><small id="h-label" class="hint">What it is for, e.g. “Moodle production”</small></div>
  <div class="field"><label for="c-agent">Agent</label><input id="c-agent" name="agent" required aria-describedby="h-agent"><small id="h-agent" class="hint">The authority of what it stores: an email address, or an Agent as JSON</small></div>
  <div class="field"><label for="c-key">Key</label><input id="c-key" name="key" aria-describedby="h-key"><small id="h-key" class="hint">Optional: generated when empty</small></div>
  <div class="field"><label for="c-expires">Expires</label><input id="c-expires" name="expires" aria-describedby="h-expires"><small id="h-expires" class="hint">Optional: a date (2027-01-31) or date-time with a zone</small></div>
  <div class="field"><label for="c-validation">Validation</label><select id="c-validation" name="validation"><option value="">The server’s</option><option value="strict">strict</option><option value="lax">lax</option></select></div>
  </div>
  <fieldset class="checks"><legend>Scopes</legend>
  ${offered.map((sc) => html`<div class="check"><input type="checkbox" id="c-scope-${sc}" name="scope.${sc}"${sc === 'statements/write' ? html` checked` : ''}><label for="c-scope-${sc}">${sc}</label></div>`)}
  </fieldset>
  <div class="actions"><button type="submit" class="primary">Create credential</button></div>
</form>
</section>`;
}

/** The audit list of the working store, newest first, with the link to older entries. */
function auditSection(store: string, v: AccessView): Html {
  return html`<section aria-labelledby="audit-title">
<h2 id="audit-title">Audit</h2>
${
  v.audit.length
    ? html`<table class="list audit">
<caption>Admin actions in the ${storeName(store)}, newest first</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Store</th><th scope="col">Details</th></tr></thead>
<tbody>${v.audit.map(
        (
          e,
        ) => html`<tr><td data-label="Time">${whenCell(e.time)}</td><td data-label="Who">${e.actor} <span class="hint">(${e.actorKind.replace('-', ' ')}, ${e.role}, ${e.via}, ${e.client})</span></td><td data-label="Action"><code class="token">${e.action}</code></td>
<td data-label="Store">${e.target === null ? 'every store' : e.target === '' ? 'default' : e.target}</td><td data-label="Details"><code>${JSON.stringify(e.details)}</code></td></tr>`,
      )}</tbody>
</table>
${v.more ? html`<p class="paging"><a href="${v.more}" rel="next">Older entries</a></p>` : ''}`
    : html`<p class="empty">No admin action recorded yet.</p>`
}
</section>`;
}

export function accessPage(ctx: PageContext, v: AccessView): string {
  const s = ctx.session!;
  const csrf = html`<input type="hidden" name="csrf" value="${s.csrf}">`;
  const main = html`<h1>Access</h1>
<p class="context">Credentials of the ${storeName(s.store)} (HTTP Basic: key and secret in the database; users of the credentials file), and what administrators changed. Secrets are shown once, when created or rotated.</p>
${v.error ? html`<p class="error" role="alert" id="access-error">${v.error}</p>` : ''}
${credentialsSection(s.store, v, csrf)}
${fileUsersSection(s.store, v)}
${createSection(s.role === 'operator', csrf)}
${auditSection(s.store, v)}`;
  return page(ctx, 'Access', 'access', main);
}

/** The page that shows a new secret, once: created or rotated. */
export function issuedPage(ctx: PageContext, c: CredentialInfo & { secret: string }, what: 'created' | 'rotated'): string {
  const main = html`<h1>Credential ${what}</h1>
<p class="context">In the ${storeName(c.target)}. Copy the secret now: it is not stored and will not be shown again.</p>
<dl class="person issued">
<dt>Key</dt><dd><code id="issued-key">${c.key}</code></dd>
<dt>Secret</dt><dd><code id="issued-secret">${c.secret}</code> <button type="button" data-copy="issued-secret">Copy the secret</button> <span role="status" aria-live="polite" data-copy-status="issued-secret"></span></dd>
<dt>Scopes</dt><dd>${c.scopes.join(' ')}</dd>
${c.previousSecretUntil ? html`<dt>Previous secret</dt><dd>works until ${when(c.previousSecretUntil)}</dd>` : ''}
</dl>
<p><a href="/console/access">Back to Access</a></p>`;
  return page(ctx, `Credential ${what}`, 'access', main);
}

/** The question before a revocation: the credential, what revoking does, and the form that does it. */
export function revokePage(ctx: PageContext, c: CredentialInfo): string {
  const main = html`<h1>Revoke <code>${c.key}</code>?</h1>
<p class="context">In the ${storeName(c.target)}. Nothing has changed yet.</p>
<dl class="person facts">
<dt>Label</dt><dd>${c.label || '—'}</dd>
<dt>Scopes</dt><dd>${c.scopes.join(' ')}</dd>
<dt>Agent</dt><dd>${agentLabel(c.agent)}</dd>
<dt>Last used</dt><dd>${when(c.lastUsed) || 'never'}</dd>
<dt>State</dt><dd>${credentialState(c)}</dd>
</dl>
<p>Revoking is for good: every client sending this key gets <code>401</code> from each server’s next credentials refresh, and the console sessions opened with it end. To replace its secret instead, rotate it.</p>
<form method="post" action="/console/access/revoke" class="card">
<input type="hidden" name="csrf" value="${ctx.session!.csrf}"><input type="hidden" name="key" value="${c.key}"><input type="hidden" name="confirm" value="yes">
<button type="submit" class="danger">Revoke for good</button>
</form>
<p><a href="/console/access">Cancel</a></p>`;
  return page(ctx, `Revoke ${c.key}`, 'access', main);
}

/** What identifies a person for the typed confirmation: its email address, OpenID, mbox_sha1sum or account name. */
export function confirmationText(agent: Record<string, unknown>): string {
  const account = agent.account as { name?: unknown } | undefined;
  const v = agent.mbox ?? agent.openid ?? agent.mbox_sha1sum ?? account?.name;
  return typeof v === 'string' ? v.replace(/^mailto:/i, '') : '';
}

export interface EraseView {
  agent: Record<string, unknown>;
  mode: 'erase' | 'pseudonymize';
  report: ErasureReport;
  error?: string;
}

/** The dry run's figures and the typed confirmation; after the run, what changed. */
export function erasePage(ctx: PageContext, v: EraseView): string {
  const r = v.report;
  const typed = confirmationText(v.agent);
  // Term and value side by side (dl.person), not the Overview's grid of cards (dl.figures).
  const figures = html`<dl class="person tally">
<dt>Statements</dt><dd id="n-statements">${r.statements}</dd>
${r.referring ? html`<dt>Of those, referring to them only</dt><dd>${r.referring}</dd>` : ''}
${r.attachments ? html`<dt>Attachments</dt><dd>${r.attachments}</dd>` : ''}
<dt>Documents</dt><dd id="n-documents">${r.documents}</dd>
<dt>Kept rejections</dt><dd id="n-rejections">${r.rejections ?? 0}</dd>
</dl>`;
  const verb = v.mode === 'erase' ? 'Erase' : 'Pseudonymize';
  const main = r.dryRun
    ? html`<h1>${verb} ${typed}: dry run</h1>
<p class="context">In the ${storeName(r.target)}. Nothing has changed yet. This would ${v.mode === 'erase' ? 'delete' : 'pseudonymize'}:</p>
${figures}
${v.error ? html`<p class="error" role="alert" id="erase-error">${v.error}</p>` : ''}
<form method="post" action="/console/learner/erase" class="card">
<input type="hidden" name="csrf" value="${ctx.session!.csrf}"><input type="hidden" name="agent" value="${JSON.stringify(v.agent)}"><input type="hidden" name="mode" value="${v.mode}"><input type="hidden" name="run" value="yes">
<div class="field"><label for="confirm">Type <code>${typed}</code> to confirm</label>
<input id="confirm" name="confirm" autocomplete="off" required aria-describedby="h-confirm"${v.error ? html` aria-invalid="true"` : ''}><small id="h-confirm" class="hint">This cannot be undone.</small></div>
<button type="submit" class="danger">${verb} for good</button>
</form>
<p><a href="/console/learner?agent=${encodeURIComponent(JSON.stringify(v.agent))}">Cancel</a></p>`
    : html`<h1>${v.mode === 'erase' ? 'Erased' : 'Pseudonymized'}</h1>
<p class="context" role="status">${typed}, in the ${storeName(r.target)}${r.complete ? '' : ' (stopped before the end: run it again)'}:</p>
${figures}
<p><a href="/console/learner">Learner</a></p>`;
  return page(ctx, `${verb} a learner`, 'learner', main);
}

/** A word for a shell: quoted unless it is plain. */
const shellWord = (v: string): string => (/^[\w@%+=:,./-]+$/.test(v) ? v : `'${v.replaceAll("'", "'\\''")}'`);

/** The options of `lectern auth` and `lectern credentials create` that give `user` again, with `scope` added. */
function userOptions(user: AuthUser, scope: string): string[] {
  const a = user.agent;
  const agent = a.mbox ? ['-M', a.mbox] : a.mbox_sha1sum ? ['-S', a.mbox_sha1sum] : a.openid ? ['-O', a.openid] : a.account ? ['-A', a.account.name, a.account.homePage] : [];
  return [
    ...[...user.scopes.filter((sc) => sc !== scope), scope].flatMap((sc) => ['-s', sc]),
    ...agent,
    ...(a.name ? ['-N', a.name] : []),
    ...(user.target ? ['-t', user.target] : []),
    ...(user.validation ? ['--validation', user.validation] : []),
  ];
}

export interface NotAllowedView {
  /** The page or action refused, e.g. "The Access page". */
  what: string;
  user: AuthUser;
  /** What the user signed in with (src/auth/basic.ts credentialKind): how its scopes change. */
  kind: 'file' | 'database' | 'token';
  /** The scope that would open it; undefined when none can (a store's user on the operator's page). */
  scope?: string;
  need: 'admin' | 'operator';
}

/** How `v.user` gets `v.scope`: the command for its kind of credential, or what to ask of the identity provider. */
function grantAdvice(v: NotAllowedView & { scope: string }): Html {
  const options = userOptions(v.user, v.scope).map(shellWord).join(' ');
  if (v.kind === 'token') {
    return html`<p>An OpenID Connect sign-in’s scopes are its token’s: have the identity provider grant <code>${v.scope}</code> to ${v.user.username} in the token’s scope claim, and add it to <code>LECTERN_CONSOLE_OIDC_SCOPES</code> so that the console asks for it. Then sign in again.</p>`;
  }
  const [how, command, after] =
    v.kind === 'file'
      ? [
          html`${v.user.username} is a user of the credentials file (<code>LECTERN_AUTH_FILE</code>): on the server, write its entry again with the scope added`,
          `lectern auth -u ${shellWord(v.user.username)} ${options} -w`,
          'It asks for the password (the same one keeps it). The change ends this session: then sign in again.',
        ]
      : [
          html`${v.user.username} is a credential kept in the database, whose scopes do not change: create one with the scope added (on the server, or by the operator on the Access page)`,
          `lectern credentials create ${options} --label ${shellWord(`${v.user.username} with ${v.scope}`)}`,
          `Sign in with the new key and secret; revoke ${v.user.username} once nothing uses it.`,
        ];
  return html`<p>To grant it, ${how}:</p>
<pre class="command" tabindex="0" aria-label="The command that grants the ${v.scope} scope"><code>${command}</code></pre>
<p class="hint">${after}</p>`;
}

/** The 403 of an admin page: which scope is missing, and the command that grants it. */
export function notAllowedPage(ctx: PageContext, v: NotAllowedView): string {
  const scope = v.scope;
  const why = scope
    ? html`${v.what} needs the <code>${scope}</code> scope, which ${v.user.username} does not hold${v.need === 'operator' ? ': it concerns every store, and is the operator’s (the admin scope, held by a user of the default store)' : scope === 'admin' ? ' (in the default store, it makes the operator: every admin page of every store)' : ' (the administrator of its own store)'}.`
    : html`${v.what} is the operator’s: it concerns every store, and the operator is a user of the default store holding <code>admin</code>. ${v.user.username} works in the ${storeName(v.user.target)}, whose users never reach other stores.`;
  const main = html`<h1>Not allowed</h1>
<p class="error" role="alert">${why}</p>
${scope ? grantAdvice({ ...v, scope }) : ''}
<p><a href="/console">Back to the console</a></p>`;
  return page(ctx, 'Not allowed', 'statements', main);
}
