/** The forwarding settings as the forwarder and the outbox use them (parsed in src/config.ts). */
import type { ForwardingTarget } from '../config.ts';

export type { ForwardingTarget };

/** The urls of the active targets: the outbox queues each stored statement once for each. */
export const activeTargets = (targets: ForwardingTarget[]): string[] => targets.filter((t) => t.isActive).map((t) => t.url);
