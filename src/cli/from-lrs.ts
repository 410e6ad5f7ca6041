/**
 * `lectern import --from-lrs`: every statement of another LRS through its Statement resource
 * (xAPI-Communication §2.1.3) with the 1.0.3 headers, oldest first, following `more` links.
 */
import { parseMultipartMixed } from '../xapi/multipart.ts';
import { type AttachmentPart, statementParts } from '../xapi/attachments.ts';
import { mediaTypeOf } from '../xapi/media.ts';
import { VOIDED_VERB } from '../xapi/types.ts';
import { CliError } from './errors.ts';
import { promptPassword } from './prompt.ts';

/** A statement as pulled: its number in the pull, its JSON, the attachment data of its page. */
export interface PulledStatement {
  n: number;
  value: unknown;
  parts: Map<string, AttachmentPart>;
  /** The page it came from, to resume at. */
  page: string;
}

export interface Pull {
  items: AsyncGenerator<PulledStatement>;
  /** The page being read (where a resume starts), undefined once all are read. */
  readonly current: string | undefined;
}

interface Session {
  base: URL;
  headers: Record<string, string>;
  attachments: boolean;
}

async function getJson(pull: Session, url: URL): Promise<{ status: number; value?: unknown; parts: Map<string, AttachmentPart> }> {
  for (let attempt = 1; ; attempt++) {
    let res: Response;
    try {
      res = await fetch(url, { headers: pull.headers });
    } catch (err) {
      if (attempt < 4) {
        await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
        continue;
      }
      throw new CliError(`cannot reach ${url.origin}: ${(err as Error).message}`);
    }
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status >= 500 && attempt < 4) {
      await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
      continue;
    }
    if (res.status === 404) return { status: 404, parts: new Map() };
    if (res.status !== 200) {
      throw new CliError(`${url.pathname} answered ${res.status}: ${body.toString('utf8').slice(0, 300)}`);
    }
    const ct = res.headers.get('content-type') ?? '';
    try {
      if (mediaTypeOf(ct).startsWith('multipart/')) {
        const { json, attachments } = statementParts(parseMultipartMixed(ct, body));
        return { status: 200, value: JSON.parse(json.toString('utf8')), parts: attachments };
      }
      return { status: 200, value: JSON.parse(body.toString('utf8')), parts: new Map() };
    } catch (err) {
      throw new CliError(`${url.pathname} did not answer with statements: ${(err as Error).message}`);
    }
  }
}

/**
 * Every statement of the other LRS, oldest first, following `more` links. The Statement resource
 * leaves voided statements out: each voiding statement's target is fetched by voidedStatementId
 * and imported just before it, so the voided statement arrives too.
 */
async function* lrsItems(pull: Session, state: { current?: string }, first: URL): AsyncGenerator<PulledStatement> {
  let url: URL | undefined = first;
  let n = 0;
  while (url) {
    state.current = url.toString();
    const page = await getJson(pull, url);
    const result = page.value as { statements?: unknown; more?: unknown };
    if (!result || !Array.isArray(result.statements)) throw new CliError(`${url.pathname} answered without a statements array`);
    for (const s of result.statements as Record<string, unknown>[]) {
      const object = s?.object as { objectType?: unknown; id?: unknown } | undefined;
      if ((s?.verb as { id?: unknown })?.id === VOIDED_VERB && object?.objectType === 'StatementRef' && typeof object.id === 'string') {
        const voided = new URL(`${pull.base.pathname}/statements`, pull.base);
        voided.searchParams.set('voidedStatementId', object.id);
        if (pull.attachments) voided.searchParams.set('attachments', 'true');
        const v = await getJson(pull, voided);
        if (v.status === 200) yield { n: ++n, value: v.value, parts: v.parts, page: state.current };
      }
      yield { n: ++n, value: s, parts: page.parts, page: state.current };
    }
    // `more` is a path on the same server ("relative IRL"), or absolute on some LRSs.
    url = typeof result.more === 'string' && result.more !== '' ? new URL(result.more, pull.base) : undefined;
  }
  state.current = undefined;
}

/**
 * Starts a pull from the LRS whose xAPI base is `fromLrs`. Credentials: a bearer token, or Basic
 * with --user/--password or those in the URL (the password is asked for in a terminal).
 */
export async function openPull(opts: {
  fromLrs: string;
  user?: string;
  password?: string;
  token?: string;
  attachments?: boolean | string;
  more?: string;
  pageSize: number;
}): Promise<Pull> {
  let base: URL;
  try {
    base = new URL(opts.fromLrs.replace(/\/+$/, ''));
  } catch {
    throw new CliError(`--from-lrs must be the other LRS's xAPI base URL, got ${JSON.stringify(opts.fromLrs)}`);
  }
  // Credentials in the URL become the Basic credentials (fetch refuses URLs that carry them).
  let user = opts.user;
  let password = opts.password;
  if (base.username) {
    user ??= decodeURIComponent(base.username);
    password ??= decodeURIComponent(base.password);
    base.username = '';
    base.password = '';
  }
  if (user !== undefined && password === undefined) {
    if (!process.stdin.isTTY) throw new CliError('--from-lrs with --user needs --password, or run in a terminal to be asked for it');
    password = await promptPassword();
  }
  const headers: Record<string, string> = {
    // 1.0.3, which every LRS serves; 2.0 statements come through it as stored.
    'x-experience-api-version': '1.0.3',
    accept: 'application/json, multipart/mixed',
  };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  else if (user !== undefined) headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const session: Session = { base, headers, attachments: opts.attachments !== undefined && opts.attachments !== false };
  let first: URL;
  if (opts.more !== undefined) {
    first = new URL(opts.more, base);
  } else {
    first = new URL(`${base.pathname}/statements`, base);
    first.searchParams.set('ascending', 'true');
    first.searchParams.set('limit', String(opts.pageSize));
    if (session.attachments) first.searchParams.set('attachments', 'true');
  }
  const state: { current?: string } = {};
  return {
    items: lrsItems(session, state, first),
    get current() {
      return state.current;
    },
  };
}
