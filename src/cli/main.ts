#!/usr/bin/env node
/**
 * The `lectern` entry point. Deliberately plain: it must parse and run on any Node, so that on
 * one older than package.json's `engines` it says in one line which Node it needs and how to get
 * it, instead of a stack trace from a module that needs a newer Node. Nothing else is imported
 * before that check.
 */
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
const wanted = /(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(String(pkg.engines && pkg.engines.node) || '') || ['', '0'];
const have = process.versions.node.split('.');
let older = false;
for (let i = 1; i <= 3; i++) {
  const a = Number(have[i - 1] || 0);
  const b = Number(wanted[i] || 0);
  if (a !== b) {
    older = a < b;
    break;
  }
}
if (older) {
  process.stderr.write(
    'lectern: error: Lectern needs Node.js ' + pkg.engines.node + ', this is ' + process.version + ' (' + process.execPath + '): ' +
      'in the Lectern folder run `npm ci` then `npm run lectern -- <command>` (npm brings Node 24 from the `node` package), ' +
      'or install a newer Node, e.g. `npm install -g node@24`\n',
  );
  process.exit(2);
}
import('./program.ts');
