/**
 * Every setting Lectern reads, declared once: name, default, meaning and parser. Values come from
 * the environment (into which a command's `--env-file` has set its variables), then from a `.env`
 * file in the working directory (the real environment wins).
 * `loadConfig` validates them all and throws a ConfigError naming the first bad variable.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseEnv } from 'node:util';
import {
  authBackendList,
  bool,
  ConfigError,
  dsn,
  forwardings,
  httpUrlOrEmpty,
  int,
  list,
  nonEmpty,
  num,
  oneOf,
  postgresUrl,
  postgresUrls,
  secretOrEmpty,
  str,
  trustProxy,
  xapiVersions,
  type Setting,
} from './config-values.ts';

export { ConfigError, type ForwardingTarget } from './config-values.ts';

export const BACKENDS = ['sqlite', 'postgres'] as const;
export type BackendName = (typeof BACKENDS)[number];

const MiB = 1024 * 1024;

/** The table of settings. Each `help` is its row's text in docs/configuration.md (written by `npm run docs:config`; test/docs-config.test.ts keeps the page equal to this table). */
export const SETTINGS = {
  backend: { name: 'LECTERN_RUNSERVER_BACKEND', default: 'sqlite', help: 'Storage backend: `sqlite` or `postgres`.', parse: oneOf(...BACKENDS) },
  host: { name: 'LECTERN_RUNSERVER_HOST', default: '127.0.0.1', help: 'Address the server listens on.', parse: str },
  port: { name: 'LECTERN_RUNSERVER_PORT', default: '8100', help: 'TCP port the server listens on (0 picks a free port).', parse: int(0, 65535) },
  maxSearchHits: {
    name: 'LECTERN_RUNSERVER_MAX_SEARCH_HITS_COUNT',
    default: '100',
    help: 'Largest page of statements a GET returns; `limit=0` and any larger `limit` get this many.',
    parse: int(1, 100000),
  },
  maxPageBytes: {
    name: 'LECTERN_MAX_PAGE_BYTES',
    default: String(4 * MiB),
    help: "Most bytes of stored statement JSON one page of a statement query carries, with `attachments=true` the attachment data included (1 KiB to 1 GiB). A page that would go beyond ends early with a `more` link to the next statement (xAPI lets an LRS return fewer than `limit`); it always carries at least one statement, which the write limits bound. The store reads the statements' sizes before their JSON, so one query reads about a page, never every matching row. 4 MiB is ≈ 25 full pages of typical statements (100 × 1.5 KB), and at 2 bytes or more per JSON value holds at most ≈ 2M values, as many as one write may carry (`LECTERN_MAX_JSON_VALUES`): reading a page parses no more than the largest accepted write.",
    parse: int(1024, 1024 * MiB),
  },
  sqlitePath: {
    name: 'LECTERN_SQLITE_PATH',
    default: 'lectern.sqlite',
    help: 'SQLite database file (created with its schema on first start), relative to the working directory.',
    parse: str,
  },
  authFile: { name: 'LECTERN_AUTH_FILE', default: 'auth.json', help: 'Credentials file (Ralph format, bcrypt hashes), re-read when it changes.', parse: str },
  authCacheMaxSize: {
    name: 'LECTERN_AUTH_CACHE_MAX_SIZE',
    default: '100',
    help: 'Entries in the cache of verified credentials (set above the number of distinct users).',
    parse: int(0, 10_000_000),
  },
  authCacheTtl: { name: 'LECTERN_AUTH_CACHE_TTL', default: '3600', help: 'Seconds a verified credential stays cached.', parse: num(0, 31_536_000) },
  authCredentialsRefresh: {
    name: 'LECTERN_AUTH_CREDENTIALS_REFRESH',
    default: '2',
    help: "Seconds between two reads of the database credentials' change counter (`lectern credentials`): a server drops the credentials it cached when another process (or the CLI) created, revoked or rotated one, so a revocation or rotation is in force on every server within this many seconds (plus one database read); a new secret works at once, as a secret a cached credential refuses is checked on the credential read again (at most once per key per interval). Read by the first request of a database credential after it elapsed, never by requests of the credentials file's users; `0`: on every such request.",
    parse: num(0, 3600),
  },
  authBcryptConcurrency: {
    name: 'LECTERN_AUTH_BCRYPT_CONCURRENCY',
    default: '2',
    help: "Password checks (bcrypt) a server process runs at once; the others wait their turn, by client address (round-robin, addresses without a recent failure first), at most 8 per address (beyond: `429`) and 64 in all (beyond: `503`), with `Retry-After`; when all 64 places are taken, a check from an address without a recent failure takes the place of the newest one waiting from an address with one (which gets the `503`), so addresses that keep failing cannot keep the others out. bcrypt runs on libuv's thread pool (`UV_THREADPOOL_SIZE`, 4 by default), which file I/O shares: keep this below it.",
    parse: int(1, 1024),
  },
  authMaxFailures: {
    name: 'LECTERN_AUTH_MAX_FAILURES',
    default: '10',
    help: 'Failed Basic sign-ins (wrong password, unknown user) a client address may have within `LECTERN_AUTH_FAILURE_WINDOW`; beyond, its requests get `429` with `Retry-After` and no password check until the window ends (credentials already verified and cached still pass). An IPv6 address counts by its /64. `0`: no limit.',
    parse: int(0, 1_000_000),
  },
  authFailureWindow: {
    name: 'LECTERN_AUTH_FAILURE_WINDOW',
    default: '60',
    help: "Seconds from a client address's first failed sign-in during which its failures count towards `LECTERN_AUTH_MAX_FAILURES`.",
    parse: num(1, 86_400),
  },
  adminMaxFailures: {
    name: 'LECTERN_ADMIN_MAX_FAILURES',
    default: '5',
    help: 'Failed authentications on the admin API (`/admin/api/`: wrong or unknown credentials) a client address may have within `LECTERN_ADMIN_FAILURE_WINDOW`, and as many for one user name from any address; beyond, admin requests from that address, or naming that user from an address that failed an admin sign-in itself within its window, get `429` with `Retry-After` and no check until the window ends (an address without a failure of its own is checked as usual, so failing on purpose cannot keep the real user out). Counted apart from `LECTERN_AUTH_MAX_FAILURES`, which still applies. An IPv6 address counts by its /64. `0`: no limit.',
    parse: int(0, 1_000_000),
  },
  adminFailureWindow: {
    name: 'LECTERN_ADMIN_FAILURE_WINDOW',
    default: '900',
    help: 'Seconds from the first failed admin authentication of a client address (or of a user name) during which its failures count towards `LECTERN_ADMIN_MAX_FAILURES`.',
    parse: num(1, 86_400),
  },
  trustProxy: {
    name: 'LECTERN_RUNSERVER_TRUST_PROXY',
    default: 'false',
    help: "Reverse proxies whose `X-Forwarded-For` is believed, so that per-address limits count the real client rather than the proxy (behind a proxy every client otherwise has the proxy's address and shares its limits): `false`, `true` (any peer: only when nothing but the proxy can reach the server, or clients can choose their address), or a comma-separated list of the proxies' addresses and CIDR ranges (`loopback`, `uniquelocal`, `linklocal` name those ranges), e.g. `10.0.0.5,loopback`.",
    parse: trustProxy,
  },
  maxRequestSize: {
    name: 'LECTERN_MAX_REQUEST_SIZE',
    default: String(64 * MiB),
    help: 'Largest request body in bytes (statements with their attachments); larger requests get 413, by their `Content-Length` before a byte of the body is read, or as soon as a chunked body goes beyond.',
    parse: int(1024),
  },
  maxBodiesInFlight: {
    name: 'LECTERN_MAX_BODIES_IN_FLIGHT',
    default: '',
    help: 'Bytes of request data a server process holds at once: bodies, and the parsed size of the JSON they carry; empty: 4 × `LECTERN_MAX_REQUEST_SIZE` (256 MiB by default), and never less than it. A body counts by the bytes that arrived, from its first byte until its request is answered (read into a buffer that grows with them: at least 16 KiB, at most twice what was sent), never by the size it declares: a client declaring 64 MiB and trickling bytes holds what it sent. A `Content-Length` larger than what is free now gets `503` with `Retry-After: 2` before a byte is read, and a body whose arriving bytes would go beyond gets it as they arrive (its connection closed, the rest unread). Once its JSON values are counted (statements, JSON documents; see `LECTERN_MAX_JSON_VALUES`), a request also holds 160 bytes per value until it is answered, what parsing and storing them costs (measured: 2M values `{}` ≈ 330 MB, 10,000 typical statements 76–185 MB), or `503` with `Retry-After: 2`, nothing stored; a request whose estimate is larger than the whole budget is served when it is alone. Alternate-syntax forms carrying their credentials as a form field are read before those are checked: each at most 1 MiB (413; send an `Authorization` header instead) and together at most a quarter of this. Per process: with workers, each has its own; `lectern_request_bodies_held_bytes` on `/metrics` shows what is held (`kind` `body` and `parsed`).',
    parse: (raw: string, name: string) => (raw.trim() === '' ? undefined : int(1024)(raw, name)),
  },
  maxBodiesInFlightPerUser: {
    name: 'LECTERN_MAX_BODIES_IN_FLIGHT_PER_USER',
    default: '',
    help: "Bytes of `LECTERN_MAX_BODIES_IN_FLIGHT` the requests of one user (a username in a store) may hold at once, bodies and parsed estimates alike; beyond, `503` with `Retry-After: 2`, so that one user's uploads cannot keep every other user out. Empty: half of `LECTERN_MAX_BODIES_IN_FLIGHT` (128 MiB by default), and never less than `LECTERN_MAX_REQUEST_SIZE`. Forms read before their credentials are checked count against their own quarter instead.",
    parse: (raw: string, name: string) => (raw.trim() === '' ? undefined : int(1024)(raw, name)),
  },
  requestBodyTimeout: {
    name: 'LECTERN_REQUEST_BODY_TIMEOUT',
    default: '30',
    help: 'Seconds a request body being read may go without a byte arriving before the request gets `408` and its connection is closed, giving back its share of `LECTERN_MAX_BODIES_IN_FLIGHT`. Only while a body is read, never during the work done with it; a whole request (headers and body) still has 300 s.',
    parse: num(1, 3600),
  },
  requestBodyMinRate: {
    name: 'LECTERN_REQUEST_BODY_MIN_RATE',
    default: '240',
    help: "Least average bytes per second a request body must arrive at once it has been read for `LECTERN_REQUEST_BODY_TIMEOUT` seconds (the grace period); slower ones get `408` and their connection is closed. A client sending a byte every few seconds never trips the idle timeout, but cannot keep its connection for the 300 s a request may last (Kestrel's `MinRequestBodyDataRate` has the same default). `0`: no minimum.",
    parse: int(0, 1_000_000_000),
  },
  maxDocumentSize: {
    name: 'LECTERN_MAX_DOCUMENT_SIZE',
    default: String(16 * MiB),
    help: 'Largest State/Activity Profile/Agent Profile document in bytes; larger ones get 413, and so does a POST whose merge with the stored document would leave a larger one (nothing is stored).',
    parse: int(1),
  },
  maxStatementsPerRequest: {
    name: 'LECTERN_MAX_STATEMENTS_PER_REQUEST',
    default: '10000',
    help: "Most statements one PUT/POST may carry; more get 413 naming this setting (counted on the body's bytes before it is parsed). The default is 20× the 500 per POST the benchmark sends and equals the largest `LECTERN_XAPI_FORWARDING_BATCH_SIZE`, so a Lectern forwarding to a Lectern never has a batch refused (a target's 413 makes the forwarder send one by one). A multipart request may also carry at most twice as many attachment parts (a signature and a file per statement); more are a 400.",
    parse: int(1, 1_000_000),
  },
  maxJsonValues: {
    name: 'LECTERN_MAX_JSON_VALUES',
    default: '2000000',
    help: "Most JSON values (objects, arrays, strings, numbers, `true`/`false`/`null`) one statement request or one JSON document may hold; more get 413 naming this setting, counted before the body is parsed. Parsing and validating cost memory per value, far more than a body's bytes: a 64 MB statement of `[{},{},…]` (22M objects) took a server to 3.5 GB; at this limit the worst such body peaks ≈ 350 MB above an idle server, less than one 64 MB string (≈ 430–460 MB). 10,000 typical statements hold ≈ 800,000 values. While a request is parsed and stored, its values count against `LECTERN_MAX_BODIES_IN_FLIGHT` (160 bytes each).",
    parse: int(1000),
  },
  corsAllowedOrigins: {
    name: 'LECTERN_CORS_ALLOWED_ORIGINS',
    default: '*',
    help: 'Comma-separated origins allowed by CORS on the xAPI routes; `*` allows any.',
    parse: list,
  },
  logLevel: {
    name: 'LECTERN_LOG_LEVEL',
    default: 'info',
    help: 'Log level of the JSON logs on stdout: fatal, error, warn, info, debug, trace or silent.',
    parse: oneOf('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'),
  },
  shutdownTimeout: {
    name: 'LECTERN_SHUTDOWN_TIMEOUT',
    default: '10',
    help: 'Seconds to let in-flight requests finish on SIGINT/SIGTERM before closing anyway.',
    parse: num(0, 3600),
  },
  sqliteSynchronous: {
    name: 'LECTERN_SQLITE_SYNCHRONOUS',
    default: 'FULL',
    help: 'SQLite `synchronous` pragma: FULL survives power loss; NORMAL (faster) survives process crashes only.',
    parse: oneOf('FULL', 'NORMAL'),
  },
  sqliteWriterThread: {
    name: 'LECTERN_SQLITE_WRITER_THREAD',
    default: 'false',
    help: 'Write SQLite on a thread of its own: HTTP work and database writes overlap on two cores, and heavy queries never delay a commit; `runserver` then sizes memory for two threads (8 MB semi-spaces, one malloc arena): ≈ 10 MB more than one event loop under steady ingest, ≈ 60 MB more under many clients posting large batches ([Operations, SQLite under mixed load](operations.md#sqlite-under-mixed-load)). `false`: everything on one event loop.',
    parse: bool,
  },
  sqliteWalAutocheckpoint: {
    name: 'LECTERN_SQLITE_WAL_AUTOCHECKPOINT',
    default: '20000', // as the SQLite backend's own default (test/store/options.test.ts checks they agree)
    help: "WAL pages (8 KB) a commit may leave before it copies them into the database file (SQLite `wal_autocheckpoint`); the `-wal` file grows to about this many pages (160 MB) and is truncated back to it after each checkpoint. Larger merges more writes to the same page: SQLite's default, 1,000, ingests 25–40 % slower at 300k statements ([Performance](performance.md)).",
    parse: int(100, 10_000_000),
  },
  sqliteCacheSize: {
    name: 'LECTERN_SQLITE_CACHE_SIZE',
    default: '',
    help: "MiB of database pages each SQLite connection (the server's, and each writer or reader thread's) keeps in memory (SQLite `cache_size`; SQLite's own default is 2). Empty: 6 MiB, and for the connection that writes 1 MiB per 312,500 statements the store has held once that is more, at most 32 (32 at 10M statements). The writer's pages (the newest part of every index, ≈ 25 MB at 10M statements) then stay in memory from one commit to the next: at 11–13M statements ingest 9.5k statements/s against 8.1–8.6k with 6 MiB. A page of 100 statements spread over a large file, with the index pages that find it, stays from one request to the next: at 1M statements a course's page (`activity` + `related_activities`) 1.4× the requests per second of 2 MiB ([Performance](performance.md)). Memory grows by up to this much per connection.",
    parse: (raw: string, name: string) => (raw.trim() === '' ? undefined : int(1, 1_048_576)(raw, name)),
  },
  sqliteReaders: {
    name: 'LECTERN_SQLITE_READERS',
    default: '0',
    help: 'Threads that read statement pages (`GET /statements` queries) off the event loop, each on its own connection: up to 1.5× the query throughput (with the writer thread, queries keep their pace during ingest), for ≈ 50 MB more memory each ([Performance](performance.md)); `0` reads them on the event loop.',
    parse: int(0, 64),
  },
  workers: {
    name: 'LECTERN_RUNSERVER_WORKERS',
    default: '1',
    help: 'Server processes `lectern runserver` starts (node:cluster, sharing one port); more than 1 needs the `postgres` backend. The first worker starts alone (migrations, database checks), the others then; a worker that dies is replaced.',
    parse: int(1, 256),
  },
  postgresUrl: {
    name: 'LECTERN_POSTGRES_URL',
    default: 'postgres://postgres@127.0.0.1:5432/lectern',
    help: 'PostgreSQL connection URL, `postgres://user[:password]@host[:port]/database[?sslmode=…]`. What it omits comes from the libpq variables (`PGPASSWORD`, …). The database is created on first start when missing (if the user may); the schema is migrated at start-up, safely from several processes at once.',
    parse: postgresUrl,
  },
  postgresPoolSize: {
    name: 'LECTERN_POSTGRES_POOL_SIZE',
    default: '10',
    help: "Connections each server process keeps open; workers × processes × this must stay under the server's `max_connections`.",
    parse: int(1, 1000),
  },
  postgresStatementTimeout: {
    name: 'LECTERN_POSTGRES_STATEMENT_TIMEOUT',
    default: '30000',
    help: 'Milliseconds a statement (lock waits included) may run before PostgreSQL cancels it and the request gets 503; `0` disables. A connection in use that hears nothing from the server for this plus `LECTERN_POSTGRES_CONNECT_TIMEOUT` (a host gone without closing the connection) is dropped and its request gets 503; migrations at start-up are exempt from both.',
    parse: int(0, 86_400_000),
  },
  postgresConnectTimeout: {
    name: 'LECTERN_POSTGRES_CONNECT_TIMEOUT',
    default: '5000',
    help: 'Milliseconds to wait for a connection (a new one, or a free one of the pool) before the request gets 503.',
    parse: int(1, 600_000),
  },
  postgresConnectRetries: {
    name: 'LECTERN_POSTGRES_CONNECT_RETRIES',
    default: '10',
    help: 'Start-up attempts after the first while PostgreSQL cannot be reached (a refused connection, no answer, a host name that could not be looked up now); then start-up fails with a one-line error and exit code 2. A one-shot command (`lectern export`, `lectern credentials`, …) makes those of them that fit in 5 s. An unknown host, a refused password or TLS, and a database that cannot be created are not retried.',
    parse: int(0, 1000),
  },
  postgresConnectBackoff: {
    name: 'LECTERN_POSTGRES_CONNECT_BACKOFF',
    default: '500',
    help: 'Milliseconds before the first start-up retry; each next wait doubles, up to 30 s (with the defaults, ≈ 2½ minutes of retrying in all).',
    parse: int(0, 600_000),
  },
  postgresReadUrls: {
    name: 'LECTERN_POSTGRES_READ_URLS',
    default: '',
    help: 'Streaming hot standbys of the primary, as PostgreSQL connection URLs separated by commas (a comma in a password is written `%2C`). Statement queries (`GET /statements`, `more` pages and attachments included) and the Activities and Agents resources are read from a healthy one, in turn; writes and documents stay on the primary. A replica that is down, slow, promoted or more than `LECTERN_POSTGRES_REPLICA_MAX_LAG` behind is skipped (the primary answers) until it is healthy again; `X-Experience-API-Consistent-Through` from a replica is never later than what it has replayed. See docs/scaling.md, "Read replicas".',
    parse: postgresUrls,
  },
  postgresReplicaMaxLag: {
    name: 'LECTERN_POSTGRES_REPLICA_MAX_LAG',
    default: '30000',
    help: "Milliseconds a read replica may be behind the primary (how much older the newest moment it has replayed everything up to is than the primary's) and still be read from; each process measures it twice a second, so under writes a replica that keeps up shows up to about half a second: below 1000 it may be skipped now and then.",
    parse: int(0, 86_400_000),
  },
  authBackend: {
    name: 'LECTERN_RUNSERVER_AUTH_BACKEND',
    default: '',
    help: "One backend, `basic` or `oidc` (the service description's name); when set it wins over `LECTERN_RUNSERVER_AUTH_BACKENDS`.",
    parse: authBackendList(true),
  },
  authBackends: {
    name: 'LECTERN_RUNSERVER_AUTH_BACKENDS',
    default: 'basic',
    help: 'Authentication backends, comma-separated: `basic`, `oidc`, or `basic,oidc` (each request goes to the one its `Authorization` scheme names).',
    parse: authBackendList(false),
  },
  oidcIssuerUri: {
    name: 'LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI',
    default: '',
    help: 'Issuer identifier of the OpenID provider, required with `oidc`. Its `/.well-known/openid-configuration` is read at start-up; a provider still unreachable after the retries stops start-up (exit code 2).',
    parse: httpUrlOrEmpty,
  },
  oidcAudience: {
    name: 'LECTERN_RUNSERVER_AUTH_OIDC_AUDIENCE',
    default: '',
    help: "When set, a token's `aud` must contain it. Strongly advised (the LRS's own address): without it, any token of the provider for any service is accepted.",
    parse: str,
  },
  oidcScopeClaim: {
    name: 'LECTERN_RUNSERVER_AUTH_OIDC_SCOPE_CLAIM',
    default: 'scope',
    help: 'Token claim holding the scopes: a space-separated string or an array.',
    parse: nonEmpty,
  },
  oidcValidationClaim: {
    name: 'LECTERN_RUNSERVER_AUTH_OIDC_VALIDATION_CLAIM',
    default: 'xapi_validation',
    help: "Token claim choosing how the user's statement writes are validated, `strict` or `lax` (see [Validation](validation.md)); absent from a token: `LECTERN_XAPI_VALIDATION`. A token with another value is refused (`401`).",
    parse: nonEmpty,
  },
  oidcTargetClaim: {
    name: 'LECTERN_RUNSERVER_AUTH_OIDC_TARGET_CLAIM',
    default: 'target',
    help: "Token claim holding the user's store (tenant); absent: the default store.",
    parse: nonEmpty,
  },
  oidcDiscoveryRetries: {
    name: 'LECTERN_RUNSERVER_AUTH_OIDC_DISCOVERY_RETRIES',
    default: '5',
    help: 'Start-up retries while the OpenID provider cannot be reached (waits of 0.5 s, doubling, up to 10 s), before giving up with exit code 2.',
    parse: int(0, 100),
  },
  oidcJwksCooldown: {
    name: 'LECTERN_RUNSERVER_AUTH_OIDC_JWKS_COOLDOWN',
    default: '30',
    help: "Least seconds between two fetches of the provider's keys caused by tokens naming an unknown key (key rotation is picked up without a restart; keys are also refetched every 10 minutes).",
    parse: num(0, 3600),
  },
  consoleSecret: {
    name: 'LECTERN_CONSOLE_SECRET',
    default: '',
    help: "Secret (at least 32 characters) that seals the operator console's session cookies (`/console`: AES-256-GCM, so a cookie can be neither read nor forged without it). Every process that serves the console must share it: set it when several hosts or separately started processes serve one LRS. Empty: a random one per `lectern runserver` (its worker processes share it), so sessions end when the server restarts.",
    parse: secretOrEmpty,
  },
  consoleSessionTtl: {
    name: 'LECTERN_CONSOLE_SESSION_TTL',
    default: '28800',
    help: 'Seconds a console session lasts from sign-in (8 hours by default); then the console asks to sign in again.',
    parse: int(1, 31_536_000),
  },
  consoleOidcClientId: {
    name: 'LECTERN_CONSOLE_OIDC_CLIENT_ID',
    default: '',
    help: 'With the `oidc` backend: the console\'s client id at the OpenID provider, which offers "Sign in with OpenID Connect" (authorization code with PKCE, redirect URI `<LRS address>/console/oidc/callback`). Empty: the console offers the form for Basic users only.',
    parse: str,
  },
  consoleOidcScopes: {
    name: 'LECTERN_CONSOLE_OIDC_SCOPES',
    default: 'openid all',
    help: "Scopes the console asks the OpenID provider for at sign-in (space-separated); the session holds those the access token grants (its `LECTERN_RUNSERVER_AUTH_OIDC_SCOPE_CLAIM`), and its store comes from the token's target claim.",
    parse: nonEmpty,
  },
  consoleOidcClientSecret: {
    name: 'LECTERN_CONSOLE_OIDC_CLIENT_SECRET',
    default: '',
    help: "The console's client secret at the OpenID provider, when it is a confidential client; empty for a public client (PKCE alone).",
    parse: str,
  },
  restrictByScopes: {
    name: 'LECTERN_LRS_RESTRICT_BY_SCOPES',
    default: 'true',
    help: "Enforce scopes: a request without the scope it needs gets 403. `false` lets any authenticated user do anything in its store (Ralph's default, for migrations).",
    parse: bool,
  },
  restrictByAuthority: {
    name: 'LECTERN_LRS_RESTRICT_BY_AUTHORITY',
    default: 'false',
    help: 'Every user reads only the statements it is the authority of, as with `statements/read/mine` (and none reads `/xAPI/activities` or `/xAPI/agents`, which are assembled from every statement: `403`).',
    parse: bool,
  },
  xapiVersions: {
    name: 'LECTERN_XAPI_VERSIONS',
    default: '1.0.3,2.0.0',
    help: 'xAPI versions served, comma-separated (`1.0.3`, `2.0.0`); each request picks one with its `X-Experience-API-Version` header (see [xAPI versions](xapi-versions.md)).',
    parse: xapiVersions,
  },
  xapiValidation: {
    name: 'LECTERN_XAPI_VALIDATION',
    default: 'strict',
    help: 'How statement writes are validated, unless the credential chooses (`"validation"` in its `auth.json` entry, its token\'s `LECTERN_RUNSERVER_AUTH_OIDC_VALIDATION_CLAIM`): `strict` refuses (`400`) a statement that breaks any rule of the specification; `lax` stores one that has the minimal form (an actor, `verb.id`, `object.id`, a UUID `id`) with the rules it broke recorded. See [Validation](validation.md).',
    parse: oneOf('strict', 'lax'),
  },
  xapiStrictVersion: {
    name: 'LECTERN_XAPI_STRICT_VERSION',
    default: 'false',
    help: '`true`: statements stored under 2.0 are served to 1.0.3 clients converted (no `contextAgents`/`contextGroups`, `version` `1.0.0`); `false`: as stored.',
    parse: bool,
  },
  xapiForwardings: {
    name: 'LECTERN_XAPI_FORWARDINGS',
    default: '[]',
    help: 'Statement forwarding targets: a JSON list of `{"is_active": true, "url": "https://lrs.example.com/xAPI/statements", "basic_username": "…", "basic_password": "…", "max_retries": 5, "timeout": 10}` (Ralph\'s format; all six keys required; `timeout` in seconds, fractions allowed; `max_retries` retries after the first attempt). A bad entry stops start-up naming the entry and the key; `is_active: false` entries are logged once and ignored. See [Statement forwarding](forwarding.md).',
    parse: forwardings,
  },
  forwardingBackoff: {
    name: 'LECTERN_XAPI_FORWARDING_BACKOFF',
    default: '1000',
    help: 'Milliseconds before the first retry of a failed forwarding; each next wait doubles, up to 5 minutes, with jitter (a random 50–100 % of it).',
    parse: int(1, 300_000),
  },
  forwardingBatchSize: {
    name: 'LECTERN_XAPI_FORWARDING_BATCH_SIZE',
    default: '100',
    help: 'Most statements sent to a target in one POST.',
    parse: int(1, 10_000),
  },
  forwardingLease: {
    name: 'LECTERN_XAPI_FORWARDING_LEASE',
    default: '60',
    help: 'Seconds a server process holds the statements it is sending to a target (renewed while it sends). Items held by a process that died are sent again after this.',
    parse: num(1, 3600),
  },
  monitoringDsn: {
    name: 'LECTERN_MONITORING_DSN',
    default: '',
    help: 'Sentry-compatible DSN, `{PROTOCOL}://{PUBLIC_KEY}:{SECRET_KEY}@{HOST}{PATH}/{PROJECT_ID}`: reports unhandled errors and performance transactions of the server and of the command line (official Sentry SDK). Empty: off, and the SDK is not even loaded. A malformed DSN stops start-up.',
    parse: dsn,
  },
  executionEnvironment: {
    name: 'LECTERN_EXECUTION_ENVIRONMENT',
    default: 'development',
    help: 'Environment name on monitoring events (e.g. `production`).',
    parse: str,
  },
  monitoringLrsTracesSampleRate: {
    name: 'LECTERN_MONITORING_LRS_TRACES_SAMPLE_RATE',
    default: '0.1',
    help: 'Share of server requests sent as transactions, 0.0–1.0.',
    parse: num(0, 1),
  },
  monitoringCliTracesSampleRate: {
    name: 'LECTERN_MONITORING_CLI_TRACES_SAMPLE_RATE',
    default: '1.0',
    help: 'Share of command-line runs sent as transactions, 0.0–1.0.',
    parse: num(0, 1),
  },
  monitoringIgnoreHealthChecks: {
    name: 'LECTERN_MONITORING_IGNORE_HEALTH_CHECKS',
    default: 'false',
    help: '`true`: `/lbheartbeat` and `/heartbeat` requests send no transactions.',
    parse: bool,
  },
  metricsAccess: {
    name: 'LECTERN_METRICS_ACCESS',
    default: 'scope',
    help: "`GET /metrics`: `scope` needs credentials holding the `all` scope in the default store (no `target`: the operator's user until an operator role exists; its figures count every store, so a store's own `all` user gets 403); `open` serves it without credentials (a scraper on a private network); `off` removes the route.",
    parse: oneOf('scope', 'open', 'off'),
  },
  auditFile: {
    name: 'LECTERN_AUDIT_FILE',
    default: 'lectern-audit.log',
    help: 'An erasure (`lectern erase`, the admin API, the console) appends two JSON lines here, when it starts and when it ends: what, when, by whom (the OS user or admin user) on which host, how many statements/attachments/documents; never the agent or any data. Relative to the working directory.',
    parse: str,
  },
  rejectionsMax: {
    name: 'LECTERN_REJECTIONS_MAX',
    default: '10000',
    help: 'Most refused writes (400, 409, 413 on statements and documents) kept per store for `lectern rejections` (docs/rejections.md); each write of kept rejections trims its store to this many, each credential to its fair share, oldest first. 0 keeps none.',
    parse: int(0, 10_000_000),
  },
  rejectionsMaxBody: {
    name: 'LECTERN_REJECTIONS_MAX_BODY',
    default: String(64 * 1024),
    help: "Most bytes of a refused request's body kept with it (a multipart request keeps its JSON part only, never attachment data); a longer body is cut, and cannot be replayed.",
    parse: int(0, 16 * MiB),
  },
  rejectionsKeepDays: {
    name: 'LECTERN_REJECTIONS_KEEP_DAYS',
    default: '7',
    help: 'Days a refused write is kept: older ones are never listed nor replayed, and are dropped whenever rejections are written.',
    parse: int(1, 3650),
  },
  retentionDays: {
    name: 'LECTERN_RETENTION_DAYS',
    default: '0',
    help: 'Days statements are kept: when set, the server removes every hour, in every store, the statements stored more than this many days ago, as `lectern prune --before` does (their link rows, outbox items and lax violations, the attachments no remaining statement carried, and kept rejections as old; statements referring to them and documents stay). One process at a time (PostgreSQL: an advisory lock), in short batches. 0: never (the default).',
    parse: int(0, 36500),
  },
  pseudonymizeKey: {
    name: 'LECTERN_PSEUDONYMIZE_KEY',
    default: '',
    help: "The secret of `lectern erase --pseudonymize` (at least 16 characters): pseudonyms are HMAC-SHA256 of the person's identifier under it. Set it in the environment or `.env` of the machine that runs the command, generated once (e.g. `openssl rand -hex 32`) and kept like a password: the same key gives the same pseudonym (so a person erased twice, or in two stores, stays one pseudonym), and without it a pseudonym cannot be traced back. Empty: `--pseudonymize` refuses to run.",
    parse: (raw: string, name: string) => {
      if (raw !== '' && raw.length < 16) throw new ConfigError(`${name} must be at least 16 characters long (it keys the pseudonyms)`);
      return raw;
    },
  },
} satisfies Record<string, Setting<unknown>>;

