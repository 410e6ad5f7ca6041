/**
 * `lectern erase --agent` and the kept rejections (refused writes hold learners' data too), on
 * every backend through HTTP and the built CLI: a person given by `mbox_sha1sum` is found in the
 * bodies and parameters that carry their plain `mbox` (as an actor, a group member, a document's
 * `agent` parameter, in a body cut at LECTERN_REJECTIONS_MAX_BODY, with the domain in another
 * case), and a person given by `mbox` in those that carry its SHA-1. Another person's stay.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, statement, type TestLrs } from '../helpers/lrs.ts';
import { runCli } from './helpers.ts';

const MAX_BODY = 2048;
const sha1 = (text: string): string => createHash('sha1').update(text).digest('hex');
/** Refused for its verb: kept with its body. */
const refused = (extra: Record<string, unknown>) => statement({ verb: { id: 'not an iri' }, ...extra });
const state = (agent: unknown) => `/xAPI/activities/state?activityId=${encodeURIComponent('http://example.com/act')}&agent=${encodeURIComponent(JSON.stringify(agent))}&stateId=s1`;

for (const backend of BACKENDS) {
  describe(`lectern erase --agent and kept rejections (${backend.name})`, () => {
    let lrs: TestLrs;
    before(async () => {
      lrs = await startTestLrs(backend, { users: [ADMIN], env: { LECTERN_REJECTIONS_MAX_BODY: String(MAX_BODY) } });
    });
    after(async () => lrs?.close());

    /** The markers of the kept rejections, once the keeper has written what it was handed. */
    const markers = async (): Promise<string[]> => {
      await lrs.lrs.rejections.flush();
      const rows = await lrs.lrs.store.listRejections({ limit: 1000 });
      return rows.map((r) => /marker-(\w+)/.exec(r.body?.toString() ?? '')?.[1] ?? /marker-(\w+)/.exec(JSON.stringify(r.query))?.[1] ?? '?').sort();
    };
    const keep = async (path: string, init: RequestInit) => assert.equal((await lrs.fetch(path, init)).status, 400);
    const erase = async (agent: Record<string, unknown>) => {
      const r = await runCli(lrs, ['erase', '--agent', JSON.stringify(agent)]);
      assert.equal(r.code, 0, r.stderr);
      return r.stdout;
    };

    test("given by mbox_sha1sum: the rejections that carry the plain mbox go, wherever it stands; another person's stay", async () => {
      await lrs.lrs.rejections.flush();
      await lrs.lrs.store.clearRejections();
      const mbox = `mailto:Sha.${randomUUID().slice(0, 8)}@example.com`;
      const upper = mbox.replace('example.com', 'EXAMPLE.COM');
      await keep('/xAPI/statements', jsonInit('POST', refused({ actor: { mbox }, result: { response: 'marker-actor' } })));
      await keep(
        '/xAPI/statements',
        jsonInit('POST', refused({ actor: { objectType: 'Group', member: [{ mbox: 'mailto:x@example.com' }, { mbox: upper }] }, result: { response: 'marker-member' } })),
      );
      // Cut at MAX_BODY: no longer JSON, searched as text.
      await keep('/xAPI/statements', jsonInit('POST', refused({ actor: { mbox }, result: { response: `marker-cut ${'x'.repeat(2 * MAX_BODY)}` } })));
      await keep(`${state({ mbox })}&marker-param=1`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"not json' });
      await keep('/xAPI/statements', jsonInit('POST', refused({ actor: { mbox: 'mailto:someone.else@example.com' }, result: { response: 'marker-other' } })));
      assert.deepEqual(await markers(), ['actor', 'cut', 'member', 'other', 'param']);

      const out = await erase({ mbox_sha1sum: sha1(mbox).toUpperCase() });
      assert.match(out, /^removed 4 kept rejections \(refused writes\) mentioning the agent$/m);
      assert.deepEqual(await markers(), ['other']);
    });

    test('given by mbox: the rejections that carry its SHA-1 go too', async () => {
      await lrs.lrs.rejections.flush();
      await lrs.lrs.store.clearRejections();
      const mbox = `mailto:plain.${randomUUID().slice(0, 8)}@example.com`;
      await keep('/xAPI/statements', jsonInit('POST', refused({ actor: { mbox_sha1sum: sha1(mbox) }, result: { response: 'marker-hashed' } })));
      await keep('/xAPI/statements', jsonInit('POST', refused({ actor: { mbox_sha1sum: sha1('mailto:someone.else@example.com') }, result: { response: 'marker-other' } })));
      const out = await erase({ mbox });
      assert.match(out, /^removed 1 kept rejections \(refused writes\) mentioning the agent$/m);
      assert.deepEqual(await markers(), ['other']);
    });
  });
}
