/**
 * The console's pages for what failed (docs/console.md): kept rejections (grouped by reason, one
 * rejection's body and reasons, replay and clear) in the session's working store, and the
 * operator's forwarding (per-target figures, dead letters, retry). Each calls the src/ops/ use
 * cases directly, with the admin API's reach checks and audit entries (./admin.ts).
 */
import type { FastifyInstance } from 'fastify';
import { type AdminRole } from '../auth/scopes.ts';
import { reachableStore, recordAudit, replayAudited, requireOperator } from '../ops/admin.ts';
import { OpsError } from '../ops/errors.ts';
import { forwardingLags, forwardingStatus, listDeadLetters, retryDeadLetters } from '../ops/forwarding.ts';
import { clearRejections, listRejections, showRejection } from '../ops/rejections.ts';
import type { KeptRejection } from '../store/types.ts';
import { adminRoleOf, consoleActor, type ConsoleKit, refusal } from './console-admin.ts';
import { forwardingPage, rejectionPage, rejectionsPage, replayedPage, REJECTIONS_SHOWN } from './console-failures-views.ts';
import { errorPage } from './console/pages.ts';
import type { Session } from './console/session.ts';

/** Dead letters the Forwarding page shows at once. */
const DEAD_SHOWN = 100;

export function registerConsoleFailures(app: FastifyInstance, kit: ConsoleKit): void {
  const { store, config, clock } = kit.deps;
  const activeTargets = () => config.xapiForwardings.filter((t) => t.isActive).map((t) => t.url);

  /** A kept rejection of the session's working store; any other (another store's, an unknown id) is a 404. */
  const rejectionHere = async (s: Session, role: AdminRole, id: string): Promise<KeptRejection> => {
    const r = await showRejection(store, id);
    if (r.tenant !== reachableStore(role, kit.workingStore(s))) throw new OpsError(`no kept rejection with id ${id}`, 'not_found');
    return r;
  };

  // ----- rejections -------------------------------------------------------------------------

  app.get('/console/rejections', async (request, reply) => {
    const s = await kit.pageSession(request, reply);
    if (!s) return reply;
    const role = adminRoleOf(kit, reply, s, 'The Rejections page');
    if (!role) return reply;
    const reason = kit.queryOf(request).reason?.trim() || undefined;
    const tenant = reachableStore(role, kit.workingStore(s));
    const rows = await listRejections(store, { tenant, reason, limit: REJECTIONS_SHOWN, keepDays: config.rejectionsKeepDays, clock });
    return kit.sendPage(reply, 200, rejectionsPage(kit.ctx(s), { rows, reason, keepDays: config.rejectionsKeepDays }));
  });

  app.get('/console/rejections/:id', async (request, reply) => {
    const s = await kit.pageSession(request, reply);
    if (!s) return reply;
    const role = adminRoleOf(kit, reply, s, 'The Rejections page');
    if (!role) return reply;
    try {
      const r = await rejectionHere(s, role, (request.params as { id: string }).id);
      return kit.sendPage(reply, 200, rejectionPage(kit.ctx(s), r));
    } catch (err) {
      const r = refusal(err);
      return kit.sendPage(reply, r.status, errorPage(kit.ctx(s), 'No such rejection', r.message, 'rejections'));
    }
  });

  /** Replays one, the selected (`id.<id>` fields) or all (`all`) of the working store's, under the credential's mode or `lax`. */
  app.post('/console/rejections/replay', async (request, reply) => {
    const c = await kit.change(request, reply);
    if (!c) return reply;
    const role = adminRoleOf(kit, reply, c.session, 'Replaying rejections', true);
    if (!role) return reply;
    const { form, session } = c;
    try {
      const tenant = reachableStore(role, kit.workingStore(session));
      const all = form.all === 'on';
      const ids = all ? undefined : Object.keys(form).filter((k) => k.startsWith('id.') && form[k] === 'on').map((k) => k.slice(3));
      if (!all && !ids?.length) throw new OpsError('choose the rejections to replay (or replay all)');
      // Every id in the working store before anything is replayed.
      for (const id of ids ?? []) await rejectionHere(session, role, id);
      const validation = form.validation === 'lax' ? 'lax' : undefined;
      const replayed = await replayAudited(store, consoleActor(request, session, role), { ids, all, tenant, validation }, config, clock);
      return kit.sendPage(reply, 200, replayedPage(kit.ctx(session), { ...replayed, validation }));
    } catch (err) {
      const r = refusal(err);
      return kit.sendPage(reply, r.status, errorPage(kit.ctx(session), 'Replay refused', r.message, 'rejections'));
    }
  });

  app.post('/console/rejections/clear', async (request, reply) => {
    const c = await kit.change(request, reply);
    if (!c) return reply;
    const role = adminRoleOf(kit, reply, c.session, 'Clearing rejections', true);
    if (!role) return reply;
    const tenant = reachableStore(role, kit.workingStore(c.session));
    const cleared = await clearRejections(store, tenant);
    await recordAudit(store, consoleActor(request, c.session, role), 'rejections.clear', tenant, { cleared }, clock);
    return reply.redirect('/console/rejections', 303);
  });

  // ----- forwarding (the operator's: it concerns every store) -------------------------------

  app.get('/console/forwarding', async (request, reply) => {
    const s = await kit.pageSession(request, reply);
    if (!s) return reply;
    const role = adminRoleOf(kit, reply, s, 'The Forwarding page');
    if (!role) return reply;
    try {
      requireOperator(role, 'forwarding');
    } catch (err) {
      const r = refusal(err);
      return kit.sendPage(reply, r.status, errorPage(kit.ctx(s), 'Forwarding', r.message, 'forwarding'));
    }
    const targets = await forwardingStatus(store, activeTargets());
    const lags = await forwardingLags(store, clock.now());
    const deadLetters = await listDeadLetters(store, { limit: DEAD_SHOWN });
    return kit.sendPage(reply, 200, forwardingPage(kit.ctx(s), { targets, lags, deadLetters, retried: kit.queryOf(request).retried }));
  });

  app.post('/console/forwarding/retry', async (request, reply) => {
    const c = await kit.change(request, reply);
    if (!c) return reply;
    const role = adminRoleOf(kit, reply, c.session, 'Forwarding', true);
    if (!role) return reply;
    try {
      requireOperator(role, 'forwarding');
      const url = c.form.url?.trim() || undefined;
      const requeued = await retryDeadLetters(store, activeTargets(), url);
      await recordAudit(store, consoleActor(request, c.session, role), 'forwarding.retry', null, { ...(url !== undefined && { url }), requeued }, clock);
      return reply.redirect(`/console/forwarding?retried=${requeued}`, 303);
    } catch (err) {
      const r = refusal(err);
      return kit.sendPage(reply, r.status, errorPage(kit.ctx(c.session), 'Retry refused', r.message, 'forwarding'));
    }
  });
}
