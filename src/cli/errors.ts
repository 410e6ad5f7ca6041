/**
 * The CLI's own error: kept apart from the commands so that each of them can throw it without
 * loading another command's dependencies (`lectern auth` loads bcrypt).
 */

/** A mistake of the user's: one line on stderr, exit code 2 (see USER_ERRORS in ./program.ts). */
export class CliError extends Error {
  override name = 'CliError';
}
