/**
 * The console's document pages (docs/console.md, "Documents"): one State, Agent Profile or
 * Activity Profile document opened (./document-views.ts) and downloaded with its content type.
 * Read through the ops reads (readDocuments), as the xAPI document resources read them: the
 * session's scopes (state/read, profile/read), in the store it works in.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LrsError } from '../../errors.ts';
import { readDocuments } from '../../ops/reads.ts';
import { RESOURCE_SCOPES } from '../access.ts';
import { DOCUMENT_KINDS, type DocumentKindName, documentPage } from './document-views.ts';
import type { ConsoleDoor } from './kit.ts';
import { errorPage } from './pages.ts';
import type { Session } from './session.ts';

export function registerDocumentPages(app: FastifyInstance, door: ConsoleDoor): void {
  app.get('/console/documents/:kind', (request, reply) => documentRoute(door, request, reply, false));
  app.get('/console/documents/:kind/download', (request, reply) => documentRoute(door, request, reply, true));
}

/** The document the request names, read as the session's user; or why not (its status and detail). */
async function documentOf(door: ConsoleDoor, request: FastifyRequest, s: Session) {
  const name = (request.params as { kind: string }).kind;
  const k = Object.hasOwn(DOCUMENT_KINDS, name) ? DOCUMENT_KINDS[name as DocumentKindName] : undefined;
  if (!k) return { ok: false as const, status: 404, detail: `no such kind of document: ${name} (state, agent-profile or activity-profile)` };
  const query = door.queryOf(request);
  const params = Object.fromEntries(k.params.flatMap((p) => (query[p] !== undefined ? [[p, query[p]]] : [])));
  if (!params[k.id]) return { ok: false as const, status: 400, detail: `${k.id}: which document?` };
  try {
    const reader = door.reader(s, k.kind === 'state' ? RESOURCE_SCOPES.state : RESOURCE_SCOPES.profile);
    const read = await readDocuments(door.deps.store, reader.target, k.kind, params);
    if (!('document' in read)) return { ok: false as const, status: 400, detail: `${k.id}: which document?` };
    return { ok: true as const, name: name as DocumentKindName, params, document: read.document };
  } catch (err) {
    if (!(err instanceof LrsError)) throw err;
    const detail = err.issues ? err.issues.map((i) => `${i.loc.slice(1).join('.')}: ${i.msg}`).join('; ') : err.message;
    return { ok: false as const, status: err.status, detail };
  }
}

async function documentRoute(door: ConsoleDoor, request: FastifyRequest, reply: FastifyReply, download: boolean): Promise<FastifyReply> {
  const s = download ? await door.jsonSession(request, reply) : await door.pageSession(request, reply);
  if (!s) return reply;
  const found = await documentOf(door, request, s);
  if (!found.ok) {
    if (download) return door.sendJson(reply, found.status, { detail: found.detail });
    return door.sendPage(reply, found.status, errorPage(door.ctx(s), found.status === 404 ? 'No such document' : 'Document', found.detail, 'learner'));
  }
  if (!download) return door.sendPage(reply, 200, documentPage(door.ctx(s), found.name, found.params, found.document));
  const id = found.params[DOCUMENT_KINDS[found.name].id];
  return reply
    .headers({
      'content-type': found.document.contentType,
      // Stored bytes of any type, never run here: an attachment, sniffing off, and a sandbox should a browser show it anyway.
      'content-disposition': `attachment; filename="${id.replace(/[^\w.-]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(id)}`,
      'content-security-policy': "default-src 'none'; sandbox",
      'x-content-type-options': 'nosniff',
      'cache-control': 'no-store',
      etag: found.document.etag,
    })
    .send(found.document.content);
}
