/** Wires configuration, storage, authentication and the HTTP server into a running LRS. */
import type { FastifyInstance } from 'fastify';
import { BasicAuthenticator } from './auth/basic.ts';
import type { Config } from './config.ts';
import { buildServer } from './http/server.ts';
import type { Logger } from './log.ts';
import { Metrics } from './monitoring/metrics.ts';
import type { Monitoring } from './monitoring/sentry.ts';
import { openStore } from './store/index.ts';
import type { Store } from './store/types.ts';

export interface RunningLrs {
  app: FastifyInstance;
  store: Store;
  /**
   * This server's Prometheus metrics (GET /metrics). Other modules add their figures here, e.g.
   * forwarding: `lrs.metrics.registerForwarding(() => forwarder.stats())`.
   */
  metrics: Metrics;
  /** The address actually listened on (port 0 resolved). */
  url: string;
  /** Stops accepting, lets in-flight requests finish (up to the timeout), closes the database. */
  close(): Promise<void>;
}

/** `monitoring`: error reporting when LECTERN_MONITORING_DSN is set (see src/monitoring/sentry.ts). */
export async function startLrs(config: Config, logger: Logger, monitoring?: Monitoring): Promise<RunningLrs> {
  const metrics = new Metrics();
  const store = metrics.instrument(await openStore(config, logger));
  const auth = new BasicAuthenticator({
    file: config.authFile,
    cacheMaxSize: config.authCacheMaxSize,
    cacheTtlSeconds: config.authCacheTtl,
    logger,
  });
  let app: FastifyInstance;
  try {
    app = await buildServer({ config, store, auth, logger, metrics, monitoring });
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    await store.close();
    throw err;
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  let closing: Promise<void> | undefined;
  return {
    app,
    store,
    metrics,
    url: `http://${host}:${port}`,
    close() {
      closing ??= (async () => {
        const timeout = new Promise<void>((res) => setTimeout(res, config.shutdownTimeout * 1000).unref());
        await Promise.race([app.close(), timeout]);
        app.server.closeAllConnections();
        await store.close();
      })();
      return closing;
    },
  };
}
