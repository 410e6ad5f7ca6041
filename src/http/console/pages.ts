/**
 * The operator console's pages, rendered on the server as HTML (docs/console.md says why): every
 * value goes through `html`, which escapes it; the only script is the console's own asset
 * (assets/console.js), so the Content-Security-Policy allows no inline script or style.
 */
import type { AuthUser } from '../../auth/types.ts';

/** HTML text that is safe to insert as it is. */
export class Html {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c]);

type Part = Html | string | number | boolean | undefined | null | readonly Part[];
const render = (p: Part): string =>
  p instanceof Html ? p.text : Array.isArray(p) ? p.map(render).join('') : p === undefined || p === null || p === false ? '' : escapeHtml(String(p));

/** A template whose interpolated values are escaped (Html values and arrays of them are inserted as they are). */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Html(out);
}

/** URLs of the console's hashed assets. */
export interface AssetUrls {
  css: string;
  js: string;
}

export interface PageContext {
  assets: AssetUrls;
  /** Absent on the sign-in page. */
  session?: {
    user: AuthUser;
    csrf: string;
    /** The store the pages work in: the user's own, or the one an operator switched to. */
    store: string;
    /** The admin role (src/auth/scopes.ts adminRole), when the user has one. */
    role?: 'operator' | 'store';
  };
}

export type Section = 'overview' | 'statements' | 'learner' | 'access' | 'rejections' | 'forwarding' | 'stores' | 'sign-in';

/** The store a user works in, as the console names it. */
export const storeName = (target: string): string => (target === '' ? 'default store' : `store “${target}”`);

const navItem = (to: Section, label: string, section: Section) => html`<li><a href="/console/${to}"${section === to ? html` aria-current="page"` : ''}>${label}</a></li>`;

export function page(ctx: PageContext, title: string, section: Section, main: Html): string {
  const s = ctx.session;
  const nav = s
    ? html`<nav aria-label="Console">
  <ul class="nav">
    ${s.role ? navItem('overview', 'Overview', section) : ''}
    <li><a href="/console/statements"${section === 'statements' ? html` aria-current="page"` : ''}>Statements</a></li>
    <li><a href="/console/learner"${section === 'learner' ? html` aria-current="page"` : ''}>Learner</a></li>
    ${s.role ? [navItem('access', 'Access', section), navItem('rejections', 'Rejections', section)] : ''}
    ${s.role === 'operator' ? [navItem('forwarding', 'Forwarding', section), navItem('stores', 'Stores', section)] : ''}
  </ul>
</nav>
<div class="who">
  <span class="store" data-store="${s.store}">${storeName(s.store)}</span>${s.role === 'operator' ? html` <a href="/console/stores" class="switch">Switch store</a>` : ''}
  <span class="user">${s.user.username}</span>
  <form method="post" action="/console/sign-out" class="inline">
    <input type="hidden" name="csrf" value="${s.csrf}">
    <button type="submit">Sign out</button>
  </form>
</div>`
    : '';
  return `<!doctype html>
${
  html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
${s ? html`<meta name="csrf-token" content="${s.csrf}">` : ''}
<title>${title} · Lectern console</title>
<link rel="stylesheet" href="${ctx.assets.css}">
<script type="module" src="${ctx.assets.js}"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="/console">Lectern</a>
  ${nav}
</header>
<main id="main" tabindex="-1">
${main}
</main>
</body>
</html>`.text
}
`;
}

export function signInPage(ctx: PageContext, opts: { error?: string; notice?: string; username?: string; oidc: boolean; basic: boolean; next?: string }): string {
  const main = html`<h1>Sign in</h1>
${opts.notice ? html`<p class="notice" role="status">${opts.notice}</p>` : ''}
${opts.error ? html`<p class="error" role="alert" id="sign-in-error">${opts.error}</p>` : ''}
${
  opts.basic
    ? html`<form method="post" action="/console/sign-in" class="card sign-in"${opts.error ? html` aria-describedby="sign-in-error"` : ''}>
  <input type="hidden" name="next" value="${opts.next ?? ''}">
  <div class="field"><label for="username">Username</label>
  <input id="username" name="username" autocomplete="username" required value="${opts.username ?? ''}"${opts.username ? '' : html` autofocus`}></div>
  <div class="field"><label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required${opts.username ? html` autofocus` : ''}></div>
  <button type="submit" class="primary">Sign in</button>
</form>`
    : ''
}
${opts.oidc ? html`<p><a class="button" href="/console/oidc/start${opts.next ? `?next=${encodeURIComponent(opts.next)}` : ''}">Sign in with OpenID Connect</a></p>` : ''}`;
  return page(ctx, 'Sign in', 'sign-in', main);
}

export function errorPage(ctx: PageContext, title: string, detail: string, section: Section = 'statements'): string {
  return page(ctx, title, section, html`<h1>${title}</h1><p class="error" role="alert">${detail}</p><p><a href="/console">Back to the console</a></p>`);
}
