/**
 * Run as a child process by tests (so that client and server do not share an event loop, as they
 * never do): N concurrent POSTs of SIZE bytes each to URL, each stopping at the answer; prints the
 * statuses, or the connection errors met before an answer, as JSON.
 * Usage: node refused-uploads.ts URL PATH N SIZE
 */
import { request } from 'node:http';

const [url, path, n, size] = [new URL(process.argv[2]), process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
const chunk = Buffer.alloc(64 * 1024, 0x78);

const one = () =>
  new Promise<number | string>((resolve) => {
    let sent = 0;
    let answered = false;
    const req = request({
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path,
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': size, 'x-experience-api-version': '1.0.3' },
    });
    req.on('response', (res) => {
      answered = true;
      res.resume();
      res.on('end', () => {
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!answered) resolve(err.code ?? err.message);
    });
    const pump = () => {
      while (!answered && sent < size) {
        const k = Math.min(chunk.length, size - sent);
        sent += k;
        if (!req.write(chunk.subarray(0, k))) return void req.once('drain', pump);
      }
      if (!answered) req.end();
    };
    pump();
  });

console.log(JSON.stringify(await Promise.all(Array.from({ length: n }, one))));
