/**
 * Options several `lectern` commands share, each declared once: its flags, its help and how its
 * value is read. A time (GIVEN_TIME) is read by the option itself, so that every command takes
 * the same forms and refuses others with the same words, naming the option.
 */
import { Option } from 'commander';
import { GIVEN_TIME, givenTimeError, parseGivenTime } from '../xapi/validate.ts';
import { CliError } from './errors.ts';

export const backendOption = () => new Option('-b, --backend <backend>', 'storage backend: sqlite or postgres (LECTERN_RUNSERVER_BACKEND; other settings as for runserver)');

export const progressOption = () => new Option('--progress-interval <seconds>', 'seconds between progress lines when stderr is not a terminal').default('10');

// The outbox belongs to the database, shared by its stores: -t/--target (a store elsewhere) is
// refused with the reason, and a forwarding target is named by --url.
export const outboxTarget = () => new Option('-t, --target <target>', 'not for forwarding: the outbox is shared by every store of the database').hideHelp();

/** An option taking a time: `what` it bounds, then the rule; the command receives epoch ms. */
export function timeOption(flags: string, what: string): Option {
  const name = /--[\w-]+/.exec(flags)![0];
  return new Option(flags, `${what}: ${GIVEN_TIME}`).argParser((value: string) => {
    const ms = parseGivenTime(value);
    if (ms === undefined) throw new CliError(givenTimeError(name, value));
    return ms;
  });
}
