/**
 * `--env-file PATH`: a file of settings in the format of systemd's `EnvironmentFile=`
 * (systemd.exec(5)), read before any command reads its settings, so that a command on a systemd
 * host runs on the service's own settings. Node's `.env` parser (util.parseEnv, which reads
 * `.env`) differs from systemd where it matters: it cuts an unquoted value at ` #`, expands `\n`
 * in double quotes, takes backquotes as quotes and `export NAME=` as NAME, and knows no
 * backslash escapes or continued lines; so the file is read here by systemd's rules.
 */
import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { noteEnvFile } from '../config.ts';
import { CliError } from './errors.ts';

export interface EnvironmentFile {
  /** The assignments, a later one of a name replacing an earlier one. */
  vars: Map<string, string>;
  /** Assignments systemd ignores (a name it does not take, such as `export NAME`), with their line. */
  ignored: { line: number; name: string }[];
}

/** A name systemd passes to a service. */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Escaped in double quotes, as in sh: the backslash goes, the character stays. */
const ESCAPED = new Set(['"', '\\', '`', '$']);
const isNewline = (c: string) => c === '\n' || c === '\r';
const isBlank = (c: string) => c === ' ' || c === '\t';

type State = 'preKey' | 'key' | 'preValue' | 'value' | 'valueEscape' | 'single' | 'double' | 'doubleEscape' | 'comment';

/**
 * The rules of systemd.exec(5): `NAME=VALUE` lines; blank lines, lines without `=` and lines
 * starting with `#` or `;` ignored; an unquoted value keeps its inner blanks and quotes, loses
 * its outer blanks, and takes `\x` as `x` (a `\` at the end of a line continues it); in single
 * quotes everything is kept as is, over lines too; in double quotes `\"`, `\\`, `` \` `` and `\$`
 * give the character, a `\` at the end of a line continues it, and any other `\x` is kept whole.
 */
export function parseEnvironmentFile(text: string): EnvironmentFile {
  const parser = new Parser();
  for (const c of text) parser.step(c);
  return parser.end();
}

/** systemd's reading of the file, a character at a time. */
class Parser {
  readonly file: EnvironmentFile = { vars: new Map(), ignored: [] };
  private state: State = 'preKey';
  private key = '';
  private value = '';
  /** Where the unquoted value's trailing blanks start (-1: none). */
  private blanksFrom = -1;
  private line = 1;
  private keyLine = 1;

  step(c: string): void {
    switch (this.state) {
      case 'preKey':
        if (c === '#' || c === ';') this.state = 'comment';
        else if (!isBlank(c) && !isNewline(c)) [this.state, this.key, this.keyLine] = ['key', c, this.line];
        break;
      case 'key':
        if (isNewline(c)) [this.state, this.key] = ['preKey', ''];
        else if (c === '=') [this.state, this.blanksFrom] = ['preValue', -1];
        else this.key += c;
        break;
      case 'preValue':
      case 'value':
        this.unquoted(c);
        break;
      case 'comment':
        if (isNewline(c)) this.state = 'preKey';
        break;
      default:
        this.escapedOrQuoted(c);
    }
    if (c === '\n') this.line++;
  }

  end(): EnvironmentFile {
    if (this.state !== 'preKey' && this.state !== 'key' && this.state !== 'comment') this.push();
    return this.file;
  }

  private unquoted(c: string): void {
    if (isNewline(c)) {
      this.push();
      this.state = 'preKey';
    } else if (c === '\\') [this.state, this.blanksFrom] = ['valueEscape', -1];
    else if (this.state === 'preValue' && (c === "'" || c === '"')) this.state = c === "'" ? 'single' : 'double';
    else if (this.state === 'preValue' && isBlank(c)) return;
    else {
      if (!isBlank(c)) this.blanksFrom = -1;
      else if (this.blanksFrom < 0) this.blanksFrom = this.value.length;
      [this.state, this.value] = ['value', this.value + c];
    }
  }

  private escapedOrQuoted(c: string): void {
    switch (this.state) {
      case 'valueEscape':
        [this.state, this.value] = ['value', isNewline(c) ? this.value : this.value + c];
        break;
      case 'single':
        if (c === "'") this.state = 'preValue';
        else this.value += c;
        break;
      case 'double':
        if (c === '"') this.state = 'preValue';
        else if (c === '\\') this.state = 'doubleEscape';
        else this.value += c;
        break;
      case 'doubleEscape':
        [this.state, this.value] = ['double', ESCAPED.has(c) ? this.value + c : c === '\n' ? this.value : `${this.value}\\${c}`];
        break;
    }
  }

  private push(): void {
    const name = this.key.replace(/[ \t]+$/, '');
    if (this.state === 'value' && this.blanksFrom >= 0) this.value = this.value.slice(0, this.blanksFrom);
    if (NAME.test(name)) this.file.vars.set(name, this.value);
    else this.file.ignored.push({ line: this.keyLine, name });
    this.key = '';
    this.value = '';
  }
}

/** More than this is no file of settings (systemd reads at most a few MB of it too). */
const MAX_BYTES = 1024 * 1024;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads `path` and sets its variables in this process's environment, over those already there:
 * the file's values are the service's environment, as systemd gives them to it. Warns on stderr of
 * each assignment systemd would ignore.
 */
export function applyEnvironmentFile(path: string): void {
  const file = resolve(path);
  let text: string;
  try {
    if (statSync(file).size > MAX_BYTES) throw new Error(`larger than ${MAX_BYTES} bytes: not a file of settings`);
    text = UTF8.decode(readFileSync(file));
  } catch (err) {
    const why = err instanceof TypeError ? 'not valid UTF-8' : (err as Error).message;
    throw new CliError(`--env-file ${path}: ${why}`);
  }
  if (text.includes('\0')) throw new CliError(`--env-file ${path}: contains a NUL character, which no variable can hold`);
  const { vars, ignored } = parseEnvironmentFile(text);
  for (const { line, name } of ignored) {
    process.stderr.write(
      `lectern: warning: --env-file ${path}, line ${line}: ${JSON.stringify(name)} is not a variable name, so systemd ignores this assignment, and so does lectern\n`,
    );
  }
  for (const [name, value] of vars) process.env[name] = value;
  noteEnvFile(file, vars.keys());
}
