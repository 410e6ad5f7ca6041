/**
 * How a setting's text becomes a value: the parsers the SETTINGS table in config.ts is written with,
 * and the error that names a bad variable.
 */
import { isIP } from 'node:net';
import { KNOWN_VERSIONS, parseServed, type XapiVersion } from './xapi-versions.ts';
import { redactUrl } from './redact.ts';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export type Parser<T> = (raw: string, name: string) => T;

export interface Setting<T> {
  name: string;
  default: string;
  help: string;
  parse: Parser<T>;
}

export const str: Parser<string> = (raw) => raw;

export const int =
  (min: number, max = Number.MAX_SAFE_INTEGER): Parser<number> =>
  (raw, name) => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
      throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got ${JSON.stringify(raw)}`);
    }
    return n;
  };

export const num =
  (min: number, max: number): Parser<number> =>
  (raw, name) => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
      throw new ConfigError(`${name} must be a number between ${min} and ${max}, got ${JSON.stringify(raw)}`);
    }
    return n;
  };

export const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (raw, name) => {
    if (!(values as string[]).includes(raw)) {
      throw new ConfigError(`${name} must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
    }
    return raw as T;
  };

export const bool: Parser<boolean> = (raw, name) => {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(raw)}`);
};

/** A list of xAPI versions this build implements (any spelling a request header may use). */
export const xapiVersions: Parser<XapiVersion[]> = (raw, name) => {
  const { served, unknown } = parseServed(list(raw, name));
  if (unknown.length || served.length === 0) {
    throw new ConfigError(`${name} must list one or more of ${KNOWN_VERSIONS.join(', ')} (comma-separated), got ${JSON.stringify(raw)}`);
  }
  return served;
};

export const list: Parser<string[]> = (raw) =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** A postgres:// or postgresql:// URL with a host and a database name. */
export const postgresUrl: Parser<string> = (raw, name) => {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a postgres://user[:password]@host[:port]/database URL, got ${JSON.stringify(redactUrl(raw))}`);
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new ConfigError(`${name} must start with postgres:// or postgresql://, got ${JSON.stringify(redactUrl(raw))}`);
  }
  if (u.pathname.length < 2) throw new ConfigError(`${name} must name a database (postgres://host/database), got ${JSON.stringify(redactUrl(raw))}`);
  return raw;
};

/** postgres:// URLs separated by commas (none when empty), each checked as postgresUrl, the bad one named by its place. */
export const postgresUrls: Parser<string[]> = (raw, name) => list(raw, name).map((url, i, all) => postgresUrl(url, all.length > 1 ? `${name} (URL ${i + 1})` : name));

/** The SETTINGS table below uses these parsers too. */
export const nonEmpty: Parser<string> = (raw, name) => {
  if (raw.trim() === '') throw new ConfigError(`${name} cannot be empty`);
  return raw.trim();
};

export const httpUrlOrEmpty: Parser<string> = (raw, name) => {
  if (raw === '') return raw;
  let u: URL | undefined;
  try {
    u = new URL(raw);
  } catch {
    u = undefined;
  }
  if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) throw new ConfigError(`${name} must be an http(s) URL, got ${JSON.stringify(raw)}`);
  return raw;
};

/** A comma list of `basic`/`oidc`; `mayBeEmpty` for the single-backend name, unset by default. */
export const authBackendList =
  (mayBeEmpty: boolean): Parser<('basic' | 'oidc')[]> =>
  (raw, name) => {
    const names = list(raw, name);
    const bad = names.filter((n) => n !== 'basic' && n !== 'oidc');
    if (bad.length || (!mayBeEmpty && !names.length)) {
      throw new ConfigError(`${name} must be basic, oidc or basic,oidc, got ${JSON.stringify(raw)}`);
    }
    return [...new Set(names)] as ('basic' | 'oidc')[];
  };

/**
 * A monitoring DSN, `{PROTOCOL}://{PUBLIC_KEY}[:{SECRET_KEY}]@{HOST}[:{PORT}]{PATH}/{PROJECT_ID}`,
 * or '' (monitoring off). Messages never repeat the keys.
 */
