/** The monitoring payload scrubber (src/monitoring/sentry.ts), on event shapes the SDK produces. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { scrub } from '../../src/monitoring/sentry.ts';

test('credentials, bodies and query strings are filtered; the rest is kept', () => {
  const event = {
    message: 'failed for Basic dXNlcjpwYXNz and Bearer eyJhbGciOi.x.y at postgres://lectern:hunter2@db/lrs',
    request: {
      method: 'POST',
      url: 'http://lrs.example.com/xAPI/statements?agent=%7B%22mbox%22%7D',
      headers: { Authorization: 'Basic dXNlcjpwYXNz', 'content-type': 'application/json', Cookie: 'sid=1' },
      data: '{"actor":{"mbox":"mailto:ben@example.com"}}',
      query_string: 'agent=x',
    },
    extra: { config: { password: 'p', apiKey: 'k', access_token: 't', clientSecret: 's', level: 'info' } },
    breadcrumbs: [{ message: 'argv: auth -p s3cret-value' }],
    contexts: { trace: { data: { 'http.route': '/xAPI/statements', 'url.full': 'http://h/x?y=1', 'http.request.header.authorization': 'Basic x' } } },
  };
  const out = scrub(event, new Set(['s3cret-value']));
  assert.equal(out.message, 'failed for Basic [Filtered] and Bearer [Filtered] at postgres://lectern:[Filtered]@db/lrs');
  assert.equal(out.request.url, 'http://lrs.example.com/xAPI/statements');
  assert.deepEqual(out.request.headers, { Authorization: '[Filtered]', 'content-type': 'application/json', Cookie: '[Filtered]' });
  assert.equal(out.request.data, '[Filtered]');
  assert.equal(out.request.query_string, '[Filtered]');
  assert.deepEqual(out.extra.config, { password: '[Filtered]', apiKey: '[Filtered]', access_token: '[Filtered]', clientSecret: '[Filtered]', level: 'info' });
  assert.equal(out.breadcrumbs[0].message, 'argv: auth -p [Filtered]');
  assert.deepEqual(out.contexts.trace.data, { 'http.route': '/xAPI/statements', 'url.full': 'http://h/x', 'http.request.header.authorization': '[Filtered]' });
  assert.equal(event.request.data.includes('ben@'), true, 'the input is not modified');
});
