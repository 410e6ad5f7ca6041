/** Wires configuration, storage, authentication and the HTTP server into a running LRS. */
import type { FastifyInstance } from 'fastify';
import { createAuthenticator, discoverOidc } from './auth/index.ts';
import { type Clock, systemClock } from './clock.ts';
import type { Config } from './config.ts';
import { Forwarder } from './forwarding/forwarder.ts';
import { buildServer } from './http/server.ts';
import type { Logger } from './log.ts';
import { Metrics } from './monitoring/metrics.ts';
import type { Monitoring } from './monitoring/sentry.ts';
import { openConfiguredStore } from './ops/open-store.ts';
import { type Retention, startRetention } from './ops/prune.ts';
import { RejectionKeeper } from './ops/rejections.ts';
import type { Store } from './store/types.ts';

export interface RunningLrs {
  app: FastifyInstance;
  store: Store;
  /** Statement forwarding (its per-target figures: `forwarder.stats()`). */
  forwarder: Forwarder;
  /**
   * This server's Prometheus metrics (GET /metrics). Other modules add their figures here, e.g.
   * forwarding: `lrs.metrics.registerForwarding(() => forwarder.stats())`.
   */
  metrics: Metrics;
  /** Refused writes waiting to be kept (`flush()` resolves once they are written). */
  rejections: RejectionKeeper;
  /** The background prune of LECTERN_RETENTION_DAYS, when set (`run()`: a pass now). */
  retention?: Retention;
  /** The address actually listened on (port 0 resolved). */
  url: string;
  /** Stops accepting, lets in-flight requests finish (up to the timeout), closes the database. */
  close(): Promise<void>;
}

/**
 * `monitoring`: error reporting when LECTERN_MONITORING_DSN is set (see src/monitoring/sentry.ts);
 * `options.clock`: what credential expiry, rotation grace and retention are measured by (tests move it);
 * `options.storeClock`: what an in-process SQLite store reads `stored` from (tests and screenshots
 * that need statements on past days); `options.worker`: this process is that worker of runserver's
 * cluster (its /metrics then answers for every worker).
 */
export async function startLrs(config: Config, logger: Logger, monitoring?: Monitoring, options: { clock?: Clock; storeClock?: Clock; worker?: number } = {}): Promise<RunningLrs> {
  // OpenID discovery first: a provider that cannot be reached stops start-up before the database opens.
  const oidc = await discoverOidc(config, logger);
  const metrics = new Metrics({ worker: options.worker });
  const store = metrics.instrument(await openConfiguredStore(config, logger, options.storeClock));
  const auth = createAuthenticator(config, logger, { oidc, credentials: store, clock: options.clock });
  const forwarder = new Forwarder({
    store,
    targets: config.xapiForwardings,
    batchSize: config.forwardingBatchSize,
    backoffMs: config.forwardingBackoff,
    leaseMs: config.forwardingLease * 1000,
    logger,
  });
  metrics.registerForwarding(() => forwarder.stats());
  const rejections = new RejectionKeeper({
    store,
    max: config.rejectionsMax,
    maxBody: config.rejectionsMaxBody,
    keepDays: config.rejectionsKeepDays,
    logger,
    onCount: (outcome, n) => metrics.countRejections(outcome, n),
  });
  let app: FastifyInstance;
  try {
    app = await buildServer({ config, store, auth, logger, forwarder, metrics, monitoring, rejections, clock: options.clock });
    await app.ready();
    // Fastify logs its own "Server listening at …" (a line per interface address); runserver logs
    // the one line, with the url and backend, that says the LRS is up.
    const level = app.log.level;
    app.log.level = 'warn';
    try {
      await app.listen({ host: config.host, port: config.port });
    } finally {
      app.log.level = level;
    }
  } catch (err) {
    metrics.close();
    await store.close();
    throw err;
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  forwarder.start();
  const retention = config.retentionDays > 0 ? startRetention({ store, days: config.retentionDays, clock: options.clock ?? systemClock, logger }) : undefined;
  let closing: Promise<void> | undefined;
  return {
    app,
    store,
    forwarder,
    metrics,
    rejections,
    retention,
    url: `http://${host}:${port}`,
    close() {
      closing ??= (async () => {
        const timeout = new Promise<void>((res) => setTimeout(res, config.shutdownTimeout * 1000).unref());
        await Promise.race([app.close(), timeout]);
        app.server.closeAllConnections();
        await retention?.stop();
        await forwarder.stop();
        // The refused writes already answered are written before the database closes.
        await rejections.flush();
        await store.close();
        metrics.close();
      })();
      return closing;
    },
  };
}
