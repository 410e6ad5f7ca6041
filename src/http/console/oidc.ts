/**
 * Console sign-in through the OpenID provider: the authorization code flow with PKCE (RFC 7636).
 * The verifier, state and return path travel in a sealed, short-lived cookie (so any process
 * handles the callback); the access token received is checked by the same Authenticator as an API
 * request's bearer token, which gives the user (scopes and store) the session carries. The token
 * itself is not kept.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticator, AuthSuccess } from '../../auth/types.ts';
import type { Config } from '../../config.ts';
import { html } from './pages.ts';
import { cookie, OIDC_COOKIE, parseCookies, type Sealer } from './session.ts';

export interface ConsoleOidcDeps {
  config: Config;
  auth: Authenticator;
  sealer: Sealer;
  secure: (request: FastifyRequest) => boolean;
  safeNext: (next: string | undefined) => string;
  openSessionFor: (reply: FastifyReply, request: FastifyRequest, signed: AuthSuccess) => void;
  sendPage: (reply: FastifyReply, status: number, body: string) => FastifyReply;
  /** The sign-in page with an error. */
  page: (error: string) => string;
}

/** Seconds a sign-in may take at the provider. */
const FLOW_SECONDS = 600;
interface Flow {
  state: string;
  verifier: string;
  next: string;
  expires: number;
}

const b64url = (b: Buffer): string => b.toString('base64url');

export function registerConsoleOidc(app: FastifyInstance, deps: ConsoleOidcDeps): void {
  const { config, auth, sealer } = deps;
  let endpoints: Promise<{ authorization: string; token: string }> | undefined;
  const discover = () =>
    (endpoints ??= (async () => {
      const res = await fetch(`${config.oidcIssuerUri.replace(/\/$/, '')}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(10_000) });
      if (!res.ok) throw new Error(`discovery answered ${res.status}`);
      const d = (await res.json()) as { authorization_endpoint?: string; token_endpoint?: string };
      if (!d.authorization_endpoint || !d.token_endpoint) throw new Error('the provider names no authorization or token endpoint');
      return { authorization: d.authorization_endpoint, token: d.token_endpoint };
    })().catch((err: unknown) => {
      endpoints = undefined;
      throw err;
    }));
  const redirectUri = (request: FastifyRequest) => `${request.protocol}://${request.host}/console/oidc/callback`;
  const flowCookie = (request: FastifyRequest, value: string, maxAge: number) =>
    // Lax: the provider's redirect back is a cross-site navigation, which a Strict cookie would miss.
    cookie(OIDC_COOKIE, value, { path: '/console/oidc', maxAge, secure: deps.secure(request), sameSite: 'Lax' });
  const unavailable = (reply: FastifyReply, err: unknown) => {
    reply.log.warn({ err }, 'console sign-in through the OpenID provider failed');
    return deps.sendPage(reply, 502, deps.page('The OpenID provider cannot be reached or refused the sign-in; try again, or ask the operator.'));
  };

  app.get('/console/oidc/start', async (request, reply) => {
    let ep;
    try {
      ep = await discover();
    } catch (err) {
      return unavailable(reply, err);
    }
    const next = new URL(request.url, 'http://x').searchParams.get('next') ?? undefined;
    const flow: Flow = { state: b64url(randomBytes(24)), verifier: b64url(randomBytes(32)), next: deps.safeNext(next), expires: Date.now() + FLOW_SECONDS * 1000 };
    const url = new URL(ep.authorization);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', config.consoleOidcClientId);
    url.searchParams.set('redirect_uri', redirectUri(request));
    url.searchParams.set('scope', config.consoleOidcScopes);
    url.searchParams.set('state', flow.state);
    url.searchParams.set('code_challenge', b64url(createHash('sha256').update(flow.verifier).digest()));
    url.searchParams.set('code_challenge_method', 'S256');
    if (config.oidcAudience) url.searchParams.set('resource', config.oidcAudience);
    reply.header('set-cookie', flowCookie(request, sealer.seal('oidc', flow), FLOW_SECONDS));
    return reply.redirect(url.toString(), 303);
  });

  app.get('/console/oidc/callback', async (request, reply) => {
    const params = new URL(request.url, 'http://x').searchParams;
    const flow = sealer.open('oidc', parseCookies(request.headers.cookie).get(OIDC_COOKIE) ?? '') as Flow | undefined;
    reply.header('set-cookie', flowCookie(request, '', 0));
    if (!flow || flow.expires < Date.now() || params.get('state') !== flow.state) {
      return deps.sendPage(reply, 400, deps.page('This sign-in was not started here, or took too long: sign in again.'));
    }
    if (params.get('error')) return deps.sendPage(reply, 401, deps.page(`The OpenID provider refused the sign-in (${params.get('error')}).`));
    const code = params.get('code');
    if (!code) return deps.sendPage(reply, 400, deps.page('The OpenID provider sent no authorization code.'));
    let token: string;
    try {
      const ep = await discover();
      const body = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri(request), code_verifier: flow.verifier, client_id: config.consoleOidcClientId });
      if (config.oidcAudience) body.set('resource', config.oidcAudience);
      const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
      if (config.consoleOidcClientSecret) {
        const id = encodeURIComponent(config.consoleOidcClientId);
        headers.authorization = `Basic ${Buffer.from(`${id}:${encodeURIComponent(config.consoleOidcClientSecret)}`).toString('base64')}`;
      }
      const res = await fetch(ep.token, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
      const answer = (await res.json()) as { access_token?: string; error?: string };
      if (!res.ok || !answer.access_token) throw new Error(`the token endpoint answered ${res.status} ${answer.error ?? ''}`);
      token = answer.access_token;
    } catch (err) {
      return unavailable(reply, err);
    }
    const result = await auth.authenticate(`Bearer ${token}`, request.ip);
    if (!result.ok) return deps.sendPage(reply, result.status, deps.page(`The provider’s token is not accepted here: ${Object.values(result.body).join(' ')}`));
    // The session lasts no longer than the token (the provider is not asked again meanwhile).
    deps.openSessionFor(reply, request, result);
    // A page, not a redirect: the browser sends the new SameSite=Strict cookie only on a navigation
    // that starts here, not on one that continues the provider's cross-site redirect.
    const next = deps.safeNext(flow.next);
    return deps.sendPage(
      reply,
      200,
      `<!doctype html>\n${html`<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${next}"><title>Signed in · Lectern console</title></head><body><main><p>Signed in. <a href="${next}">Continue to the console</a>.</p></main></body></html>`.text}`,
    );
  });
}
