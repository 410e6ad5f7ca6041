/**
 * What a use case refuses: a request the caller must change. An LrsError, so that an HTTP adapter
 * answers it with its status as it does the domain's errors; the CLI prints its message (exit 2).
 */
import { LrsError, type LrsErrorKind } from '../errors.ts';

export class OpsError extends LrsError {
  /**
   * The input field the refusal is about, where the message alone would not say where: an adapter
   * names it as its own (the admin API: `["body", field]`).
   */
  readonly field: string | undefined;
  constructor(message: string, kind: LrsErrorKind = 'bad_request', field?: string) {
    super(kind, message);
    this.name = 'OpsError';
    this.field = field;
  }
}
