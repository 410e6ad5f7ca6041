/**
 * The lifecycle use cases (src/ops/) called in process, without the CLI: their progress events,
 * their stop between batches and what they return then, their typed refusals. What they do to
 * the data is checked through the CLI (test/lifecycle/, test/forwarding/).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import type { LrsError } from '../../src/errors.ts';
import { erasePerson } from '../../src/ops/erase.ts';
import { OpsError } from '../../src/ops/errors.ts';
import { exportQuery, exportStatements } from '../../src/ops/export.ts';
import { retryDeadLetters } from '../../src/ops/forwarding.ts';
import type { ImportItem } from '../../src/ops/archive.ts';
import { IMPORT_AUTHORITY, StatementImport } from '../../src/ops/import.ts';
import type { ProgressEvent, TextSink } from '../../src/ops/progress.ts';
import { storeStatements, type Writer } from '../../src/ops/statements.ts';
import type { Actor } from '../../src/xapi/types.ts';
import { storeBackends } from '../helpers/stores.ts';

const BEN: Actor = { objectType: 'Agent', mbox: 'mailto:ben@example.com' };
const writer: Writer = { authority: { objectType: 'Agent', mbox: 'mailto:auth@example.com' }, define: true, mineOnly: false };
const statement = (actor: Actor, id: string = randomUUID()) => ({ id, actor, verb: { id: 'http://example.com/v' }, object: { id: 'http://example.com/a' } });

/** A text sink that keeps what it is given. */
function memory(): TextSink & { text: string } {
  const sink = {
    text: '',
    async write(t: string) {
      sink.text += t;
    },
  };
  return sink;
}

/** Events as `type phase[ done][ total]` strings, for comparing sequences. */
const trace = <P extends string, F extends object>(events: ProgressEvent<P, F>[]): string[] =>
  events.map((e) => [e.type, e.phase, 'done' in e ? e.done : undefined, e.type === 'start' ? e.total : undefined].filter((x) => x !== undefined).join(' '));

