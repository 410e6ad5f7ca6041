/**
 * Errors that carry an HTTP meaning but no HTTP machinery: the domain and the store throw them,
 * `src/http/errors.ts` turns them into responses.
 */

/** One problem found in a request, Ralph/FastAPI style: where it is, what is wrong, a stable code. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
}

export type LrsErrorKind =
  | 'bad_request'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'precondition_failed'
  | 'too_large'
  | 'unavailable';

const STATUS: Record<LrsErrorKind, number> = {
  bad_request: 400,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  precondition_failed: 412,
  too_large: 413,
  unavailable: 503,
};

export class LrsError extends Error {
  readonly kind: LrsErrorKind;
  readonly issues: ValidationIssue[] | undefined;
  constructor(kind: LrsErrorKind, message: string, issues?: ValidationIssue[]) {
    super(message);
    this.name = 'LrsError';
    this.kind = kind;
    this.issues = issues;
  }
  get status(): number {
    return STATUS[this.kind];
  }
}

/** A 400 listing every problem found (body `{"detail": [{loc, msg, type}, ...]}`). */
export class ValidationFailed extends LrsError {
  constructor(issues: ValidationIssue[]) {
    super('bad_request', issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; '), issues);
    this.name = 'ValidationFailed';
  }
}
