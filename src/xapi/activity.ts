/**
 * The canonical Activity the LRS maintains (xAPI-Data 2.4.4.1.s4: the LRS SHOULD update its
 * canonical definition from the definitions it receives).
 */
import type { Activity, ActivityDefinition, LanguageMap } from './types.ts';

const LANGUAGE_MAPS = ['name', 'description'] as const;

/**
 * Merges a newly received definition into the kept one: language maps are merged entry by entry
 * (the newer text wins for a language), every other property the newer definition carries
 * replaces the kept one, and properties it leaves out are kept.
 */
export function mergeDefinition(kept: ActivityDefinition | undefined, incoming: ActivityDefinition): ActivityDefinition {
  if (!kept) return incoming;
  const out: ActivityDefinition = { ...kept, ...incoming };
  for (const k of LANGUAGE_MAPS) {
    if (kept[k] && incoming[k]) out[k] = { ...kept[k], ...incoming[k] } as LanguageMap;
  }
  if (kept.extensions && incoming.extensions) out.extensions = { ...kept.extensions, ...incoming.extensions };
  return out;
}

/** The Activity object served by GET /activities (and by canonical statement format). */
export function canonicalActivity(id: string, definition: ActivityDefinition | undefined): Activity {
  return definition ? { objectType: 'Activity', id, definition } : { objectType: 'Activity', id };
}
