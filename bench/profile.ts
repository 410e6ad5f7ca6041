/**
 * Where the server's time goes: a summary of a V8 CPU profile (node --cpu-prof, e.g. from
 * `npm run bench -- --profile DIR`).
 *
 *   node bench/profile.ts DIR/CPU.….cpuprofile [top]
 *   node bench/profile.ts DIR [top]      # the newest profile in DIR
 *
 * Prints self time by category (idle, GC, synchronous SQLite calls split by the Lectern function
 * that made them, JSON, validation, HTTP framework, logging, the rest of Lectern) and the top
 * functions by self time.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

/** node:sqlite methods: native, so their time is self time of these frames. */
const SQLITE = new Set(['run', 'get', 'all', 'exec', 'prepare', 'iterate', 'DatabaseSync']);

/** A profile's path: `path` itself, or the newest profile in the folder `path`. */
function profileFile(path: string): string {
  if (!statSync(path).isDirectory()) return path;
  const found = readdirSync(path)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => join(path, f));
  if (!found.length) throw new Error(`no .cpuprofile in ${path}`);
  return found.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
}

export function summarise(path: string, top = 25): string {
  const file = profileFile(path);
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const short = (url: string) => url.replace(/^file:\/\//, '').replace(/^.*\/(src|node_modules)\//, '$1/');
  /** The nearest caller that is Lectern's own code. */
  const lecternCaller = (id: number): string => {
    for (let k = parent.get(id); k !== undefined; k = parent.get(k)) {
      const f = byId.get(k)!.callFrame;
      if (f.url.includes('/dist/') || f.url.includes('/src/')) return `${f.functionName || '(anonymous)'} ${short(f.url).replace(/^.*dist\//, 'dist/')}:${f.lineNumber + 1}`;
    }
    return '?';
  };
  const cats = new Map<string, number>();
  const sqliteBy = new Map<string, number>();
  const fns = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  for (const [id, us] of self) {
    const f = byId.get(id)!.callFrame;
    const url = f.url;
    let cat: string;
    if (f.functionName === '(idle)') cat = 'idle (event loop waiting)';
    else if (f.functionName === '(garbage collector)') cat = 'garbage collection';
    else if (f.functionName === '(program)') cat = 'V8/native, unattributed';
    else if (!url && SQLITE.has(f.functionName)) {
      cat = 'SQLite (synchronous node:sqlite calls)';
      add(sqliteBy, `${f.functionName} ← ${lecternCaller(id)}`, us);
    } else if (/store\/sqlite\/[a-z]+\.(js|ts)$/.test(url)) {
      // node:sqlite's methods are fast API calls V8 does not show as frames of their own: their
      // time is self time of the store function that made them (whose own JS is a few lines).
      cat = 'SQLite (synchronous node:sqlite calls)';
      add(sqliteBy, `${f.functionName || '(anonymous)'} ${short(url).replace(/^.*dist\//, 'dist/')}:${f.lineNumber + 1}`, us);
    } else if (!url && (f.functionName === 'parse' || f.functionName === 'stringify')) cat = `JSON.${f.functionName}`;
    else if (url.includes('validate')) cat = 'xAPI validation';
    else if (url.includes('node_modules/pino') || url.includes('thread-stream') || url.includes('sonic-boom')) cat = 'logging';
    else if (url.includes('node_modules/fastify') || url.includes('find-my-way') || url.includes('light-my-request') || url.includes('avvio')) cat = 'fastify';
    else if (url.includes('node_modules/pg')) cat = 'pg driver';
    else if (url.includes('/dist/') || url.includes('/src/'))
      cat = `Lectern ${
        short(url)
          .replace(/^.*dist\//, '')
          .split('/')[0]
      }/`;
    else if (url.startsWith('node:')) cat = `Node ${url.replace(/^node:(internal\/)?/, '').split('/')[0]}`;
    else if (!url) cat = `native: ${f.functionName || '(anonymous)'}`;
    else cat = 'other';
    add(cats, cat, us);
    add(fns, `${f.functionName || '(anonymous)'} ${short(url) || '(native)'}${url ? `:${f.lineNumber + 1}` : ''}`, us);
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)} %`;
  const list = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, v]) => `${pct(v)}  ${(v / 1000).toFixed(0).padStart(7)} ms  ${k}`)
      .join('\n');
  return [
    `${file}: ${(total / 1e6).toFixed(1)} s of samples`,
    '',
    'By category (self time):',
    list(cats, 30),
    '',
    'SQLite calls by the Lectern function making them:',
    list(sqliteBy, 15),
    '',
    `Top ${top} functions (self time):`,
    list(fns, top),
  ].join('\n');
}

if (import.meta.main) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node bench/profile.ts FILE.cpuprofile|DIR [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${summarise(file, Number(top ?? 25))}\n`);
}
