/**
 * Lax validation (docs/validation.md) through HTTP, on every backend: a corpus of realistic,
 * slightly broken statements refused under strict (the default) and stored under lax exactly as
 * sent, with the rules they broke recorded and counted; every filter finds them; the formats and
 * the Activities and Agents resources serve them; what lax never accepts is still a 400; a lax
 * credential beside a strict one on one server.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createCredential } from '../../src/ops/credentials.ts';
import { ADMIN, BACKENDS, jsonInit, startTestLrs, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const LAX: TestUser = { username: 'lax', password: 'lax-pass', scopes: ['all'], agent: { mbox: 'mailto:lax@example.com' }, validation: 'lax' };
const STRICT: TestUser = { username: 'strict', password: 'strict-pass', scopes: ['all'], agent: { mbox: 'mailto:strict@example.com' }, validation: 'strict' };

type Json = Record<string, unknown>;

/** A statement of a run: its own actor, verb and activity, so that each filter's answer is exactly it. */
function base(tag: string): Json {
  return {
    actor: { objectType: 'Agent', name: 'Ann', mbox: `mailto:ann-${tag}@example.com` },
    verb: { id: `http://example.com/verbs/${tag}`, display: { 'en-US': 'did' } },
    object: { objectType: 'Activity', id: `http://example.com/activities/${tag}` },
  };
}

/**
 * One broken statement per class of violation real producers send, with the rule it breaks (the
 * validator's type) and where (loc). `make` gets a fresh tag.
 */
const CORPUS: { name: string; rule: string; loc: (string | number)[]; make(tag: string): Json }[] = [
  {
    name: 'a context activity id that is a bare UUID',
    rule: 'value_error.iri',
    loc: ['context', 'contextActivities', 'parent', 0, 'id'],
    make: (t) => ({ ...base(t), id: randomUUID(), context: { contextActivities: { parent: [{ id: `${t}-0000-4000-8000-000000000000` }] } } }),
  },
  {
    name: 'an object objectType outside the specification',
    rule: 'value_error.enum',
    loc: ['object', 'objectType'],
    make: (t) => ({ ...base(t), object: { objectType: 'Course', id: `http://example.com/activities/${t}`, definition: { name: { 'en-US': 'A course' } } } }),
  },
  {
    name: 'a score whose max equals its min',
    rule: 'value_error.range',
    loc: ['result', 'score', 'max'],
    make: (t) => ({ ...base(t), result: { score: { raw: 0, min: 0, max: 0 }, completion: true } }),
  },
  {
    name: 'extensions keyed by non-IRIs',
    rule: 'value_error.iri',
    loc: ['result', 'extensions', 'time-spent'],
    make: (t) => ({ ...base(t), result: { extensions: { 'time-spent': 42 } } }),
  },
  {
    name: 'a language map keyed by a malformed tag',
    rule: 'value_error.language_tag',
    loc: ['verb', 'display', 'en_US'],
    make: (t) => ({ ...base(t), verb: { id: `http://example.com/verbs/${t}`, display: { en_US: 'did' } } }),
  },
  {
    name: 'a property the specification does not have',
    rule: 'value_error.extra',
    loc: ['lms_course_code'],
    make: (t) => ({ ...base(t), lms_course_code: 'BIO-101' }),
  },
  {
    name: 'a null where only extension values may be null',
    rule: 'type_error.null',
    loc: ['result', 'response'],
    make: (t) => ({ ...base(t), result: { response: null, success: true } }),
  },
  {
    name: 'a score given as a string',
    rule: 'type_error.number',
    loc: ['result', 'score', 'raw'],
    make: (t) => ({ ...base(t), result: { score: { raw: '85' } } }),
  },
  {
    name: 'a duration that is not ISO 8601',
    rule: 'value_error.duration',
    loc: ['result', 'duration'],
    make: (t) => ({ ...base(t), result: { duration: '00:05:00' } }),
  },
  {
    name: 'a registration that is not a UUID',
    rule: 'value_error.uuid',
    loc: ['context', 'registration'],
    make: (t) => ({ ...base(t), context: { registration: `session-${t}` } }),
  },
  {
    name: 'a single context activity (not a list) with a non-IRI id',
    rule: 'value_error.iri',
    loc: ['context', 'contextActivities', 'grouping', 'id'],
    make: (t) => ({ ...base(t), context: { contextActivities: { grouping: { id: `course-${t}` } } } }),
  },
  {
    name: 'an instructor whose mbox is not a mailto IRI',
    rule: 'value_error.mbox',
    loc: ['context', 'instructor', 'mbox'],
    make: (t) => ({ ...base(t), context: { instructor: { mbox: `teacher-${t}@example.com` } } }),
  },
  {
    name: 'an interaction type outside the specification',
    rule: 'value_error.enum',
    loc: ['object', 'definition', 'interactionType'],
    make: (t) => ({
      ...base(t),
      object: { id: `http://example.com/activities/${t}`, definition: { interactionType: 'multiple-choice', choices: [{ id: 'a', description: { 'en-US': 'A' } }] } },
    }),
  },
  {
    name: 'a group member with two identifiers',
    rule: 'value_error.ifi',
    loc: ['actor', 'member', 0],
    make: (t) => ({
      ...base(t),
      actor: { objectType: 'Group', mbox: `mailto:group-${t}@example.com`, member: [{ mbox: 'mailto:m@example.com', openid: 'http://example.com/m' }] },
    }),
  },
  {
    name: 'revision on a statement about an Agent',
    rule: 'value_error.not_allowed',
    loc: ['context', 'revision'],
    make: (t) => ({ ...base(t), object: { objectType: 'Agent', mbox: `mailto:object-${t}@example.com` }, context: { revision: 'v2' } }),
  },
];

