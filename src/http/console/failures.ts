/**
 * The console's pages for what failed (docs/console.md): kept rejections (grouped by reason, one
 * rejection's body and reasons, replay and clear) in the session's working store, and the
 * operator's forwarding (per-target figures, dead letters, retry). Each translates its form into
 * the input of one admin action of src/ops/admin/ (the admin API's and the CLI's).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { configuredTargets, forwardingLags, forwardingStatus, listDeadLetters, retryDeadLetters } from '../../ops/admin/forwarding.ts';
import { clearRejections, listRejections, replayRejections, showRejection } from '../../ops/admin/rejections.ts';
import type { AdminContext } from '../../ops/admin/roles.ts';
import { adminActorOf, type ConsoleKit, refusal, registerAdminPages } from './admin.ts';
import { forwardingPage, rejectionPage, rejectionsPage, replayedPage, REJECTIONS_SHOWN } from './failures-views.ts';
import { errorPage } from './pages.ts';

/** Dead letters the Forwarding page shows at once. */
const DEAD_SHOWN = 100;

/**
 * The Rejections pages, in the session's working store (another store's rejection, or an unknown
 * id, is a 404), and the Forwarding page with its retry: the operator's (it concerns every store).
 */
export function registerConsoleFailures(app: FastifyInstance, kit: ConsoleKit): void {
  registerAdminPages(app, kit, [
    ['GET', '/console/rejections', rejectionsRoute],
    ['GET', '/console/rejections/:id', rejectionRoute],
    ['POST', '/console/rejections/replay', replayRoute],
    ['POST', '/console/rejections/clear', clearRoute],
    ['GET', '/console/forwarding', forwardingRoute],
    ['POST', '/console/forwarding/retry', retryRoute],
  ]);
}

async function rejectionsRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await kit.pageSession(request, reply);
  if (!s) return reply;
  const by = adminActorOf(kit, request, reply, s, 'The Rejections page');
  if (!by) return reply;
  const reason = kit.queryOf(request).reason?.trim() || undefined;
  const rows = await listRejections(ctx, by, { target: kit.workingStore(s), reason, limit: REJECTIONS_SHOWN });
  return kit.sendPage(reply, 200, rejectionsPage(kit.ctx(s), { rows, reason, keepDays: kit.deps.config.rejectionsKeepDays }));
}

async function rejectionRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await kit.pageSession(request, reply);
  if (!s) return reply;
  const by = adminActorOf(kit, request, reply, s, 'The Rejections page');
  if (!by) return reply;
  try {
    const r = await showRejection(ctx, by, { id: (request.params as { id: string }).id, target: kit.workingStore(s) });
    return kit.sendPage(reply, 200, rejectionPage(kit.ctx(s), r));
  } catch (err) {
    const r = refusal(err);
    return kit.sendPage(reply, r.status, errorPage(kit.ctx(s), 'No such rejection', r.message, 'rejections'));
  }
}

/**
 * Replays one, the selected (`id.<id>` fields) or all (`all`) of the working store's, under the
 * writer's mode or `lax`; with `overrideWriter`, those whose writer no longer holds its grant too.
 */
async function replayRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const c = await kit.change(request, reply);
  if (!c) return reply;
  const by = adminActorOf(kit, request, reply, c.session, 'Replaying rejections', true);
  if (!by) return reply;
  const { form, session } = c;
  try {
    const all = form.all === 'on';
    const ids = all
      ? undefined
      : Object.keys(form)
          .filter((k) => k.startsWith('id.') && form[k] === 'on')
          .map((k) => k.slice(3));
    const validation = form.validation === 'lax' ? 'lax' : undefined;
    const input = { ids, all, target: kit.workingStore(session), validation, overrideWriter: form.overrideWriter === 'on' } as const;
    const replayed = await replayRejections(ctx, by, input);
    return kit.sendPage(reply, 200, replayedPage(kit.ctx(session), { ...replayed, validation, overrideWriter: input.overrideWriter }));
  } catch (err) {
    const r = refusal(err);
    return kit.sendPage(reply, r.status, errorPage(kit.ctx(session), 'Replay refused', r.message, 'rejections'));
  }
}

async function clearRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const c = await kit.change(request, reply);
  if (!c) return reply;
  const by = adminActorOf(kit, request, reply, c.session, 'Clearing rejections', true);
  if (!by) return reply;
  await clearRejections(ctx, by, { target: kit.workingStore(c.session) });
  return reply.redirect('/console/rejections', 303);
}

async function forwardingRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const s = await kit.pageSession(request, reply);
  if (!s) return reply;
  const by = adminActorOf(kit, request, reply, s, 'The Forwarding page', false, 'operator');
  if (!by) return reply;
  try {
    const targets = await forwardingStatus(ctx, by);
    const lags = await forwardingLags(ctx, by);
    const deadLetters = await listDeadLetters(ctx, by, { limit: DEAD_SHOWN });
    const configured = configuredTargets(ctx, by);
    return kit.sendPage(reply, 200, forwardingPage(kit.ctx(s), { targets, lags, deadLetters, configured, retried: kit.queryOf(request).retried }));
  } catch (err) {
    const r = refusal(err);
    return kit.sendPage(reply, r.status, errorPage(kit.ctx(s), 'Forwarding', r.message, 'forwarding'));
  }
}

async function retryRoute(kit: ConsoleKit, ctx: AdminContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const c = await kit.change(request, reply);
  if (!c) return reply;
  const by = adminActorOf(kit, request, reply, c.session, 'Retrying dead letters', true, 'operator');
  if (!by) return reply;
  try {
    const requeued = await retryDeadLetters(ctx, by, { url: c.form.url?.trim() || undefined });
    return reply.redirect(`/console/forwarding?retried=${requeued}`, 303);
  } catch (err) {
    const r = refusal(err);
    return kit.sendPage(reply, r.status, errorPage(kit.ctx(c.session), 'Retry refused', r.message, 'forwarding'));
  }
}