for (const backend of storeBackends) {
  describe(`use cases in process [${backend.name}]`, async () => {
    const { store, dispose } = await backend.open();
    after(async () => {
      await store.close();
      await dispose();
    });

    test('storeStatements stores what POST would and answers its ids; an import finds them stored', async () => {
      const tenant = 'store';
      const batch = [statement(BEN), statement(BEN)];
      const out = await storeStatements(store, tenant, { value: batch, parts: new Map() }, '1.0.3', writer);
      assert.deepEqual(
        out.ids,
        batch.map((s) => s.id),
      );
      assert.equal(out.inserted, 2);
      const job = new StatementImport({ store, tenant, authority: IMPORT_AUTHORITY, rejects: memory() });
      assert.equal(await job.run(items(batch), { batchSize: 10 }), true);
      assert.deepEqual(job.counts, { read: 2, inserted: 0, existing: 2, rejected: 0, laxAtSource: 0 });
    });

    test('export: a start with the total, an advance per page, an end; stopped, it says where to continue', async () => {
      const tenant = 'export';
      await storeStatements(store, tenant, { value: [statement(BEN), statement(BEN), statement(BEN)], parts: new Map() }, '1.0.3', writer);
      const events: ProgressEvent<'statements'>[] = [];
      const out = memory();
      const done = await exportStatements(store, { tenant, query: exportQuery({}), out, onProgress: (e) => events.push(e) });
      assert.deepEqual(trace(events), ['start statements 3', 'advance statements 3', 'end statements']);
      assert.equal(done.complete, true);
      assert.equal(done.written, 3);
      assert.equal(out.text.trim().split('\n').length, 3);

      const stop = new AbortController();
      stop.abort();
      const stopped = await exportStatements(store, { tenant, query: exportQuery({}), out: memory(), signal: stop.signal, after: done.after });
      assert.deepEqual({ complete: stopped.complete, written: stopped.written, after: stopped.after }, { complete: false, written: 0, after: done.after });
    });

    test("export: a bad filter is the Statement resource's ValidationFailed", () => {
      assert.throws(
        () => exportQuery({ since: 'yesterday' }),
        (err: LrsError) => err.name === 'ValidationFailed' && err.issues?.[0].loc[1] === 'since',
      );
    });

    test('erase: a dry run scans and changes nothing; the erasure has a delete phase', async () => {
      const tenant = 'erase';
      const other: Actor = { objectType: 'Agent', mbox: 'mailto:ann@example.com' };
      await storeStatements(store, tenant, { value: [statement(BEN), statement(other), statement(BEN)], parts: new Map() }, '1.0.3', writer);
      const events: ProgressEvent<'scan' | 'delete', { found?: number }>[] = [];
      const dry = await erasePerson(store, { tenant, person: BEN, dryRun: true, list: true, onProgress: (e) => events.push(e) });
      assert.deepEqual(trace(events), ['start scan 3', 'advance scan 3', 'end scan']);
      assert.deepEqual(
        events.filter((e) => e.type === 'advance').map((e) => (e as { found?: number }).found),
        [2],
      );
      assert.equal(dry.report.statements, 2);
      assert.equal(dry.listed.statements.length, 2);
      assert.equal(await store.countStatements(tenant, {}), 3);

      events.length = 0;
      const done = await erasePerson(store, { tenant, person: BEN, onProgress: (e) => events.push(e) });
      assert.deepEqual(trace(events), ['start scan 3', 'advance scan 3', 'end scan', 'start delete 2', 'advance delete 2', 'end delete']);
      assert.deepEqual(done.listed, { statements: [], documents: [] }, 'nothing listed unless asked');
      assert.equal(done.report.complete, true);
      assert.equal(await store.countStatements(tenant, {}), 1);
    });

    test('erase: stopped before the scan, nothing is done and the report is incomplete', async () => {
      const stop = new AbortController();
      stop.abort();
      const r = await erasePerson(store, { tenant: 'erase-stopped', person: BEN, signal: stop.signal });
      assert.deepEqual(r.report, { action: 'erase', dryRun: false, target: 'erase-stopped', statements: 0, documents: 0, complete: false });
    });

    test('import: refusals go to the rejects sink in input order; progress after each batch stored; stopped, where to resume', async () => {
      const tenant = 'import';
      const rejects = memory();
      const job = new StatementImport({ store, tenant, authority: IMPORT_AUTHORITY, rejects });
      const events: ProgressEvent<'statements', { inserted: number }>[] = [];
      const stop = new AbortController();
      const list: ImportItem[] = [
        { n: 1, value: statement(BEN) },
        { n: 2, malformed: 'malformed JSON: here' },
        { n: 3, value: [] },
        { n: 4, value: statement(BEN) },
        { n: 5, value: statement(BEN) },
      ];
      const complete = await job.run(from(list), {
        batchSize: 2,
        signal: stop.signal,
        onProgress: (e) => {
          events.push(e);
          if (e.type === 'advance') stop.abort();
        },
      });
      // The second batch was read while the first was stored; the stop comes after it.
      assert.equal(complete, false);
      assert.equal(job.lastStored, 4);
      assert.deepEqual(job.counts, { read: 4, inserted: 2, existing: 0, rejected: 2, laxAtSource: 0 });
      // `done` and `rejected` count the statements read, the next batch's included (it is read and
      // validated while one is stored); `inserted` what was stored.
      assert.deepEqual(trace(events), ['start statements', 'advance statements 4', 'advance statements 4', 'end statements']);
      assert.deepEqual(
        events.flatMap((e) => (e.type === 'advance' ? [e.inserted] : [])),
        [1, 2],
      );
      assert.deepEqual(
        rejects.text
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l).line),
        [2, 3],
      );
      const rest = new StatementImport({ store, tenant, authority: IMPORT_AUTHORITY, rejects });
      assert.equal(await rest.run(from(list), { batchSize: 2, skip: job.lastStored }), true);
      assert.deepEqual(rest.counts, { read: 1, inserted: 1, existing: 0, rejected: 0, laxAtSource: 0 });
    });

    test('forwarding: retrying dead letters of a target neither active nor in the outbox is an OpsError not_found', async () => {
      await assert.rejects(retryDeadLetters(store, ['http://a.example/xAPI'], 'http://typo.example/xAPI'), (err: OpsError) => err instanceof OpsError && err.status === 404);
      assert.equal(await retryDeadLetters(store, ['http://a.example/xAPI'], 'http://a.example/xAPI'), 0);
    });
  });
}

async function* from(list: ImportItem[]): AsyncGenerator<ImportItem> {
  yield* list;
}

const items = (values: unknown[]): AsyncGenerator<ImportItem> => from(values.map((value, i) => ({ n: i + 1, value })));

describe('validation modes', () => {
  test('a credentials-file user and a database credential refuse the same modes, with the same message, before writing anything', async () => {
    const { createCredential } = await import('../../src/ops/credentials.ts');
    const { credentialEntry } = await import('../../src/ops/users.ts');
    // A store that fails any use: a refused create must not reach it.
    const untouched = new Proxy(
      {},
      {
        get: () => {
          throw new Error('the store was used');
        },
      },
    ) as Parameters<typeof createCredential>[0];
    const refusals = async (validation: string) => {
      const file = await credentialEntry({ username: 'u', password: 'p', scopes: ['all'], agent: BEN as never, validation }).then(
        () => 'accepted',
        (e: Error) => e,
      );
      const db = await createCredential(untouched, { scopes: ['all'], agent: BEN as never, validation }).then(
        () => 'accepted',
        (e: Error) => e,
      );
      return [file, db];
    };
    for (const mode of ['loose', 'Strict', '']) {
      const [file, db] = await refusals(mode);
      assert.ok(file instanceof OpsError && db instanceof OpsError, mode);
      assert.equal(file.message, `validation must be strict or lax, got ${JSON.stringify(mode)}`);
      assert.equal(db.message, file.message);
    }
    for (const mode of ['strict', 'lax'])
      assert.equal((await credentialEntry({ username: 'u', password: 'p', scopes: ['all'], agent: BEN as never, validation: mode })).validation, mode);
  });
});