type Settings = typeof SETTINGS;
export type Config = { [K in keyof Settings]: ReturnType<Settings[K]['parse']> };

/** Where the variables of an `environment()` result came from: the `.env` file's path, and the names it gave. */
const origins = new WeakMap<object, { file: string; fromFile: Set<string> }>();

/** Reads `.env` from `cwd` (if present) under the real environment, which wins. */
export function environment(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Record<string, string | undefined> {
  const file = resolve(cwd, '.env');
  let fromFile: Record<string, string> = {};
  if (existsSync(file)) {
    try {
      fromFile = parseEnv(readFileSync(file, 'utf8')) as Record<string, string>;
    } catch (err) {
      throw new ConfigError(`cannot read ${file}: ${(err as Error).message}`);
    }
  }
  const merged = { ...fromFile, ...env };
  origins.set(merged, { file, fromFile: new Set(Object.keys(fromFile).filter((name) => env[name] === undefined)) });
  return merged;
}

/** The variables a command's `--env-file` set in the environment (src/cli/env-file.ts), and that file's path. */
const envFileVariables = new Map<string, string>();

/** Records that `file` (an `--env-file`) set these variables, for the messages that say where a value came from. */
export function noteEnvFile(file: string, names: Iterable<string>): void {
  for (const name of names) envFileVariables.set(name, file);
}

/** "from /path/.env", "from /path/of/--env-file" or "from the environment", for a variable of an `environment()` result. */
function origin(env: Record<string, string | undefined>, name: string): string | undefined {
  const o = origins.get(env);
  if (!o) return undefined;
  if (o.fromFile.has(name)) return `from ${o.file}`;
  const file = envFileVariables.get(name);
  return file && env[name] === process.env[name] ? `from ${file}` : 'from the environment';
}

/** Levenshtein distance: the closest known name to a misspelled one. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length];
}

/** LECTERN_ variables that are not settings but the test suite's and the benchmark's own. */
const NOT_SETTINGS = /^LECTERN_(TEST|FUZZ|BENCH)_/;

/**
 * One warning per LECTERN_* variable that is no setting (a misspelling is otherwise silently
 * ignored), naming where it came from and the closest setting.
 */
export function unknownSettings(env: Record<string, string | undefined>): { variable: string; closest: string; message: string }[] {
  const known = Object.values(SETTINGS).map((s) => s.name);
  return Object.keys(env)
    .filter((name) => name.startsWith('LECTERN_') && !known.includes(name) && !NOT_SETTINGS.test(name))
    .sort()
    .map((variable) => {
      const closest = known.reduce((best, k) => (editDistance(variable, k) < editDistance(variable, best) ? k : best));
      const from = origin(env, variable);
      return { variable, closest, message: `${variable}${from ? ` (${from})` : ''} is not a Lectern setting and is ignored: did you mean ${closest}?` };
    });
}

/**
 * Builds the configuration. `overrides` (from command-line options) win over the environment and
 * are validated the same way, with the option's own name in the message; a bad value from the
 * environment says whether it came from `.env` or the real environment.
 */
export function loadConfig(env: Record<string, string | undefined> = environment(), overrides: Partial<Record<keyof Settings, { value: string; source: string }>> = {}): Config {
  const out: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(SETTINGS) as [keyof Settings, Setting<unknown>][]) {
    const override = overrides[key];
    const raw = override?.value ?? env[setting.name] ?? setting.default;
    try {
      out[key] = setting.parse(raw, override ? override.source : setting.name);
    } catch (err) {
      const from = !override && env[setting.name] !== undefined ? origin(env, setting.name) : undefined;
      if (err instanceof ConfigError && from) throw new ConfigError(`${err.message} (${from})`);
      throw err;
    }
  }
  const config = out as Config;
  if (config.maxBodiesInFlight !== undefined && config.maxBodiesInFlight < config.maxRequestSize) {
    throw new ConfigError(
      `LECTERN_MAX_BODIES_IN_FLIGHT (${config.maxBodiesInFlight}) must be at least LECTERN_MAX_REQUEST_SIZE (${config.maxRequestSize}): a largest request could never be read`,
    );
  }
  if (config.maxBodiesInFlightPerUser !== undefined && config.maxBodiesInFlightPerUser < config.maxRequestSize) {
    throw new ConfigError(
      `LECTERN_MAX_BODIES_IN_FLIGHT_PER_USER (${config.maxBodiesInFlightPerUser}) must be at least LECTERN_MAX_REQUEST_SIZE (${config.maxRequestSize}): a largest request could never be read`,
    );
  }
  if (authBackends(config).includes('oidc') && !config.oidcIssuerUri) {
    throw new ConfigError('LECTERN_RUNSERVER_AUTH_OIDC_ISSUER_URI is required when the oidc authentication backend is enabled');
  }
  return config;
}

