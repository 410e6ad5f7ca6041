/**
 * Agent and Group identity: inverse functional identifiers (IFIs) and the keys the store indexes
 * them by. Two Agents/Groups are the same when they use the same IFI with the same value.
 */
import type { Actor, Agent, Group } from './types.ts';

export type IfiName = 'mbox' | 'mbox_sha1sum' | 'openid' | 'account';
export const IFI_NAMES: readonly IfiName[] = ['mbox', 'mbox_sha1sum', 'openid', 'account'];

/**
 * A stable string key for an actor's IFI, or undefined for an anonymous Group. The key keeps the
 * IFI's name so an mbox never equals an openid with the same text. Statements stored under lax
 * validation may hold agents of other shapes (a group member, an instructor): an identifier of
 * the wrong type is no identifier.
 */
export function ifiKey(actor: Agent | Group): string | undefined {
  if (typeof actor.mbox === 'string') return `mbox:${actor.mbox}`;
  if (typeof actor.mbox_sha1sum === 'string') return `mbox_sha1sum:${actor.mbox_sha1sum.toLowerCase()}`;
  if (typeof actor.openid === 'string') return `openid:${actor.openid}`;
  const account = actor.account;
  if (typeof account === 'object' && account !== null) return `account:${JSON.stringify([account.homePage, account.name])}`;
  return undefined;
}

/** The actor an IFI key stands for (its identifier only): the inverse of ifiKey. */
export function actorFromKey(key: string): Agent | undefined {
  const colon = key.indexOf(':');
  const name = key.slice(0, colon);
  const value = key.slice(colon + 1);
  if (name === 'mbox' || name === 'mbox_sha1sum' || name === 'openid') return { objectType: 'Agent', [name]: value };
  if (name === 'account') {
    try {
      const [homePage, accountName] = JSON.parse(value) as [string, string];
      return { objectType: 'Agent', account: { homePage, name: accountName } };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

export const isGroup = (actor: Actor): actor is Group => actor.objectType === 'Group';

/**
 * Keys under which an actor is found by the `agent` filter: its own IFI, and for a Group the IFIs
 * of its members too (the spec: a Group whose members match the Agent is a match).
 */
export function actorKeys(actor: Actor): string[] {
  const keys: string[] = [];
  const own = ifiKey(actor);
  if (own) keys.push(own);
  if (isGroup(actor) && Array.isArray(actor.member)) {
    for (const m of actor.member) {
      if (typeof m !== 'object' || m === null) continue;
      const k = ifiKey(m);
      if (k) keys.push(k);
    }
  }
  return keys;
}

/** Only the identifying part of an actor (the `ids` statement format). */
export function idsOnlyActor(actor: Actor): Actor {
  if (typeof actor !== 'object' || actor === null) return actor; // kept as sent under lax validation
  const out: Record<string, unknown> = {};
  if (actor.objectType) out.objectType = actor.objectType;
  for (const k of IFI_NAMES) if (actor[k] !== undefined) out[k] = actor[k];
  if (isGroup(actor) && Array.isArray(actor.member) && ifiKey(actor) === undefined) {
    out.member = actor.member.map((m) => idsOnlyActor(m));
  }
  return out as Actor;
}
