/**
 * A real OpenID provider (the certified `oidc-provider` package) on a loopback port, for tests:
 * discovery, JWKS, and a token endpoint giving JWT access tokens by the client-credentials grant
 * with a resource indicator (the token's `aud`). The test owns the provider's signing keys, so it
 * can also sign tokens the provider would not issue (expired, other issuer...), and rotate them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';

export const LRS_AUDIENCE = 'http://lrs.test/';
/** Scope names the provider knows: OpenID Connect's own and xAPI's. */
const SCOPES = ['openid', 'email', 'profile', 'statements/write', 'statements/read/mine', 'statements/read', 'state', 'define', 'profile/read', 'profile/write', 'all/read', 'all'];

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function newKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

export interface TestProvider {
  issuer: string;
  /** The key the provider signs with now. */
  current(): SigningKey;
  /** A token from the provider's token endpoint (client credentials). */
  token(opts?: { client?: string; scope?: string; resource?: string }): Promise<string>;
  /** A token signed by the test with `key` (default: the provider's current key). */
  sign(claims?: Record<string, unknown>, opts?: { key?: SigningKey; header?: Record<string, unknown> }): Promise<string>;
  /** Starts signing with a new key, publishing it (and, with `keepOld`, the previous ones). */
  rotate(keepOld?: boolean): Promise<SigningKey>;
  close(): Promise<void>;
}

/** Clients: `lectern-client` (default store) and `tenant-b-client`, whose tokens carry `target: "b"`. */
const CLIENTS = ['lectern-client', 'tenant-b-client'];

/**
 * With `browserClient`, a public client signing people in through the browser (authorization code
 * with PKCE, the provider's development login and consent pages: any login name is accepted).
 */
export async function startProvider(opts: { browserClient?: { id: string; redirectUri: string } } = {}): Promise<TestProvider> {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(503).end();
  const server: Server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let keys: SigningKey[] = [await newKey('key-1')];

  const build = async (): Promise<void> => {
    const jwks = {
      keys: await Promise.all(keys.map(async (k) => ({ ...(await exportJWK(k.privateKey)), kid: k.kid, alg: 'RS256', use: 'sig' }))),
    };
    const provider = new Provider(issuer, {
      clients: [
        ...CLIENTS.map((id) => ({ client_id: id, client_secret: `${id}-secret`, grant_types: ['client_credentials'], redirect_uris: [], response_types: [] })),
        ...(opts.browserClient
          ? [
              {
                client_id: opts.browserClient.id,
                token_endpoint_auth_method: 'none' as const,
                grant_types: ['authorization_code'],
                redirect_uris: [opts.browserClient.redirectUri],
                response_types: ['code' as const],
              },
            ]
          : []),
      ],
      jwks,
      scopes: SCOPES,
      ttl: { ClientCredentials: 600 },
      features: {
        devInteractions: { enabled: opts.browserClient !== undefined },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => LRS_AUDIENCE,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx, resource) => ({ scope: SCOPES.join(' '), audience: resource, accessTokenFormat: 'jwt', accessTokenTTL: 600 }),
        },
      },
      extraTokenClaims: (_ctx, token) => ((token as { clientId?: string }).clientId === 'tenant-b-client' ? { target: 'b' } : undefined),
    });
    handler = provider.callback() as typeof handler;
  };
  await build();

  const tp: TestProvider = {
    issuer,
    current: () => keys[0],
    async token(opts = {}) {
      const client = opts.client ?? 'lectern-client';
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${client}:${client}-secret`).toString('base64')}` },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope: opts.scope ?? 'all', resource: opts.resource ?? LRS_AUDIENCE }),
      });
      const body = (await res.json()) as { access_token?: string };
      if (!res.ok || !body.access_token) throw new Error(`token endpoint: ${res.status} ${JSON.stringify(body)}`);
      return body.access_token;
    },
    async sign(claims = {}, opts = {}) {
      const key = opts.key ?? keys[0];
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: issuer, aud: LRS_AUDIENCE, sub: 'crafted', scope: 'all', iat: now, exp: now + 600, ...claims })
        .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt', ...opts.header })
        .sign(key.privateKey);
    },
    async rotate(keepOld = true) {
      const next = await newKey(`key-${keys.length + 1}`);
      keys = keepOld ? [next, ...keys] : [next];
      await build();
      return next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return tp;
}
