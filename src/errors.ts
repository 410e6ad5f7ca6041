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

export type LrsErrorKind = 'bad_request' | 'forbidden' | 'not_found' | 'conflict' | 'precondition_failed' | 'too_large' | 'unavailable';

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

/**
 * Most problems one ValidationFailed reports: a body of a million bad statements must not answer
 * with a million issues (nor build one string of them all).
 */
export const MAX_ISSUES = 100;
/** The type of the last issue of a capped list: how many more were found. */
export const MORE_ISSUES = 'value_error.more_issues';
/** Longest text of one `loc` element or `msg` reported: both may quote a client's key or value. */
const MAX_TEXT = 200;

const clip = (s: string): string => (s.length > MAX_TEXT ? `${s.slice(0, MAX_TEXT)}…` : s);

/**
 * A 400 listing the problems found (body `{"detail": [{loc, msg, type}, ...]}`): the first
 * MAX_ISSUES, then, when there were more, one issue of type MORE_ISSUES saying how many. `more`
 * counts problems found but not collected (see validateStatements).
 */
export class ValidationFailed extends LrsError {
  constructor(issues: ValidationIssue[], more = 0) {
    // Already capped (e.g. rebuilt from the SQLite writer thread's message): kept as it is.
    const capped = issues.length > 0 && issues[issues.length - 1].type === MORE_ISSUES && issues.length <= MAX_ISSUES + 1;
    let kept = issues;
    if (!capped) {
      kept = issues.slice(0, MAX_ISSUES).map((i) => ({ loc: i.loc.map((l) => (typeof l === 'string' ? clip(l) : l)), msg: clip(i.msg), type: i.type }));
      const rest = more + issues.length - Math.min(issues.length, MAX_ISSUES);
      if (rest > 0) kept.push({ loc: [], msg: `and ${rest} more problem${rest === 1 ? '' : 's'} not listed`, type: MORE_ISSUES });
    }
    super('bad_request', kept.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; '), kept);
    this.name = 'ValidationFailed';
  }
}