/**
 * The rules between the store's settings, checked where the store is opened (src/ops/open-store.ts),
 * not by loadConfig: a command that opens none (`lectern auth`, monitoring's set-up) reads an
 * environment written for the server, whose backend may be chosen on runserver's command line
 * (`--backend postgres` in a unit file), not in the environment.
 */
export function checkStoreSettings(config: Pick<Config, 'backend' | 'postgresReadUrls'>): void {
  if (config.postgresReadUrls.length && config.backend !== 'postgres') {
    throw new ConfigError(
      'LECTERN_POSTGRES_READ_URLS needs the postgres backend: LECTERN_RUNSERVER_BACKEND=postgres or --backend postgres (read replicas are PostgreSQL standbys)',
    );
  }
}

/** Whether SQLite writes run on a thread of their own (one in-memory database cannot be shared by two threads' connections). */
export const sqliteWriterThread = (config: Pick<Config, 'backend' | 'sqliteWriterThread' | 'sqlitePath'>): boolean =>
  config.backend === 'sqlite' && config.sqliteWriterThread && config.sqlitePath !== ':memory:';

/** Bytes of request bodies a process holds at once: LECTERN_MAX_BODIES_IN_FLIGHT, by default 4 largest requests. */
export const bodiesInFlight = (config: Pick<Config, 'maxBodiesInFlight' | 'maxRequestSize'>): number => config.maxBodiesInFlight ?? 4 * config.maxRequestSize;

/** Bytes of the bodies in flight one user's requests may hold: LECTERN_MAX_BODIES_IN_FLIGHT_PER_USER, by default half of them. */
export const bodiesInFlightPerUser = (config: Pick<Config, 'maxBodiesInFlight' | 'maxBodiesInFlightPerUser' | 'maxRequestSize'>): number =>
  Math.min(bodiesInFlight(config), config.maxBodiesInFlightPerUser ?? Math.max(config.maxRequestSize, Math.floor(bodiesInFlight(config) / 2)));

/** The authentication backends in force: LECTERN_RUNSERVER_AUTH_BACKEND (the service description's name) when set, else ..._BACKENDS. */
export const authBackends = (config: Pick<Config, 'authBackend' | 'authBackends'>): ('basic' | 'oidc')[] => (config.authBackend.length ? config.authBackend : config.authBackends);
