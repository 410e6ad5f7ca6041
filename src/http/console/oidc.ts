/**
 * Console sign-in through the OpenID provider: the authorization code flow with PKCE (RFC 7636).
 * The verifier, state and return path travel in a sealed, short-lived cookie (so any process
 * handles the callback); the access token received is checked by the same Authenticator as an API
 * request's bearer token, which gives the user (scopes and store) the session carries. The token
 * itself is not kept.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ConsoleDoor } from './kit.ts';
import { html, signInPage } from './pages.ts';
import { cookie, OIDC_COOKIE, parseCookies } from './session.ts';

/** Seconds a sign-in may take at the provider. */
const FLOW_SECONDS = 600;
interface Flow {
  state: string;
  verifier: string;
  next: string;
  expires: number;
}

const b64url = (b: Buffer): string => b.toString('base64url');

export function registerConsoleOidc(app: FastifyInstance, door: ConsoleDoor): void {
  const oidc = new OidcSignIn(door);
  app.get('/console/oidc/start', (request, reply) => oidc.start(request, reply));
  app.get('/console/oidc/callback', (request, reply) => oidc.callback(request, reply));
}

class OidcSignIn {
  private readonly door: ConsoleDoor;
  private endpoints: Promise<{ authorization: string; token: string }> | undefined;

  constructor(door: ConsoleDoor) {
    this.door = door;
  }

  private get config() {
    return this.door.deps.config;
  }

  /** The provider's endpoints, discovered once (again after a failure). */
  private discover(): Promise<{ authorization: string; token: string }> {
    return (this.endpoints ??= (async () => {
      const res = await fetch(`${this.config.oidcIssuerUri.replace(/\/$/, '')}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(10_000) });
      if (!res.ok) throw new Error(`discovery answered ${res.status}`);
      const d = (await res.json()) as { authorization_endpoint?: string; token_endpoint?: string };
      if (!d.authorization_endpoint || !d.token_endpoint) throw new Error('the provider names no authorization or token endpoint');
      return { authorization: d.authorization_endpoint, token: d.token_endpoint };
    })().catch((err: unknown) => {
      this.endpoints = undefined;
      throw err;
    }));
  }

  private redirectUri(request: FastifyRequest): string {
    return `${request.protocol}://${request.host}/console/oidc/callback`;
  }

  private flowCookie(request: FastifyRequest, value: string, maxAge: number): string {
    // Lax: the provider's redirect back is a cross-site navigation, which a Strict cookie would miss.
    return cookie(OIDC_COOKIE, value, { path: '/console/oidc', maxAge, secure: this.door.secure(request), sameSite: 'Lax' });
  }

  /** The sign-in page with an error. */
  private page(reply: FastifyReply, status: number, error: string): FastifyReply {
    return this.door.sendPage(reply, status, signInPage(this.door.ctx(), { error, oidc: true, basic: this.door.basicEnabled }));
  }

  private unavailable(reply: FastifyReply, err: unknown): FastifyReply {
    reply.log.warn({ err }, 'console sign-in through the OpenID provider failed');
    return this.page(reply, 502, 'The OpenID provider cannot be reached or refused the sign-in; try again, or ask the operator.');
  }

  async start(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const next = new URL(request.url, 'http://x').searchParams.get('next') ?? undefined;
    const problem = this.door.nextProblem(next);
    if (problem) return this.page(reply, 400, problem);
    let ep: Awaited<ReturnType<typeof this.discover>>;
    try {
      ep = await this.discover();
    } catch (err) {
      return this.unavailable(reply, err);
    }
    const { config } = this;
    const flow: Flow = { state: b64url(randomBytes(24)), verifier: b64url(randomBytes(32)), next: this.door.safeNext(next), expires: Date.now() + FLOW_SECONDS * 1000 };
    const url = new URL(ep.authorization);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', config.consoleOidcClientId);
    url.searchParams.set('redirect_uri', this.redirectUri(request));
    url.searchParams.set('scope', config.consoleOidcScopes);
    url.searchParams.set('state', flow.state);
    url.searchParams.set('code_challenge', b64url(createHash('sha256').update(flow.verifier).digest()));
    url.searchParams.set('code_challenge_method', 'S256');
    if (config.oidcAudience) url.searchParams.set('resource', config.oidcAudience);
    reply.header('set-cookie', this.flowCookie(request, this.door.sealer.seal('oidc', flow), FLOW_SECONDS));
    return reply.redirect(url.toString(), 303);
  }

  async callback(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const params = new URL(request.url, 'http://x').searchParams;
    const flow = this.door.sealer.open('oidc', parseCookies(request.headers.cookie).get(OIDC_COOKIE) ?? '') as Flow | undefined;
    reply.header('set-cookie', this.flowCookie(request, '', 0));
    if (!flow || flow.expires < Date.now() || params.get('state') !== flow.state)
      return this.page(reply, 400, 'This sign-in was not started here, or took too long: sign in again.');
    if (params.get('error')) return this.page(reply, 401, `The OpenID provider refused the sign-in (${params.get('error')}).`);
    const code = params.get('code');
    if (!code) return this.page(reply, 400, 'The OpenID provider sent no authorization code.');
    let token: string;
    try {
      token = await this.exchange(request, code, flow.verifier);
    } catch (err) {
      return this.unavailable(reply, err);
    }
    const result = await this.door.auth.authenticate(`Bearer ${token}`, request.ip);
    if (!result.ok) return this.page(reply, result.status, `The provider’s token is not accepted here: ${Object.values(result.body).join(' ')}`);
    // The session lasts no longer than the token (the provider is not asked again meanwhile).
    this.door.openSessionFor(reply, request, result);
    // A page, not a redirect: the browser sends the new SameSite=Strict cookie only on a navigation
    // that starts here, not on one that continues the provider's cross-site redirect.
    const next = this.door.safeNext(flow.next);
    return this.door.sendPage(
      reply,
      200,
      `<!doctype html>\n${html`<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${next}"><title>Signed in · Lectern console</title></head><body><main><p>Signed in. <a href="${next}">Continue to the console</a>.</p></main></body></html>`.text}`,
    );
  }

  /** The authorization code exchanged for an access token at the provider's token endpoint. */
  private async exchange(request: FastifyRequest, code: string, verifier: string): Promise<string> {
    const { config } = this;
    const ep = await this.discover();
    const body = new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: this.redirectUri(request),
      code_verifier: verifier,
      client_id: config.consoleOidcClientId,
    });
    if (config.oidcAudience) body.set('resource', config.oidcAudience);
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
    if (config.consoleOidcClientSecret) {
      const id = encodeURIComponent(config.consoleOidcClientId);
      headers.authorization = `Basic ${Buffer.from(`${id}:${encodeURIComponent(config.consoleOidcClientSecret)}`).toString('base64')}`;
    }
    const res = await fetch(ep.token, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
    const answer = (await res.json()) as { access_token?: string; error?: string };
    if (!res.ok || !answer.access_token) throw new Error(`the token endpoint answered ${res.status} ${answer.error ?? ''}`);
    return answer.access_token;
  }
}
