/**
 * Forwarding statements stored under lax validation, on every backend, to two real Lectern
 * targets: one whose forwarder credential is lax stores them as sent (their violations recorded
 * there too), one that validates strictly refuses them, which makes dead letters.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, sqliteBackend, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';
import { eventually } from '../helpers/receiver.ts';

const LAX_FORWARDER: TestUser = {
  username: 'forwarder',
  password: 'fw-secret-pw',
  scopes: ['statements/write'],
  agent: { mbox: 'mailto:forwarder@example.com' },
  validation: 'lax',
};
const STRICT_FORWARDER: TestUser = { ...LAX_FORWARDER, validation: undefined };

const target = (url: string) => ({ is_active: true, url, basic_username: 'forwarder', basic_password: 'fw-secret-pw', max_retries: 0, timeout: 10 });

for (const backend of BACKENDS) {
  describe(`forwarding lax statements (${backend.name})`, () => {
    const servers: TestLrs[] = [];
    after(async () => {
      for (const s of servers.reverse()) await s.close();
    });
    const start = async (...args: Parameters<typeof startTestLrs>) => {
      const s = await startTestLrs(...args);
      servers.push(s);
      return s;
    };

    test('a lax target stores them as sent; a strict one refuses them as dead letters', async () => {
      const laxTarget = await start(sqliteBackend, { users: [ADMIN, LAX_FORWARDER] });
      const strictTarget = await start(sqliteBackend, { users: [ADMIN, STRICT_FORWARDER] });
      const laxUrl = `${laxTarget.url}/xAPI/statements`;
      const strictUrl = `${strictTarget.url}/xAPI/statements`;
      const src = await start(backend, {
        env: { LECTERN_XAPI_VALIDATION: 'lax', LECTERN_XAPI_FORWARDING_BACKOFF: '20', LECTERN_XAPI_FORWARDINGS: JSON.stringify([target(laxUrl), target(strictUrl)]) },
      });
      const sent = {
        id: randomUUID(),
        actor: { mbox: 'mailto:ann@example.com' },
        verb: { id: 'http://example.com/verbs/did', display: { en_US: 'did' } },
        object: { objectType: 'Course', id: 'http://example.com/courses/1' },
        context: { contextActivities: { parent: [{ id: randomUUID() }] } },
        result: { score: { min: 0, max: 0 } },
      };
      const res = await src.fetch('/xAPI/statements', jsonInit('POST', sent));
      assert.equal(res.status, 200, await res.clone().text());

      const figures = (url: string, ok: (s: { delivered: number; dead: number }) => boolean) =>
        eventually(url, async () => (await src.lrs.forwarder.stats()).find((s) => s.target === url && ok(s)));
      await figures(laxUrl, (s) => s.delivered === 1);
      const arrived = (await (await laxTarget.fetch(`/xAPI/statements?statementId=${sent.id}`)).json()) as Record<string, unknown>;
      for (const k of ['actor', 'verb', 'object', 'context', 'result'] as const) assert.deepEqual(arrived[k], sent[k], k);
      const violations = await laxTarget.lrs.store.statementViolations('', sent.id);
      assert.deepEqual(violations?.map((v) => v.type).sort(), ['value_error.enum', 'value_error.iri', 'value_error.language_tag', 'value_error.range']);

      await figures(strictUrl, (s) => s.dead === 1);
      assert.equal((await strictTarget.fetch(`/xAPI/statements?statementId=${sent.id}`)).status, 404);
    });
  });
}
