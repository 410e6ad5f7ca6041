/**
 * The Activities (§2.5) and Agents (§2.4) resources: read-only views the LRS assembles, the
 * canonical Activity it keeps from statements and a Person object for an Agent. The server
 * routes only GET and HEAD here (405 otherwise).
 */
import { LrsError } from '../../errors.ts';
import type { Store } from '../../store/types.ts';
import { canonicalActivity } from '../../xapi/activity.ts';
import { personOf } from '../../xapi/person.ts';
import { etagOf } from '../../xapi/documents.ts';
import { ifiKey } from '../../xapi/agents.ts';
import { parseParams } from '../../xapi/params.ts';
import type { Agent, Statement } from '../../xapi/types.ts';
import { json, readsOf, type XapiRequest, type XapiResponse } from '../request.ts';

export interface ViewDeps {
  store: Store;
  /** LECTERN_MAX_PAGE_BYTES: the Agents view reads at most about this much statement JSON. */
  maxPageBytes: number;
}

/** A JSON reply with an ETag of its body (§3.1.s4.b1: every GET carries one). */
function jsonWithEtag(value: unknown): XapiResponse {
  const res = json(200, value);
  return { ...res, headers: { ...res.headers, etag: etagOf(Buffer.from(res.body as string, 'utf8')) } };
}

/**
 * Both views are assembled from every statement of the store: a user whose reads are restricted to
 * its own statements (LECTERN_LRS_RESTRICT_BY_AUTHORITY; with scopes alone such a user lacks
 * `statements/read` and never gets here) would read other authorities' definitions and names.
 */
function everyStatementReadable(req: XapiRequest, resource: string): void {
  if (req.access?.mineOnly ?? true) {
    throw new LrsError('forbidden', `${resource} is assembled from every statement of the store, and LECTERN_LRS_RESTRICT_BY_AUTHORITY lets this user read only its own`);
  }
}

/** GET /activities?activityId=: the canonical definition, or a bare Activity when none is known (§2.5.s2.b1). */
export async function handleActivities(deps: ViewDeps, req: XapiRequest): Promise<XapiResponse> {
  const id = parseParams('activities', req.method, req.query).activityId as string;
  everyStatementReadable(req, 'the Activities resource');
  const definition = (await readsOf(req, deps.store).getActivityDefinitions(req.user!.target, [id])).get(id);
  return jsonWithEtag(canonicalActivity(id, definition));
}

/**
 * Statements read for the names of an agent: enough for every name a real agent goes by; fewer
 * when they hold more than a statement page may (each is parsed whole).
 */
const PERSON_STATEMENTS = 200;

/** GET /agents?agent=: a Person object for an Agent (not a Group, §2.4.s2), known or not (§2.4.s3.b3). */
export async function handleAgents(deps: ViewDeps, req: XapiRequest): Promise<XapiResponse> {
  const agent = parseParams('agents', req.method, req.query).agent as Agent;
  everyStatementReadable(req, 'the Agents resource');
  const key = ifiKey(agent);
  const seen = key === undefined ? [] : await readsOf(req, deps.store).statementsWithAgent(req.user!.target, key, PERSON_STATEMENTS, deps.maxPageBytes);
  return jsonWithEtag(personOf(agent, seen.map((j) => JSON.parse(j) as Statement)));
}