/** What lax never accepts: still a 400, with the problem located. */
const REFUSED: { name: string; loc: (string | number)[]; make(tag: string): Json }[] = [
  { name: 'no actor', loc: ['actor'], make: (t) => ({ verb: base(t).verb, object: base(t).object }) },
  { name: 'an actor without an identifier', loc: ['actor'], make: (t) => ({ ...base(t), actor: { name: 'Ann' } }) },
  { name: 'an actor mbox that is not a mailto IRI', loc: ['actor', 'mbox'], make: (t) => ({ ...base(t), actor: { mbox: 'ann@example.com' } }) },
  { name: 'a verb id that is not an IRI', loc: ['verb', 'id'], make: (t) => ({ ...base(t), verb: { id: 'passed' } }) },
  { name: 'an object id that is not an IRI', loc: ['object', 'id'], make: (t) => ({ ...base(t), object: { id: 'lesson 1' } }) },
  { name: 'an object without an id', loc: ['object', 'id'], make: (t) => ({ ...base(t), object: { objectType: 'Course' } }) },
  { name: 'a statement id that is not a UUID', loc: ['id'], make: (t) => ({ ...base(t), id: 'statement-1' }) },
  { name: 'a StatementRef to a non-UUID', loc: ['object', 'id'], make: (t) => ({ ...base(t), object: { objectType: 'StatementRef', id: 'abc' } }) },
  {
    name: 'a voiding statement whose object is not a StatementRef',
    loc: ['object'],
    make: (t) => ({ ...base(t), verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { id: 'http://example.com/x' }, result: { score: { raw: '1' } } }),
  },
  { name: 'a timestamp that is not one', loc: ['timestamp'], make: (t) => ({ ...base(t), timestamp: 'yesterday', lms: 1 }) },
  {
    name: 'an attachment without its sha2',
    loc: ['attachments', 0, 'sha2'],
    make: (t) => ({ ...base(t), attachments: [{ usageType: 'http://example.com/u', display: { 'en-US': 'a' }, contentType: 'text/plain', length: 1 }], lms: 1 }),
  },
];

const LRS_SET = ['id', 'stored', 'authority', 'version', 'timestamp'];
const withoutLrsSet = (s: Json): Json => Object.fromEntries(Object.entries(s).filter(([k]) => !LRS_SET.includes(k)));

