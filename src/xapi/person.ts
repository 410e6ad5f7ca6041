/**
 * The Person object of the Agents resource (xAPI-Communication §2.4.s4): an Agent's properties
 * as arrays, where several names and identifiers may appear.
 */
import { ifiKey } from './agents.ts';
import type { Account, Agent, Statement } from './types.ts';

export interface Person {
  objectType: 'Person';
  name?: string[];
  mbox?: string[];
  mbox_sha1sum?: string[];
  openid?: string[];
  account?: Account[];
}

/** Names given to the agent with IFI key `key` anywhere in a statement (extensions excepted). */
function namesIn(value: unknown, key: string, out: Set<string>): void {
  if (Array.isArray(value)) {
    for (const v of value) namesIn(v, key, out);
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  const o = value as Record<string, unknown>;
  if (typeof o.name === 'string' && o.objectType !== 'Activity' && ifiKey(o as Agent) === key) out.add(o.name);
  for (const [k, v] of Object.entries(o)) if (k !== 'extensions' && k !== 'definition') namesIn(v, key, out);
}

/**
 * The Person for an Agent (§2.4.s3): the LRS has no directory service, so its only identifier is
 * the one asked for, and its names are the request's and every name the statements in `seen`
 * gave that agent (newest first, each once).
 */
export function personOf(agent: Agent, seen: Statement[] = []): Person {
  const p: Person = { objectType: 'Person' };
  const names = new Set<string>();
  if (agent.name !== undefined) names.add(agent.name);
  const key = ifiKey(agent);
  if (key !== undefined) for (const s of seen) namesIn(s, key, names);
  if (names.size) p.name = [...names];
  if (agent.mbox !== undefined) p.mbox = [agent.mbox];
  if (agent.mbox_sha1sum !== undefined) p.mbox_sha1sum = [agent.mbox_sha1sum];
  if (agent.openid !== undefined) p.openid = [agent.openid];
  if (agent.account !== undefined) p.account = [{ homePage: agent.account.homePage, name: agent.account.name }];
  return p;
}
