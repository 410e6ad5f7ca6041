/**
 * The cost the writer thread (LECTERN_SQLITE_WRITER_THREAD) adds: handing a request's rows to
 * another thread and getting the answer back. A worker echoes an outcome for each batch of 100
 * statements, sent as (a) the rows as objects (structured clone), (b) one JSON string per batch.
 *
 *   node bench/threads.ts [batches=2000]
 */
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import { prepareStatement, stamp } from '../src/xapi/statement.ts';
import type { Actor, Statement } from '../src/xapi/types.ts';
import { statement } from './generate.ts';

interface Rows {
  id: string;
  full: string;
  verb: string;
  agents: { key: string; role: number }[];
  activities: { id: string; direct: boolean }[];
}

if (isMainThread) {
  const batches = Number(process.argv[2] ?? 2000);
  const authority: Actor = { objectType: 'Agent', mbox: 'mailto:bench@example.com' };
  const iso = new Date().toISOString();
  const batch: Rows[] = Array.from({ length: 100 }, (_, i) => {
    const p = prepareStatement(statement(1, i) as unknown as Statement, authority, '1.0.3');
    return { id: p.id, full: JSON.stringify(stamp(p, iso)), verb: p.verb, agents: p.agents, activities: p.activities };
  });
  const worker = new Worker(new URL(import.meta.url));
  const roundTrips = async (make: () => unknown): Promise<number> => {
    const t0 = performance.now();
    for (let k = 0; k < batches; k++) {
      const answered = new Promise((resolve) => worker.once('message', resolve));
      worker.postMessage(make());
      await answered;
    }
    return ((performance.now() - t0) * 1000) / (batches * 100);
  };
  await roundTrips(() => batch); // warm-up
  const objects = await roundTrips(() => batch);
  const text = await roundTrips(() => JSON.stringify(batch));
  process.stdout.write(
    `postMessage round trip per statement (batches of 100, both directions, one at a time): rows as objects ${objects.toFixed(1)} µs, ` +
      `one JSON string per batch ${text.toFixed(1)} µs\n`,
  );
  await worker.terminate();
} else {
  parentPort!.on('message', (m: Rows[] | string) => {
    const rows = typeof m === 'string' ? (JSON.parse(m) as Rows[]) : m;
    parentPort!.postMessage({ ids: rows.map((r) => r.id), inserted: rows.length });
  });
}