for (const backend of BACKENDS) {
  describe(`lax validation [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend, { users: [ADMIN, LAX, STRICT] });
    });
    after(async () => t?.close());

    const post = (body: unknown, user: TestUser, version = '1.0.3') => t.fetch('/xAPI/statements', jsonInit('POST', body, { user, version }));
    const get = async (query: Record<string, string>, user: TestUser = ADMIN) => {
      const res = await t.fetch(`/xAPI/statements?${new URLSearchParams(query)}`, { user });
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as Json & { statements: Json[] };
    };

    test('a statement that breaks no rule is stored under lax as under strict, with no violation', async () => {
      const sent = { ...base(randomUUID()), context: { contextActivities: { parent: { id: 'http://example.com/p' } } } };
      const res = await post(sent, LAX);
      const [id] = (await res.json()) as string[];
      assert.deepEqual(await t.lrs.store.statementViolations('', id), []);
      const served = (await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json()) as Json;
      assert.deepEqual((served.context as Json).contextActivities, { parent: [{ id: 'http://example.com/p' }] }, 'normalised as under strict');
    });

    test('statementsWithViolations: of a page of ids, those stored with violations (voided or not), in their store only', async () => {
      const clean = ((await (await post(base(randomUUID()), LAX)).json()) as string[])[0];
      const broken = [];
      for (const c of CORPUS.slice(0, 3)) broken.push(((await (await post(c.make(randomUUID()), LAX)).json()) as string[])[0]);
      const voiding = { ...base(randomUUID()), verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id: broken[2] } };
      assert.equal((await post(voiding, ADMIN)).status, 200);
      const unknown = randomUUID();
      const found = await t.lrs.store.statementsWithViolations('', [clean, ...broken, unknown]);
      assert.deepEqual([...found].sort(), [...broken].sort());
      assert.deepEqual([...(await t.lrs.store.statementsWithViolations('', []))], []);
      assert.deepEqual([...(await t.lrs.store.statementsWithViolations('another-store', broken))], [], 'another store’s ids are not its');
      // More ids than a page of the console holds.
      const page = [...broken, ...Array.from({ length: 200 }, () => randomUUID())];
      assert.equal((await t.lrs.store.statementsWithViolations('', page)).size, 3);
    });

    test('the default is strict: every statement of the corpus is refused with 400 and the rule it breaks', async () => {
      for (const c of CORPUS) {
        const res = await post(c.make(randomUUID()), ADMIN);
        assert.equal(res.status, 400, c.name);
        const body = (await res.json()) as { detail: { loc: unknown[]; type: string }[] };
        assert.ok(
          body.detail.some((d) => d.type === c.rule && JSON.stringify(d.loc) === JSON.stringify([0, ...c.loc])),
          `${c.name}: ${JSON.stringify(body)}`,
        );
      }
    });

    test('a credential choosing strict is refused as the default is', async () => {
      const res = await post(CORPUS[0].make(randomUUID()), STRICT);
      assert.equal(res.status, 400);
    });

    for (const c of CORPUS) {
      test(`lax stores ${c.name} exactly as sent, its violation recorded, and the filters find it`, async () => {
        const tag = randomUUID();
        const sent = c.make(tag);
        const res = await post(sent, LAX);
        assert.equal(res.status, 200, await res.clone().text());
        const [id] = (await res.json()) as string[];
        const one = await t.fetch(`/xAPI/statements?statementId=${id}`);
        assert.equal(one.status, 200);
        const served = (await one.json()) as Json;
        assert.deepEqual(withoutLrsSet(served), withoutLrsSet(sent));
        assert.equal(served.id, id);
        assert.deepEqual(served.authority, { objectType: 'Agent', mbox: 'mailto:lax@example.com' });
        assert.equal(served.version, '1.0.0');
        // Sent again, under either version's comparison rules: the same statement, a no-op.
        for (const version of ['1.0.3', '2.0.0']) assert.equal((await post({ ...sent, id }, LAX, version)).status, 200, version);
        // The rule it broke, kept with it (what `lectern violations` prints).
        const violations = await t.lrs.store.statementViolations('', id);
        assert.ok(
          violations?.some((v) => v.type === c.rule && JSON.stringify(v.loc) === JSON.stringify(c.loc)),
          JSON.stringify(violations),
        );

        // Every filter, by what the statement carries.
        const actor = sent.actor as Json;
        const byAgent = await get({ agent: JSON.stringify(actor.objectType === 'Group' ? { objectType: 'Group', mbox: actor.mbox } : actor) });
        assert.deepEqual(
          byAgent.statements.map((s) => s.id),
          [id],
          'agent',
        );
        const byVerb = await get({ verb: (sent.verb as Json).id as string });
        assert.deepEqual(
          byVerb.statements.map((s) => s.id),
          [id],
          'verb',
        );
        const object = sent.object as Json;
        if (typeof object.id === 'string') {
          const byActivity = await get({ activity: object.id });
          assert.deepEqual(
            byActivity.statements.map((s) => s.id),
            [id],
            'activity',
          );
        }
        // The other formats and the canonical definitions serve it too.
        for (const format of ['ids', 'canonical']) {
          const page = await get({ verb: (sent.verb as Json).id as string, format });
          assert.equal(page.statements.length, 1, format);
        }
        const attachments = await t.fetch(`/xAPI/statements?verb=${encodeURIComponent((sent.verb as Json).id as string)}&attachments=true`);
        assert.equal(attachments.status, 200);
      });
    }

    test('a non-IRI context activity id is found by related_activities, a UUID registration by registration', async () => {
      const tag = randomUUID();
      const registration = randomUUID();
      const sent = { ...base(tag), context: { registration, contextActivities: { parent: [{ id: tag }], grouping: { id: `course-${tag}` } }, extensions: { lms: 1 } } };
      const res = await post(sent, LAX);
      assert.equal(res.status, 200, await res.clone().text());
      const [id] = (await res.json()) as string[];
      // The activity parameter must be an IRI: a statement's non-IRI ids are found through its others.
      const byRelated = await get({ activity: `http://example.com/activities/${tag}`, related_activities: 'true' });
      assert.deepEqual(
        byRelated.statements.map((s) => s.id),
        [id],
      );
      const byRegistration = await get({ registration });
      assert.deepEqual(
        byRegistration.statements.map((s) => s.id),
        [id],
      );
      const canonical = await get({ registration, format: 'canonical' });
      assert.deepEqual((canonical.statements[0].context as Json).contextActivities, { parent: [{ id: tag }], grouping: { id: `course-${tag}` } });
    });

    test('an object of an unknown objectType is found by its id; the Activities and Agents resources answer', async () => {
      const tag = randomUUID();
      const sent = CORPUS[1].make(tag);
      assert.equal((await post(sent, LAX)).status, 200);
      const objectId = (sent.object as Json).id as string;
      const activity = await t.fetch(`/xAPI/activities?activityId=${encodeURIComponent(objectId)}`);
      assert.equal(activity.status, 200);
      // A definition that breaks no rule defines the canonical Activity, whatever the objectType.
      assert.deepEqual(await activity.json(), { objectType: 'Activity', id: objectId, definition: { name: { 'en-US': 'A course' } } });
      const agents = await t.fetch(`/xAPI/agents?agent=${encodeURIComponent(JSON.stringify(sent.actor))}`);
      assert.equal(agents.status, 200);
      assert.deepEqual(((await agents.json()) as Json).mbox, [(sent.actor as Json).mbox]);
    });

    test('a definition that breaks a rule does not become the canonical Activity', async () => {
      const tag = randomUUID();
      const objectId = `http://example.com/activities/${tag}`;
      assert.equal((await post({ ...base(tag), object: { id: objectId, definition: { name: { 'en-US': 'Good' } } } }, ADMIN)).status, 200);
      assert.equal((await post({ ...base(tag), object: { id: objectId, definition: { name: { en_US: 'Bad' } } } }, LAX)).status, 200);
      const activity = await t.fetch(`/xAPI/activities?activityId=${encodeURIComponent(objectId)}`);
      assert.deepEqual(await activity.json(), { objectType: 'Activity', id: objectId, definition: { name: { 'en-US': 'Good' } } });
    });

    test('lax never accepts what would break the minimal form: 400 with the problem located', async () => {
      for (const r of REFUSED) {
        const res = await post(r.make(randomUUID()), LAX);
        assert.equal(res.status, 400, r.name);
        const body = (await res.json()) as { detail: { loc: unknown[] }[] };
        assert.ok(
          body.detail.some((d) => JSON.stringify(d.loc).startsWith(JSON.stringify([0, ...r.loc]).slice(0, -1))),
          `${r.name}: ${JSON.stringify(body)}`,
        );
      }
    });

    test('a statement targeting a lax one through a StatementRef is found by the filters that find its target', async () => {
      const tag = randomUUID();
      const target = CORPUS[0].make(tag);
      const [targetId] = (await (await post(target, LAX)).json()) as string[];
      const ref = { ...base(randomUUID()), object: { objectType: 'StatementRef', id: targetId } };
      const [refId] = (await (await post(ref, ADMIN)).json()) as string[];
      const page = await get({ activity: (target.object as Json).id as string });
      assert.deepEqual(page.statements.map((s) => s.id).sort(), [targetId, refId].sort());
    });

    test('an unknown property nested too deeply is refused, not a 500', async () => {
      let deep: unknown = 1;
      for (let i = 0; i < 600; i++) deep = [deep];
      const res = await post({ ...base(randomUUID()), lms: deep }, LAX);
      assert.equal(res.status, 400, await res.clone().text());
    });

    test('malformed JSON is refused under lax too', async () => {
      const res = await t.fetch('/xAPI/statements', { method: 'POST', user: LAX, headers: { 'content-type': 'application/json' }, body: '{"actor": ' });
      assert.equal(res.status, 400);
    });

    test('a batch: one statement lax refuses refuses the batch, and nothing of it is stored', async () => {
      const tag = randomUUID();
      const good = CORPUS[2].make(tag);
      const res = await post([good, REFUSED[3].make(tag)], LAX);
      assert.equal(res.status, 400);
      const page = await get({ verb: (good.verb as Json).id as string });
      assert.equal(page.statements.length, 0);
    });

    test('an id conflict is a 409 under lax as under strict; re-sending the same lax statement is a no-op', async () => {
      const sent = CORPUS[0].make(randomUUID());
      assert.equal((await post(sent, LAX)).status, 200);
      assert.equal((await post(sent, LAX)).status, 200);
      const res = await post({ ...sent, result: { response: 'other' } }, LAX);
      assert.equal(res.status, 409);
    });

    test('PUT under lax stores the statement under its statementId', async () => {
      const id = randomUUID();
      const sent = CORPUS[3].make(randomUUID());
      const res = await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', sent, { user: LAX }));
      assert.equal(res.status, 204, await res.clone().text());
      const served = (await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json()) as Json;
      assert.deepEqual(withoutLrsSet(served), withoutLrsSet(sent));
    });

    test('under xAPI 2.0 too, the statement keeps what it was sent with', async () => {
      const sent: Json = { ...CORPUS[4].make(randomUUID()), timestamp: '2024-05-01T12:00:00+02:00' };
      const res = await post(sent, LAX, '2.0.0');
      assert.equal(res.status, 200, await res.clone().text());
      const [id] = (await res.json()) as string[];
      const served = (await (await t.fetch(`/xAPI/statements?statementId=${id}`, { version: '2.0.0' })).json()) as Json;
      assert.deepEqual(served.verb, sent.verb);
      assert.equal(served.timestamp, '2024-05-01T10:00:00Z');
      assert.equal(served.version, '2.0.0');
    });

    test('voiding a lax statement works as under strict', async () => {
      const sent = CORPUS[5].make(randomUUID());
      const [id] = (await (await post(sent, LAX)).json()) as string[];
      const voiding = { ...base(randomUUID()), verb: { id: 'http://adlnet.gov/expapi/verbs/voided' }, object: { objectType: 'StatementRef', id } };
      assert.equal((await post(voiding, LAX)).status, 200);
      assert.equal((await t.fetch(`/xAPI/statements?voidedStatementId=${id}`)).status, 200);
      assert.equal((await t.fetch(`/xAPI/statements?statementId=${id}`)).status, 404);
    });

    test('a database credential choosing lax (lectern credentials create --validation lax) stores what the default refuses', async () => {
      const { key, secret } = await createCredential(t.lrs.store, { scopes: ['all'], agent: { objectType: 'Agent', mbox: 'mailto:robot@example.com' }, validation: 'lax' });
      const robot: TestUser = { username: key, password: secret, scopes: [], agent: {} };
      const sent = CORPUS[2].make(randomUUID());
      assert.equal((await post(sent, ADMIN)).status, 400);
      const res = await post(sent, robot);
      assert.equal(res.status, 200, await res.clone().text());
    });

    test('/metrics counts the violations by rule', async () => {
      const res = await t.fetch('/metrics', { version: null });
      const text = await res.text();
      assert.match(text, /lectern_statement_violations_total\{rule="value_error\.iri"\} [1-9]/);
      assert.match(text, /lectern_statement_violations_total\{rule="value_error\.language_tag"\} [1-9]/);
    });
  });
}
