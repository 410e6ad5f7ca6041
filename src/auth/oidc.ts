/**
 * OpenID Connect (on OAuth 2.0) bearer tokens: the provider is discovered once at start-up
 * (`/.well-known/openid-configuration`), then each `Authorization: Bearer <JWT>` is verified with
 * jose against the provider's JWKS: signature (algorithms the provider advertises, asymmetric
 * only), `iss`, `aud` when configured, `exp`/`nbf` with a small leeway. The JWKS is cached for a
 * while and refetched, rate-limited, when a token names a key it does not hold (key rotation).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import type { Logger } from 'pino';
import { isScope } from './scopes.ts';
import { type AuthFailure, type AuthResult, type Authenticator, type AuthUser, type Recheck, TOKEN_STAMP } from './types.ts';

export interface OidcOptions {
  issuer: string;
  /** When set, the token's `aud` must contain it. */
  audience: string;
  /** Claim holding the scopes: a space-separated string or an array of strings. */
  scopeClaim: string;
  /** Claim holding the user's store (tenant). */
  targetClaim: string;
  /** Claim choosing how the user's writes are validated: "strict" or "lax" (absent: the server's default). */
  validationClaim: string;
  /** Discovery attempts after the first while the provider cannot be reached. */
  discoveryRetries: number;
  /** Least seconds between two JWKS fetches caused by unknown key ids. */
  jwksCooldownSeconds: number;
  logger: Logger;
}

/** Signature algorithms with a public verification key: HS* (shared secret) and `none` never qualify. */
const ASYMMETRIC = new Set(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519']);
/** Clock skew tolerated on `exp`/`nbf`/`iat`, in seconds. */
const LEEWAY_SECONDS = 30;
/** A JWKS older than this is refetched even when every key id is known. */
const JWKS_MAX_AGE_MS = 10 * 60_000;
const HTTP_TIMEOUT_MS = 5000;
const MAX_BACKOFF_MS = 10_000;

interface Discovery {
  issuer: string;
  jwksUri: URL;
  algorithms: string[];
}

export class OidcDiscoveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OidcDiscoveryError';
  }
}

/** Reads the provider's metadata and checks what this server relies on (OpenID Connect Discovery §4). */
async function discoverOnce(issuer: string): Promise<Discovery> {
  const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  const res = await fetch(url, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS), redirect: 'error' });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  const meta = (await res.json()) as Record<string, unknown>;
  // §4.3: the issuer in the metadata must be exactly the one configured.
  if (meta.issuer !== issuer) {
    throw new OidcDiscoveryError(`the provider at ${url} says its issuer is ${JSON.stringify(meta.issuer)}, not ${JSON.stringify(issuer)}`);
  }
  if (typeof meta.jwks_uri !== 'string') throw new OidcDiscoveryError(`the provider's metadata at ${url} has no jwks_uri`);
  const advertised = Array.isArray(meta.id_token_signing_alg_values_supported) ? meta.id_token_signing_alg_values_supported : ['RS256'];
  const algorithms = advertised.filter((a): a is string => typeof a === 'string' && ASYMMETRIC.has(a));
  if (!algorithms.length) {
    throw new OidcDiscoveryError(`the provider at ${url} advertises no asymmetric signature algorithm (${JSON.stringify(advertised)})`);
  }
  return { issuer, jwksUri: new URL(meta.jwks_uri, url), algorithms };
}

/** Discovery with bounded retries (backoff doubling from 500 ms); a provider that answers wrongly is not retried. */
async function discover(opts: OidcOptions): Promise<Discovery> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await discoverOnce(opts.issuer);
    } catch (err) {
      if (err instanceof OidcDiscoveryError) throw err;
      const reason = (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message;
      if (attempt >= opts.discoveryRetries) {
        throw new OidcDiscoveryError(
          `cannot discover the OpenID provider ${opts.issuer} (LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI): ${reason} (gave up after ${attempt + 1} attempt${attempt ? 's' : ''})`,
        );
      }
      const wait = Math.min(500 * 2 ** attempt, MAX_BACKOFF_MS);
      opts.logger.warn({ issuer: opts.issuer, attempt: attempt + 1, waitMs: wait, err: reason }, 'cannot reach the OpenID provider; retrying');
      await sleep(wait);
    }
  }
}

/** What a token failure is answered with: the service description's wording, then why. */
function invalidToken(reason: string): AuthFailure {
  return {
    ok: false,
    status: 401,
    body: { detail: `Could not validate credentials: ${reason}` },
    headers: { 'www-authenticate': 'Bearer realm="lectern", error="invalid_token"' },
  };
}

