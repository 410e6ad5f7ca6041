/**
 * The console's document page (./documents.ts serves it): one State, Agent Profile or Activity
 * Profile document, its key and metadata, its content (JSON as a tree, text as text, any other
 * type offered as a download); and the URLs of documents, which the Learner page links to.
 */
import type { DocumentKind, StoredDocument } from '../../store/types.ts';
import { isJsonType, mediaTypeOf } from '../../xapi/media.ts';
import { jsonView } from './json-view.ts';
import { html, type Html, page, type PageContext } from './pages.ts';

/** The largest document shown on its page (JSON parsed, text decoded); a larger one is offered as a download. */
export const DOCUMENT_SHOWN_MAX = 1024 * 1024;

/** Each kind as the console's URLs name it, with its xAPI parameters and its id's name. */
export const DOCUMENT_KINDS = {
  state: { kind: 'state', title: 'State', params: ['activityId', 'agent', 'registration', 'stateId'], id: 'stateId' },
  'agent-profile': { kind: 'agent_profile', title: 'Agent profile', params: ['agent', 'profileId'], id: 'profileId' },
  'activity-profile': { kind: 'activity_profile', title: 'Activity profile', params: ['activityId', 'profileId'], id: 'profileId' },
} as const satisfies Record<string, { kind: DocumentKind; title: string; params: readonly string[]; id: string }>;
export type DocumentKindName = keyof typeof DOCUMENT_KINDS;

/** The console's URL of a document (`download`: its bytes), by its xAPI parameters. */
export function documentUrl(kind: DocumentKindName, params: Record<string, string | undefined>, download = false): string {
  const qs = new URLSearchParams();
  for (const name of DOCUMENT_KINDS[kind].params) if (params[name]) qs.set(name, params[name]);
  return `/console/documents/${kind}${download ? '/download' : ''}?${qs.toString()}`;
}

const TEXT_TYPES = /^(text\/|application\/(xml|.+\+xml)$)/;

/** The document's content as its page shows it: a JSON tree, text, or a note that it is offered as a download. */
function content(doc: StoredDocument, title: string): Html {
  const type = mediaTypeOf(doc.contentType);
  const json = isJsonType(doc.contentType);
  if (!json && !TEXT_TYPES.test(type))
    return html`<p class="empty">A ${type || 'typeless'} document of ${doc.content.length.toLocaleString('en')} bytes: download it to open it.</p>`;
  if (doc.content.length > DOCUMENT_SHOWN_MAX)
    return html`<p class="empty">${doc.content.length.toLocaleString('en')} bytes, more than the page shows: download it to read it.</p>`;
  const text = doc.content.toString('utf8');
  if (json) {
    try {
      return jsonView(JSON.parse(text), `The ${title.toLowerCase()} document`, 'document-json');
    } catch {
      // Stored before it was checked as JSON (a type that said so later): shown as text.
    }
  }
  return html`<pre class="json" tabindex="0" aria-label="The document as text"><code>${text}</code></pre>`;
}

export function documentPage(ctx: PageContext, name: DocumentKindName, params: Record<string, string>, doc: StoredDocument): string {
  const k = DOCUMENT_KINDS[name];
  const id = params[k.id];
  const learner = params.agent ? `/console/learner?agent=${encodeURIComponent(params.agent)}` : undefined;
  const row = (label: string, value: string | undefined) => (value ? html`<dt>${label}</dt><dd><code>${value}</code></dd>` : '');
  const main = html`<h1>${k.title} <code>${id}</code></h1>
<dl class="person document">
${row('Activity', params.activityId)}${row('Agent', params.agent)}${row('Registration', params.registration)}
<dt>Content type</dt><dd><code>${doc.contentType}</code></dd>
<dt>Size</dt><dd>${doc.content.length.toLocaleString('en')} bytes</dd>
<dt>Updated</dt><dd>${new Date(doc.updatedMs)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC')}</dd>
<dt>ETag</dt><dd><code>${doc.etag}</code></dd>
</dl>
<p><a class="button" href="${documentUrl(name, params, true)}" download>Download</a>${learner ? html` <a href="${learner}">Back to the learner</a>` : ''}</p>
<section aria-labelledby="content-title"><h2 id="content-title">Content</h2>
${content(doc, k.title)}
</section>`;
  return page(ctx, `${k.title} ${id}`, 'learner', main);
}
