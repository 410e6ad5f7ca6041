/** `lectern violations ID`: the rules a statement stored under lax validation broke (src/ops/violations.ts). */
import { statementViolations } from '../ops/violations.ts';
import { openCliStore } from './datafiles.ts';

export async function violationsCommand(id: string, opts: { backend?: string; target?: string; json?: boolean }): Promise<void> {
  const { store } = await openCliStore(opts.backend);
  try {
    const found = await statementViolations(store, opts.target ?? '', id);
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(found, null, 2)}\n`);
      return;
    }
    if (!found.violations.length) {
      process.stdout.write(`statement ${found.id} broke no rule\n`);
      return;
    }
    const lines = found.violations.map((v) => `${v.loc.join('.') || '(statement)'}: ${v.msg} [${v.type}]`);
    process.stdout.write(
      `statement ${found.id} was stored under lax validation with ${found.violations.length} violation${found.violations.length === 1 ? '' : 's'}:\n${lines.join('\n')}\n`,
    );
  } finally {
    await store.close();
  }
}