export const dsn: Parser<string> = (raw, name) => {
  if (raw.trim() === '') return '';
  const shape = `${name} must look like https://PUBLIC_KEY@HOST/PROJECT_ID ({PROTOCOL}://{PUBLIC_KEY}:{SECRET_KEY}@{HOST}{PATH}/{PROJECT_ID})`;
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new ConfigError(`${shape}; it is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(`${shape}; its protocol is ${u.protocol.slice(0, -1)}, not http or https`);
  if (!u.username) throw new ConfigError(`${shape}; it has no PUBLIC_KEY before the @`);
  if (!/^\/(.*\/)?[\w-]+$/.test(u.pathname)) throw new ConfigError(`${shape}; it does not end with a PROJECT_ID`);
  if (u.search || u.hash) throw new ConfigError(`${shape}; it has a query string or fragment`);
  return raw.trim();
};

/** Fastify's `trustProxy`: off, on, or the proxies' addresses and CIDR ranges (`loopback`, `uniquelocal`, `linklocal` name theirs). */
export const trustProxy: Parser<boolean | string[]> = (raw, name) => {
  const v = raw.trim().toLowerCase();
  if (['', '0', 'false', 'no', 'off'].includes(v)) return false;
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  const proxies = list(raw, name);
  const bad = proxies.filter((p) => {
    if (['loopback', 'uniquelocal', 'linklocal'].includes(p)) return false;
    const [address, bits, ...rest] = p.split('/');
    const family = isIP(address);
    return !family || rest.length > 0 || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128)));
  });
  if (bad.length) throw new ConfigError(`${name} must be true, false or a comma-separated list of IP addresses and CIDR ranges, got ${JSON.stringify(bad.join(','))}`);
  return proxies;
};

/** One entry of LECTERN_XAPI_FORWARDINGS, as src/forwarding/ uses it. */
export interface ForwardingTarget {
  isActive: boolean;
  /** The target's statements endpoint (e.g. https://lrs.example.com/xAPI/statements); also the target's name in stats. */
  url: string;
  username: string;
  password: string;
  /** Retries after the first failed attempt before an item becomes a dead letter. */
  maxRetries: number;
  /** Seconds of network inactivity (connect, waiting for headers, between body chunks) before a request fails. */
  timeoutSeconds: number;
}

const FORWARDING_KEYS = ['is_active', 'url', 'basic_username', 'basic_password', 'max_retries', 'timeout'] as const;

/** A value for a message: the type only for secrets. */
const shown = (key: string, v: unknown): string => (key === 'basic_password' ? `a ${v === null ? 'null' : typeof v}` : (JSON.stringify(v) ?? String(v)));

/**
 * LECTERN_XAPI_FORWARDINGS: a JSON list of `{is_active, url, basic_username, basic_password,
 * max_retries, timeout}` (Ralph's format, all six keys required). Parsed strictly: a wrong type is
 * an error naming the entry and the key, never coerced. Passwords never appear in a message.
 */
export const forwardings: Parser<ForwardingTarget[]> = (raw, name) => {
  if (raw.trim() === '') return [];
  let entries: unknown;
  try {
    entries = JSON.parse(raw);
  } catch (err) {
    throw new ConfigError(`${name} must be a JSON list of forwarding configurations: ${(err as Error).message}`);
  }
  if (!Array.isArray(entries))
    throw new ConfigError(`${name} must be a JSON list of forwarding configurations, got ${typeof entries === 'object' && entries ? 'an object' : JSON.stringify(entries)}`);
  const targets = entries.map((entry: unknown, i): ForwardingTarget => {
    const at = `${name}[${i}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new ConfigError(`${at} must be an object with the keys ${FORWARDING_KEYS.join(', ')}`);
    const e = entry as Record<string, unknown>;
    for (const key of FORWARDING_KEYS) if (!(key in e)) throw new ConfigError(`${at} lacks the key "${key}" (all of ${FORWARDING_KEYS.join(', ')} are required)`);
    const bad = (key: string, what: string) => new ConfigError(`${at}.${key} must be ${what}, got ${shown(key, e[key])}`);
    if (typeof e.is_active !== 'boolean') throw bad('is_active', 'true or false');
    for (const key of ['basic_username', 'basic_password'] as const) if (typeof e[key] !== 'string') throw bad(key, 'a string');
    if (typeof e.max_retries !== 'number' || !Number.isInteger(e.max_retries) || e.max_retries < 0 || e.max_retries > 1000) {
      throw bad('max_retries', 'an integer from 0 to 1000');
    }
    if (typeof e.timeout !== 'number' || !Number.isFinite(e.timeout) || e.timeout <= 0 || e.timeout > 3600) throw bad('timeout', 'a number of seconds above 0 and at most 3600');
    if (typeof e.url !== 'string') throw bad('url', 'an http:// or https:// URL');
    let url: URL;
    try {
      url = new URL(e.url);
    } catch {
      throw bad('url', 'an http:// or https:// URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad('url', 'an http:// or https:// URL');
    if (url.username || url.password) throw new ConfigError(`${at}.url must not contain credentials: put them in basic_username and basic_password`);
    return {
      isActive: e.is_active,
      url: e.url,
      username: e.basic_username as string,
      password: e.basic_password as string,
      maxRetries: e.max_retries,
      timeoutSeconds: e.timeout,
    };
  });
  const seen = new Map<string, number>();
  targets.forEach((t, i) => {
    if (!t.isActive) return;
    const first = seen.get(t.url);
    // The url names a target's queue and counters: two active entries may not share one.
    if (first !== undefined) throw new ConfigError(`${name}[${i}].url repeats the url of entry ${first}; each active target needs its own url`);
    seen.set(t.url, i);
  });
  return targets;
};

/** A secret: empty (then generated where it is used) or at least 32 characters. */
export const secretOrEmpty: Parser<string> = (raw, name) => {
  if (raw !== '' && raw.length < 32) throw new ConfigError(`${name} must be at least 32 characters (or empty), got ${raw.length}`);
  return raw;
};
