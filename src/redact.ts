/** Secrets masked out of text that goes into messages and logs (bottom layer: config and the stores use it). */

/** The URL with its password masked. */
export function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return raw.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');
  }
}
