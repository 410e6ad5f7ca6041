/**
 * Preloaded into the server under measurement (`node --import bench/memwatch.js …`): samples where
 * the resident set goes every BENCH_MEMWATCH_MS (default 200) and appends one JSON line per sample
 * to BENCH_MEMWATCH_FILE: process.memoryUsage() (V8 heap, external, array buffers), V8's spaces,
 * and the kernel's view (/proc/self/status: RSS, peak, anonymous vs file-backed). bench/memory.ts
 * reads the file; the sample at the peak tells JS heap from native memory (SQLite, pg, malloc).
 * Worker threads (the SQLite writer and readers) write a line of their own V8 heap's size.
 *
 * Plain JavaScript: node preloads it into every thread, and a .ts file would load Node's
 * TypeScript stripper into each (≈ 10 MB per thread, measured, counted as the server's).
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
import { isMainThread, threadId } from 'node:worker_threads';

const file = process.env.BENCH_MEMWATCH_FILE;
const every = Number(process.env.BENCH_MEMWATCH_MS ?? 200);
const MB = 1024 * 1024;

function status() {
  const s = readFileSync('/proc/self/status', 'utf8');
  const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? 0) / 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM'), anon: kb('RssAnon'), fileBacked: kb('RssFile') };
}

if (file && !isMainThread) {
  // A worker thread (node preloads --import modules into every thread): its own V8 heap, which
  // the main thread's process.memoryUsage() does not count. `thread` tells these lines apart.
  setInterval(
    () => appendFileSync(file, `${JSON.stringify({ t: Date.now(), thread: threadId, heapTotal: +(getHeapStatistics().total_heap_size / MB).toFixed(1) })}\n`),
    every,
  ).unref();
} else if (file) {
  // Main-thread GC pauses so far (ms, and how many): what smaller heap settings cost.
  const gc = { ms: 0, count: 0, majorMs: 0, major: 0 };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gc.ms += e.duration;
      gc.count++;
      // Mark-compact (full) collections and their incremental marking steps; the rest are
      // scavenges of the young generation.
      const kind = e.detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MAJOR || kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL) {
        gc.majorMs += e.duration;
        gc.major++;
      }
    }
  }).observe({ entryTypes: ['gc'] });
  const sample = () => {
    const m = process.memoryUsage();
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name.replace(/_space$/, ''), +(s.space_size / MB).toFixed(1)]));
    const line = {
      t: Date.now(),
      ...status(),
      heapTotal: +(m.heapTotal / MB).toFixed(1),
      heapUsed: +(m.heapUsed / MB).toFixed(1),
      external: +(m.external / MB).toFixed(1),
      arrayBuffers: +(m.arrayBuffers / MB).toFixed(1),
      spaces,
      gcMs: Math.round(gc.ms),
      gcCount: gc.count,
      gcMajorMs: Math.round(gc.majorMs),
      gcMajor: gc.major,
    };
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  };
  setInterval(sample, every).unref();
}
