import { readFileSync } from 'node:fs';

/** Lectern's own version, from package.json (one level above src/ and dist/). */
export const LECTERN_VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
