/**
 * The authentication backends a server runs (LECTERN_RUNSERVER_AUTH_BACKEND[S]): HTTP Basic, OpenID
 * Connect bearer tokens, or both side by side, each request going to the one its scheme names.
 * Basic takes the credentials file's users and the database credentials (`lectern credentials`).
 */
import { authBackends, type Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Clock } from '../clock.ts';
import type { CredentialStore } from '../store/types.ts';
import { BasicAuthenticator } from './basic.ts';
import { DatabaseCredentials } from './database.ts';
import { type AuthResult, type Authenticator, type AuthUser, type Recheck, TOKEN_STAMP } from './types.ts';

class EitherAuthenticator implements Authenticator {
  private readonly basic: Authenticator | undefined;
  private readonly oidc: Authenticator | undefined;
  constructor(basic: Authenticator | undefined, oidc: Authenticator | undefined) {
    this.basic = basic;
    this.oidc = oidc;
  }

  async authenticate(authorization: string | undefined, client: string): Promise<AuthResult> {
    const scheme = authorization?.trimStart().split(/\s/, 1)[0].toLowerCase();
    if (scheme === 'bearer' && this.oidc) return this.oidc.authenticate(authorization, client);
    if (scheme === 'basic' && this.basic) return this.basic.authenticate(authorization, client);
    // No credentials, or a scheme not enabled: the enabled backends' refusal, naming every scheme
    // accepted here (RFC 9110 §11.6.1: several challenges in one header).
    const refusal = await (this.basic ?? this.oidc)!.authenticate(undefined, client);
    if (refusal.ok || !this.basic || !this.oidc) return refusal;
    return { ...refusal, headers: { ...refusal.headers, 'www-authenticate': 'Basic realm="lectern", Bearer realm="lectern"' } };
  }

  /** Asks the backend that made the stamp; a stamp of a backend no longer enabled has ended. */
  async recheck(user: AuthUser, stamp: string): Promise<Recheck> {
    const backend = stamp === TOKEN_STAMP ? this.oidc : this.basic;
    return backend ? backend.recheck(user, stamp) : 'ended';
  }
}

/** The OpenID Connect backend when enabled: discovery happens here (and may throw OidcDiscoveryError), before the database opens. */
export async function discoverOidc(config: Config, logger: Logger): Promise<Authenticator | undefined> {
  if (!authBackends(config).includes('oidc')) return undefined;
  // Loaded only when enabled: jose costs a server memory that most deployments do not need.
  return (await import('./oidc.ts')).OidcAuthenticator.create({
    issuer: config.oidcIssuerUri,
    audience: config.oidcAudience,
    scopeClaim: config.oidcScopeClaim,
    targetClaim: config.oidcTargetClaim,
    validationClaim: config.oidcValidationClaim,
    discoveryRetries: config.oidcDiscoveryRetries,
    jwksCooldownSeconds: config.oidcJwksCooldown,
    logger,
  });
}

/**
 * The configured backends: `oidc` from discoverOidc; Basic checks the credentials file and, with
 * `credentials` (the store), the database credentials (./database.ts).
 */
export function createAuthenticator(config: Config, logger: Logger, opts: { oidc?: Authenticator; credentials?: CredentialStore; clock?: Clock } = {}): Authenticator {
  const basic = authBackends(config).includes('basic')
    ? new BasicAuthenticator({
        file: config.authFile,
        cacheMaxSize: config.authCacheMaxSize,
        cacheTtlSeconds: config.authCacheTtl,
        throttle: { concurrency: config.authBcryptConcurrency, maxFailures: config.authMaxFailures, failureWindowMs: config.authFailureWindow * 1000 },
        logger,
        database: opts.credentials && new DatabaseCredentials({ store: opts.credentials, refreshMs: config.authCredentialsRefresh * 1000, logger, clock: opts.clock }),
      })
    : undefined;
  return new EitherAuthenticator(basic, opts.oidc);
}
