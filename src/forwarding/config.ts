/**
 * LECTERN_XAPI_FORWARDINGS: a JSON list of `{is_active, url, basic_username, basic_password,
 * max_retries, timeout}` (Ralph's format, all six keys required). Parsed strictly: a wrong type is
 * an error naming the entry and the key, never coerced. Passwords never appear in a message.
 */

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

/** Thrown with a message naming the variable, the entry and the key; src/config.ts turns it into a ConfigError. */
export class ForwardingConfigError extends Error {}

const KEYS = ['is_active', 'url', 'basic_username', 'basic_password', 'max_retries', 'timeout'] as const;

/** A value for a message: the type only for secrets. */
const shown = (key: string, v: unknown): string => (key === 'basic_password' ? `a ${v === null ? 'null' : typeof v}` : JSON.stringify(v) ?? String(v));

export function parseForwardings(raw: string, name: string): ForwardingTarget[] {
  if (raw.trim() === '') return [];
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch (err) {
    throw new ForwardingConfigError(`${name} must be a JSON list of forwarding configurations: ${(err as Error).message}`);
  }
  if (!Array.isArray(list)) throw new ForwardingConfigError(`${name} must be a JSON list of forwarding configurations, got ${typeof list === 'object' && list ? 'an object' : JSON.stringify(list)}`);
  const targets = list.map((entry: unknown, i): ForwardingTarget => {
    const at = `${name}[${i}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new ForwardingConfigError(`${at} must be an object with the keys ${KEYS.join(', ')}`);
    const e = entry as Record<string, unknown>;
    for (const key of KEYS) if (!(key in e)) throw new ForwardingConfigError(`${at} lacks the key "${key}" (all of ${KEYS.join(', ')} are required)`);
    const bad = (key: string, what: string) => new ForwardingConfigError(`${at}.${key} must be ${what}, got ${shown(key, e[key])}`);
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
    if (url.username || url.password) throw new ForwardingConfigError(`${at}.url must not contain credentials: put them in basic_username and basic_password`);
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
    if (first !== undefined) throw new ForwardingConfigError(`${name}[${i}].url repeats the url of entry ${first}; each active target needs its own url`);
    seen.set(t.url, i);
  });
  return targets;
}

/** The urls of the active targets: the outbox queues each stored statement once for each. */
export const activeTargets = (targets: ForwardingTarget[]): string[] => targets.filter((t) => t.isActive).map((t) => t.url);