/** A short, safe reason for each jose failure (never the token itself). */
function reasonOf(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'the token has expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return 'the token is not valid yet';
    if (err.claim === 'iss') return 'the token was issued by another provider';
    if (err.claim === 'aud') return 'the token was issued for another audience';
    return `the token's ${err.claim} claim is invalid`;
  }
  if (err instanceof joseErrors.JWKSNoMatchingKey) return 'the token is signed with a key the provider does not publish';
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return 'the token is signed with an algorithm the provider does not use';
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'the token signature is invalid';
  return 'the token is malformed';
}

/**
 * The xAPI scopes of the scope claim (a space-separated string, RFC 8693 §4.2, or an array).
 * Other names (`openid`, `email`) are ignored, and so is a bare `profile`: in a token it is the
 * OpenID Connect standard scope (profile claims) that providers grant by default, not xAPI's
 * read/write access to profile documents, which tokens get with `profile/read`, `profile/write`
 * or `all`.
 */
function tokenScopes(value: unknown): string[] {
  const names = typeof value === 'string' ? value.split(/\s+/) : Array.isArray(value) ? value : [];
  return [...new Set(names.filter((v): v is string => typeof v === 'string' && v !== 'profile' && isScope(v)))];
}

export class OidcAuthenticator implements Authenticator {
  private readonly opts: OidcOptions;
  private readonly discovery: Discovery;
  private readonly jwks: ReturnType<typeof createRemoteJWKSet>;

  private constructor(opts: OidcOptions, discovery: Discovery) {
    this.opts = opts;
    this.discovery = discovery;
    this.jwks = createRemoteJWKSet(discovery.jwksUri, {
      cooldownDuration: opts.jwksCooldownSeconds * 1000,
      cacheMaxAge: JWKS_MAX_AGE_MS,
      timeoutDuration: HTTP_TIMEOUT_MS,
    });
  }

  /** Discovers the provider (with retries) and returns a ready authenticator; throws OidcDiscoveryError. */
  static async create(opts: OidcOptions): Promise<OidcAuthenticator> {
    const discovery = await discover(opts);
    opts.logger.info({ issuer: discovery.issuer, jwks: discovery.jwksUri.href, algorithms: discovery.algorithms }, 'OpenID provider discovered');
    return new OidcAuthenticator(opts, discovery);
  }

  /** Verifying a signature costs microseconds on the event loop: no per-client limit here. */
  async authenticate(authorization: string | undefined, _client?: string): Promise<AuthResult> {
    const m = authorization && /^Bearer\s+([A-Za-z0-9\-_.~+/]+=*)\s*$/i.exec(authorization);
    if (!m) return invalidToken('a bearer token is required');
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(m[1], this.jwks, {
        issuer: this.discovery.issuer,
        ...(this.opts.audience && { audience: this.opts.audience }),
        algorithms: this.discovery.algorithms,
        clockTolerance: LEEWAY_SECONDS,
        requiredClaims: ['exp', 'sub'],
      }));
    } catch (err) {
      if (err instanceof joseErrors.JWKSTimeout || !(err instanceof joseErrors.JOSEError)) {
        // The provider's keys cannot be fetched: not the client's fault.
        this.opts.logger.error({ err: (err as Error).message, jwks: this.discovery.jwksUri.href }, 'cannot fetch the OpenID provider keys');
        return {
          ok: false,
          status: 503,
          body: { detail: 'the identity provider cannot be reached to validate the token; try again later' },
          headers: { 'retry-after': '5' },
        };
      }
      this.opts.logger.debug({ code: err.code }, 'bearer token refused');
      return invalidToken(reasonOf(err));
    }
    const target = claims[this.opts.targetClaim];
    if (target !== undefined && target !== null && typeof target !== 'string') return invalidToken(`the ${this.opts.targetClaim} claim is not a string`);
    const validation = claims[this.opts.validationClaim];
    if (validation !== undefined && validation !== 'strict' && validation !== 'lax') return invalidToken(`the ${this.opts.validationClaim} claim must be "strict" or "lax"`);
    const sub = String(claims.sub);
    return {
      ok: true,
      user: {
        username: sub,
        scopes: tokenScopes(claims[this.opts.scopeClaim]),
        agent: { objectType: 'Agent', openid: `${this.discovery.issuer}/${sub}` },
        target: target ?? '',
        ...(validation !== undefined && { validation }),
      },
      stamp: TOKEN_STAMP,
      expiresMs: Number(claims.exp) * 1000,
    };
  }

  /** A token holds until its `exp`: what bounds a session opened with it (the provider is not asked again). */
  async recheck(_user: AuthUser, stamp: string): Promise<Recheck> {
    return stamp === TOKEN_STAMP ? 'valid' : 'ended';
  }
}
