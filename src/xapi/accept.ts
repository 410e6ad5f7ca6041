/**
 * What the Statement resource accepts from a PUT or POST — and `lectern import` from a file, by
 * the same rules: the statements validated under the request's version, their attachments matched
 * with the data received (xAPI-Data §2.4.11), signed statements verified (§2.6).
 */
import { ValidationFailed } from '../errors.ts';
import { type AttachmentBlob, type AttachmentPart, attachmentBlobs, matchAttachments } from './attachments.ts';
import { type CheckedSignatures, verifySignedStatement } from './signature.ts';
import type { Statement } from './types.ts';
import { validateStatements, validateStatementsLax, type Violations } from './validate.ts';
import type { XapiVersion } from './versions.ts';

/** How a write is validated (docs/validation.md): every rule, or the minimal form with the rest recorded. */
export type ValidationMode = 'strict' | 'lax';
export const VALIDATION_MODES: readonly ValidationMode[] = ['strict', 'lax'];

const NO_VIOLATIONS: readonly undefined[] = [];

/** Longest run of signature checks before the event loop is given back. */
const TURN_MS = 20;

/** What a PUT/POST carries: the statements as sent and the attachment data, by lower-case sha2. */
export interface Received {
  value: unknown;
  parts: Map<string, AttachmentPart>;
}

/**
 * Validates the statements, checks their attachments against the parts received and verifies
 * signed statements (xAPI-Data §2.6). `id` is PUT's statementId (lower-case). Returns the statements to store,
 * the attachment data to keep with them and, under lax, what each statement broke (by index).
 */
export async function acceptStatements(
  received: Received,
  version: XapiVersion,
  id?: string,
  mode: ValidationMode = 'strict',
): Promise<{ statements: Statement[]; blobs: AttachmentBlob[]; violations: readonly (Violations | undefined)[] }> {
  const lax = mode === 'lax' ? validateStatementsLax(received.value, version) : undefined;
  const { statements, issues, more } = lax ?? validateStatements(received.value, version);
  const violations = lax?.violations ?? NO_VIOLATIONS;
  if (issues.length) throw new ValidationFailed(issues, more);
  if (id !== undefined) {
    const given = statements[0].id;
    if (given !== undefined && given.toLowerCase() !== id) {
      throw new ValidationFailed([{ loc: [0, 'id'], msg: `the statement id ${given} differs from the statementId parameter ${id}`, type: 'value_error.id_mismatch' }]);
    }
    statements[0] = { ...statements[0], id };
  }
  matchAttachments(statements, received.parts);
  // Each JWS is checked once for the whole request, whichever statements declare it.
  const checked: CheckedSignatures = new Map();
  let turn = performance.now();
  for (let i = 0; i < statements.length; i++) {
    // Decoding and comparing signed payloads is work on the event loop: given back every TURN_MS.
    if (performance.now() - turn > TURN_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      turn = performance.now();
    }
    const signedId = await verifySignedStatement(statements[i], received.parts, version, checked);
    // Sent without an id, a signed statement is stored under the id it was signed with.
    if (signedId !== undefined && statements[i].id === undefined) statements[i] = { ...statements[i], id: signedId };
  }
  return { statements, blobs: attachmentBlobs(statements, received.parts), violations };
}
