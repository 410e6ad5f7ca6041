/**
 * The Person object of the Agents resource (xAPI-Communication §2.4.s4): an Agent's properties
 * as arrays, where several identifiers may appear.
 */
import type { Account, Agent } from './types.ts';

export interface Person {
  objectType: 'Person';
  name?: string[];
  mbox?: string[];
  mbox_sha1sum?: string[];
  openid?: string[];
  account?: Account[];
}

/**
 * The Person for an Agent. The LRS has no directory service, so the Person holds exactly what
 * the request gave (§2.4.s3.b3): its name, if any, and its one identifier.
 */
export function personOf(agent: Agent): Person {
  const p: Person = { objectType: 'Person' };
  if (agent.name !== undefined) p.name = [agent.name];
  if (agent.mbox !== undefined) p.mbox = [agent.mbox];
  if (agent.mbox_sha1sum !== undefined) p.mbox_sha1sum = [agent.mbox_sha1sum];
  if (agent.openid !== undefined) p.openid = [agent.openid];
  if (agent.account !== undefined) p.account = [{ homePage: agent.account.homePage, name: agent.account.name }];
  return p;
}
