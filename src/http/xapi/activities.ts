/**
 * The Activities (§2.5) and Agents (§2.4) resources: read-only views the LRS assembles from
 * statements (src/ops/reads.ts). Routed for GET and HEAD only (405 otherwise).
 */
import { readActivity, readPerson, readView } from '../../ops/reads.ts';
import type { Store } from '../../store/types.ts';
import { etagOf } from '../../xapi/documents.ts';
import { type Answer, json } from '../answer.ts';
import { readerOf, type XapiRequest } from './request.ts';

export interface ViewDeps {
  store: Store;
  /** LECTERN_MAX_PAGE_BYTES: the Agents view reads at most about this much statement JSON. */
  maxPageBytes: number;
}

/** A JSON reply with an ETag of its body (§3.1.s4.b1: every GET carries one). */
function jsonWithEtag(value: unknown): Answer {
  const res = json(200, value);
  return { ...res, headers: { ...res.headers, etag: etagOf(Buffer.from(res.body as string, 'utf8')) } };
}

/** GET /activities?activityId=: the canonical Activity. */
export async function handleActivities(deps: ViewDeps, req: XapiRequest): Promise<Answer> {
  return jsonWithEtag(await readActivity(readView(deps.store), readerOf(req), req.query, req.method));
}

/** GET /agents?agent=: the Person object of an Agent. */
export async function handleAgents(deps: ViewDeps, req: XapiRequest): Promise<Answer> {
  return jsonWithEtag(await readPerson(readView(deps.store), readerOf(req), req.query, deps.maxPageBytes, req.method));
}
