/**
 * The authentication backends a server runs (LECTERN_RUNSERVER_AUTH_BACKEND[S]): HTTP Basic, OpenID
 * Connect bearer tokens, or both side by side, each request going to the one its scheme names.
 */
import { authBackends, type Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { BasicAuthenticator } from './basic.ts';
import type { AuthResult, Authenticator } from './types.ts';

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
}

/** Builds the configured backends; OpenID discovery happens here (and may throw OidcDiscoveryError). */
export async function createAuthenticator(config: Config, logger: Logger): Promise<Authenticator> {
  const names = authBackends(config);
  const basic = names.includes('basic')
    ? new BasicAuthenticator({
        file: config.authFile,
        cacheMaxSize: config.authCacheMaxSize,
        cacheTtlSeconds: config.authCacheTtl,
        throttle: { concurrency: config.authBcryptConcurrency, maxFailures: config.authMaxFailures, failureWindowMs: config.authFailureWindow * 1000 },
        logger,
      })
    : undefined;
  const oidc = names.includes('oidc')
    ? // Loaded only when enabled: jose is ≈5 MB of a server's memory.
      await (await import('./oidc.ts')).OidcAuthenticator.create({
        issuer: config.oidcIssuerUri,
        audience: config.oidcAudience,
        scopeClaim: config.oidcScopeClaim,
        targetClaim: config.oidcTargetClaim,
        validationClaim: config.oidcValidationClaim,
        discoveryRetries: config.oidcDiscoveryRetries,
        jwksCooldownSeconds: config.oidcJwksCooldown,
        logger,
      })
    : undefined;
  return new EitherAuthenticator(basic, oidc);
}
