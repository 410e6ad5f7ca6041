/**
 * Error and performance monitoring with the official Sentry SDK, for the server and the command
 * line. With LECTERN_MONITORING_DSN unset the SDK is never imported (it patches modules and
 * starts timers on import). Every payload is scrubbed: credentials, passwords, tokens, cookies,
 * request bodies (statements, documents) and query strings never leave the process.
 */
import type { Config } from '../config.ts';

export type MonitoredProgram = 'lrs' | 'cli';

/** What the rest of Lectern sees of monitoring; the SDK stays behind it. */
export interface Monitoring {
  /** Reports an error nobody handled (a 500, a crashed command). */
  captureException(err: unknown, context?: Record<string, string>): void;
  /** Runs a command inside a transaction named after it. */
  command<T>(name: string, fn: () => Promise<T>): Promise<T>;
  /** Sends what is queued; resolves false when the timeout came first. */
  flush(timeoutMs?: number): Promise<boolean>;
  /** Values to redact wherever they appear (a password given on the command line). */
  addSecret(value: string): void;
}

/** Header, field and attribute names whose values are secrets. */
const SECRET_KEY = /authorization|password|passwd|secret|token|cookie|api[-_]?key|credential|^dsn$/i;
/** Credentials inside free text: `Basic xxx`, `Bearer xxx`, `user:password@` in URLs. */
const SECRET_TEXT: [RegExp, string][] = [
  [/\b(Basic|Bearer)\s+[A-Za-z0-9+/=._~-]+/gi, '$1 [Filtered]'],
  [/(\/\/[^/:@\s]*):[^@/\s]*@/g, '$1:[Filtered]@'],
];
/** Keys that hold request bodies or query strings (statements, documents, agents, alternate-syntax forms). */
const BODY_KEY = new Set(['query_string', 'body', 'http.query', 'url.query', 'http.request.body']);
const URL_KEY = new Set(['url', 'url.full', 'http.url', 'http.target']);
const FILTERED = '[Filtered]';

/** Returns a copy of `value` with every secret and body replaced by `[Filtered]`. */
export function scrub<T>(value: T, secrets: ReadonlySet<string> = new Set(), parent = '', depth = 0): T {
  if (typeof value === 'string') {
    let s: string = value;
    for (const [re, by] of SECRET_TEXT) s = s.replace(re, by);
    for (const secret of secrets) if (secret) s = s.split(secret).join(FILTERED);
    return s as T;
  }
  if (typeof value !== 'object' || value === null || depth > 20) return value;
  if (Array.isArray(value)) return value.map((v) => scrub(v, secrets, parent, depth + 1)) as T;
  // Payloads are plain JSON-like data; SDK internals (scopes, requests) are not sent as such.
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (k === 'sdkProcessingMetadata') out[k] = v;
    else if (SECRET_KEY.test(k) || BODY_KEY.has(k) || (k === 'data' && parent === 'request')) out[k] = FILTERED;
    else if (URL_KEY.has(k) && typeof v === 'string') out[k] = scrub(v.split('?')[0], secrets, k, depth + 1);
    else out[k] = scrub(v, secrets, k, depth + 1);
  }
  return out as T;
}

/** Request and response headers worth seeing in an event. */
const SAFE_HEADERS = ['user-agent', 'content-type', 'content-length', 'accept', 'accept-language', 'x-experience-api-version', 'x-request-id'];

/** The health checks, which a load balancer polls every few seconds. */
const HEALTH_CHECK = /^(GET|HEAD) \/(__)?(lb)?heartbeat(__)?\/?$/;

/**
 * Starts monitoring `program` when a DSN is configured; undefined (and nothing loaded) otherwise.
 * For the server, call it before the HTTP modules are imported so the SDK can instrument them.
 */
export async function startMonitoring(program: MonitoredProgram, config: Config): Promise<Monitoring | undefined> {
  if (!config.monitoringDsn) return undefined;
  const Sentry = await import('@sentry/node');
  const secrets = new Set<string>();
  Sentry.init({
    dsn: config.monitoringDsn,
    environment: config.executionEnvironment,
    release: `lectern@${(await import('../version.ts')).LECTERN_VERSION}`,
    tracesSampleRate: program === 'lrs' ? config.monitoringLrsTracesSampleRate : config.monitoringCliTracesSampleRate,
    // Classic transaction items: what every Sentry-compatible service (self-hosted Sentry,
    // GlitchTip) ingests; the default span streaming needs a recent sentry.io.
    traceLifecycle: 'static',
    // Collect only what cannot hold a secret or a statement; the scrubbers below are the backstop.
    dataCollection: {
      userInfo: false,
      cookies: false,
      httpHeaders: { request: { allow: SAFE_HEADERS }, response: { allow: SAFE_HEADERS } },
      httpBodies: [],
      urlQueryParams: false,
      databaseQueryData: false,
      queues: false,
    },
    includeLocalVariables: false,
    serverName: undefined,
    ignoreSpans: config.monitoringIgnoreHealthChecks ? [HEALTH_CHECK] : [],
    beforeSend: (event) => scrub(event, secrets),
    beforeSendTransaction: (event) => scrub(event, secrets),
    beforeBreadcrumb: (crumb) => scrub(crumb, secrets),
    beforeSendSpan: Sentry.withStaticSpan((span) => scrub(span, secrets)),
  });
  Sentry.setTag('program', program);
  return {
    captureException(err, context) {
      Sentry.captureException(err, context && { tags: context });
    },
    command(name, fn) {
      return Sentry.startSpan({ name: `lectern ${name}`, op: 'cli.command', forceTransaction: true }, fn);
    },
    flush(timeoutMs = 2000) {
      return Sentry.flush(timeoutMs);
    },
    addSecret(value) {
      if (value) secrets.add(value);
    },
  };
}
