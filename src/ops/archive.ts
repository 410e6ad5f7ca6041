/**
 * The files of an export, which an import reads back: the statements (NDJSON, one stored statement
 * per line), the attachments folder (one file per SHA-256, and NOT_CARRIED_FILE) and the documents
 * file (one JSON line per document, content base64).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KeyedDocument } from '../store/types.ts';
import { actorFromKey } from '../xapi/agents.ts';
import { OpsError } from './errors.ts';

/**
 * In an export's attachments folder, beside the data files (named by sha2): the attachments that
 * statements declared without carrying their data (Store.attachmentsNotCarried), one
 * `{"id", "sha2"}` line each. An import gives those statements no part, so that they do not
 * become carriers of data their authority never sent. A folder without it (an older export)
 * gives every statement the data of each attachment it declares.
 */
export const NOT_CARRIED_FILE = 'not-carried.ndjson';

/** The (statement id, sha2) pairs of NOT_CARRIED_FILE in `dir`, as `id sha2` strings. */
export function readNotCarried(dir: string): Set<string> {
  const file = join(dir, NOT_CARRIED_FILE);
  const pairs = new Set<string>();
  if (!existsSync(file)) return pairs;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    let v: { id?: unknown; sha2?: unknown };
    try {
      v = JSON.parse(line) as typeof v;
    } catch {
      throw new OpsError(`${file}: a line is not JSON: ${line.slice(0, 80)}`);
    }
    if (typeof v.id !== 'string' || typeof v.sha2 !== 'string') throw new OpsError(`${file}: each line needs an "id" and a "sha2"`);
    pairs.add(`${v.id.toLowerCase()} ${v.sha2.toLowerCase()}`);
  }
  return pairs;
}

/** One line of the documents file (read back by importDocuments in ./import.ts). */
export function documentLine(d: KeyedDocument): string {
  const agent = d.key.agent ? actorFromKey(d.key.agent) : undefined;
  return `${JSON.stringify({
    kind: d.key.kind,
    activityId: d.key.activityId || undefined,
    agent,
    registration: d.key.registration || undefined,
    id: d.key.docId,
    contentType: d.contentType,
    updated: new Date(d.updatedMs).toISOString(),
    content: d.content.toString('base64'),
  })}\n`;
}
