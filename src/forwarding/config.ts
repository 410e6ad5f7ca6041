/** The forwarding settings as the forwarder and the outbox use them (parsed in src/config.ts). */
import type { ForwardingTarget } from '../config.ts';

export type { ForwardingTarget };

/**
 * The urls of the active targets (LECTERN_XAPI_FORWARDINGS): the outbox queues each stored
 * statement once for each, and the admin API, the console and the CLI report them even with
 * nothing queued yet.
 */
export const activeTargets = (targets: readonly ForwardingTarget[]): string[] => targets.filter((t) => t.isActive).map((t) => t.url);
