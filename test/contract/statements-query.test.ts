/**
 * GET statements (xAPI-Communication §2.1.3): every parameter, StatementRef targeting (§2.1.3.s3),
 * formats and language filtering (§2.1.3.s4), HEAD, Last-Modified and Consistent-Through, through
 * HTTP, on every backend.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { ADMIN, REPLICA_BACKENDS, jsonInit, OTHER, startTestLrs, statement, type TestLrs, type TestUser } from '../helpers/lrs.ts';

const VOIDED = 'http://adlnet.gov/expapi/verbs/voided';
const ref = (id: string) => ({ objectType: 'StatementRef', id });
const enc = (v: unknown) => encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v));
const mbox = () => `mailto:${randomUUID()}@example.com`;
const activityId = () => `http://example.com/activities/${randomUUID()}`;
const verbId = () => `http://example.com/verbs/${randomUUID()}`;

for (const backend of REPLICA_BACKENDS) {
  describe(`statement queries [${backend.name}]`, () => {
    let t: TestLrs;
    before(async () => {
      t = await startTestLrs(backend);
    });
    after(async () => t?.close());

    const post = async (body: unknown, user: TestUser = ADMIN): Promise<string[]> => {
      const res = await t.fetch('/xAPI/statements', jsonInit('POST', body, { user }));
      assert.equal(res.status, 200, await res.clone().text());
      return res.json();
    };
    /** Posts one statement per request, a few ms apart, so that each has its own `stored`. */
    const postApart = async (statements: Record<string, unknown>[]): Promise<string[]> => {
      const out: string[] = [];
      for (const s of statements) {
        out.push(...(await post(s)));
        await sleep(3);
      }
      return out;
    };
    const ids = async (qs: string, user: TestUser = ADMIN): Promise<string[]> => {
      const res = await t.fetch(`/xAPI/statements?${qs}`, { user });
      assert.equal(res.status, 200, `${qs}: ${await res.clone().text()}`);
      return (await res.json()).statements.map((s: { id: string }) => s.id);
    };
    /** Follows `more` links to the end; every page's ids. */
    const walk = async (qs: string): Promise<string[][]> => {
      const pages: string[][] = [];
      let next = `/xAPI/statements?${qs}`;
      while (next) {
        const body = await (await t.fetch(next)).json();
        pages.push(body.statements.map((s: { id: string }) => s.id));
        next = body.more;
        assert.ok(pages.length < 50, 'paging ends');
      }
      return pages;
    };
    const storedOf = async (id: string): Promise<string> => (await (await t.fetch(`/xAPI/statements?statementId=${id}`)).json()).stored;

    describe('StatementRef targeting (§2.1.3.s3)', () => {
      const ben = { mbox: mbox(), name: 'Ben' };
      const training = activityId();
      const passed = verbId();
      const confirmed = verbId();
      const registration = randomUUID();
      // c: Ben passed training; b: Andrew confirmed c; a: Carol commented on b; x: unrelated.
      let c: string, b: string, x: string, a: string;
      before(async () => {
        [c] = await postApart([statement({ actor: ben, verb: { id: passed }, object: { id: training }, context: { registration } })]);
        [b] = await postApart([statement({ actor: { mbox: mbox(), name: 'Andrew' }, verb: { id: confirmed }, object: ref(c) })]);
        [x] = await postApart([statement({ verb: { id: verbId() } })]);
        [a] = await postApart([statement({ actor: { mbox: mbox(), name: 'Carol' }, verb: { id: verbId() }, object: ref(b) })]);
      });

      test('agent, verb, activity and registration filters also return statements targeting a match, recursively, newest first', async () => {
        assert.deepEqual(await ids(`agent=${enc({ mbox: ben.mbox })}`), [a, b, c]);
        assert.deepEqual(await ids(`activity=${enc(training)}`), [a, b, c]);
        assert.deepEqual(await ids(`verb=${enc(passed)}`), [a, b, c]);
        assert.deepEqual(await ids(`registration=${registration}`), [a, b, c]);
        assert.deepEqual(await ids(`verb=${enc(confirmed)}`).then((r) => r.filter((id) => [a, b, c].includes(id))), [a, b], 'b matches itself, a targets it');
        assert.deepEqual(await ids(`agent=${enc({ mbox: ben.mbox })}&ascending=true`), [c, b, a]);
        assert.ok(!(await ids(`agent=${enc({ mbox: ben.mbox })}`)).includes(x));
      });

      test('all filters apply to the targeted statement together', async () => {
        assert.deepEqual(await ids(`agent=${enc({ mbox: ben.mbox })}&verb=${enc(passed)}&activity=${enc(training)}&registration=${registration}`), [a, b, c]);
        assert.deepEqual(await ids(`agent=${enc({ mbox: ben.mbox })}&verb=${enc(confirmed)}`), []);
      });

      test('since and until apply to the targeting statement, not the targeted one', async () => {
        const cStored = await storedOf(c);
        const bStored = await storedOf(b);
        assert.deepEqual(await ids(`agent=${enc({ mbox: ben.mbox })}&since=${enc(cStored)}`), [a, b]);
        assert.deepEqual(await ids(`agent=${enc({ mbox: ben.mbox })}&since=${enc(bStored)}`), [a]);
        assert.deepEqual(await ids(`agent=${enc({ mbox: ben.mbox })}&until=${enc(bStored)}`), [b, c]);
        assert.deepEqual(await ids(`agent=${enc({ mbox: ben.mbox })}&since=${enc(cStored)}&until=${enc(bStored)}`), [b]);
      });

      test('a target stored after the StatementRefs reaching it: they match once it arrives', async () => {
        const who = { mbox: mbox() };
        const late = verbId();
        const target = randomUUID();
        const [r1] = await post(statement({ verb: { id: verbId() }, object: ref(target) }));
        const [r2] = await post(statement({ verb: { id: verbId() }, object: ref(r1) })); // through r1
        assert.deepEqual(await ids(`agent=${enc(who)}`), []);
        await post(statement({ id: target, actor: who, verb: { id: late } }));
        assert.deepEqual(await ids(`agent=${enc(who)}`), [target, r2, r1]);
        assert.deepEqual(await ids(`verb=${enc(late)}`), [target, r2, r1]);
      });

      test('a StatementRef in context.statement does not target', async () => {
        const id = (await post(statement({ verb: { id: verbId() }, context: { statement: ref(c) } })))[0];
        assert.ok(!(await ids(`agent=${enc({ mbox: ben.mbox })}`)).includes(id));
      });

      test('a voided matching statement is not returned, the statements targeting it are — its voiding statement too', async () => {
        const who = { mbox: mbox() };
        const [s] = await post(statement({ actor: who }));
        const [comment] = await post(statement({ verb: { id: verbId() }, object: ref(s) }));
        const [v] = await post(statement({ verb: { id: VOIDED }, object: ref(s) }));
        assert.deepEqual(await ids(`agent=${enc(who)}`), [v, comment]);
        // A statement targeting the voiding statement matches through it (a → v → s).
        const [onVoid] = await post(statement({ verb: { id: verbId() }, object: ref(v) }));
        assert.deepEqual(await ids(`agent=${enc(who)}`), [onVoid, v, comment]);
      });

      test('targeting and direct matches interleave in stored order; paging by 1 and 2 neither repeats nor skips', async () => {
        const who = { mbox: mbox() };
        const other = verbId();
        // d: direct matches; t: targeting (directly or through a chain); n: not matching.
        const d1 = randomUUID(),
          t1 = randomUUID(),
          n1 = randomUUID(),
          d2 = randomUUID(),
          t2 = randomUUID(),
          n2 = randomUUID(),
          t3 = randomUUID(),
          d3 = randomUUID();
        await post(statement({ id: d1, actor: who, verb: { id: other } }));
        await post([statement({ id: t1, verb: { id: other }, object: ref(d1) }), statement({ id: n1, verb: { id: other } })]);
        await post([statement({ id: d2, actor: who, verb: { id: other } }), statement({ id: t2, verb: { id: other }, object: ref(t1) })]);
        await post([statement({ id: n2, verb: { id: other }, object: ref(n1) }), statement({ id: t3, verb: { id: other }, object: ref(d2) })]);
        await post(statement({ id: d3, object: { objectType: 'Agent', ...who }, verb: { id: other } }));
        const expected = [d3, t3, t2, d2, t1, d1];
        assert.deepEqual(await ids(`agent=${enc(who)}`), expected);
        for (const limit of [1, 2, 4]) {
          const pages = await walk(`agent=${enc(who)}&limit=${limit}`);
          assert.deepEqual(pages.flat(), expected, `limit=${limit}`);
          assert.ok(pages.every((p) => p.length <= limit));
          const asc = await walk(`agent=${enc(who)}&limit=${limit}&ascending=true`);
          assert.deepEqual(asc.flat(), [...expected].reverse(), `limit=${limit} ascending`);
        }
        // The verb filter matches every one of them directly, plus the targeting statements: no duplicates.
        assert.deepEqual((await walk(`verb=${enc(other)}&limit=3`)).flat(), [d3, t3, n2, t2, d2, n1, t1, d1]);
      });
    });

    describe('parameters', () => {
      test('registration', async () => {
        const reg = randomUUID();
        const [s1] = await post(statement({ context: { registration: reg } }));
        await post(statement({ context: { registration: randomUUID() } }));
        assert.deepEqual(await ids(`registration=${reg}`), [s1]);
        assert.deepEqual(await ids(`registration=${reg.toUpperCase()}`), [s1], 'UUIDs are case-insensitive');
        assert.equal((await t.fetch('/xAPI/statements?registration=nope')).status, 400);
      });

      test('activity vs related_activities: object only, or also context activities and SubStatements', async () => {
        const act = activityId();
        const sub = (o: Record<string, unknown>) => ({ objectType: 'SubStatement', actor: { mbox: mbox() }, verb: { id: verbId() }, ...o });
        const placements: Record<string, Record<string, unknown>> = {
          object: { object: { id: act } },
          parent: { context: { contextActivities: { parent: [{ id: act }] } } },
          grouping: { context: { contextActivities: { grouping: [{ id: act }] } } },
          category: { context: { contextActivities: { category: { id: act } } } },
          other: { context: { contextActivities: { other: [{ id: activityId() }, { id: act }] } } },
          subObject: { object: sub({ object: { id: act } }) },
          subContext: { object: sub({ object: { id: activityId() }, context: { contextActivities: { parent: [{ id: act }] } } }) },
        };
        const ids1: Record<string, string> = {};
        for (const [name, o] of Object.entries(placements)) ids1[name] = (await post(statement(o)))[0];
        await post(statement({ object: { id: activityId() } }));
        assert.deepEqual(await ids(`activity=${enc(act)}`), [ids1.object]);
        assert.deepEqual(await ids(`activity=${enc(act)}&related_activities=false`), [ids1.object]);
        assert.deepEqual((await ids(`activity=${enc(act)}&related_activities=true`)).sort(), Object.values(ids1).sort());
      });

      test('agent vs related_agents: actor/object only, or also authority, instructor, team, group members, SubStatements', async () => {
        const m = { mbox: mbox() };
        const sub = (o: Record<string, unknown>) => ({ objectType: 'SubStatement', verb: { id: verbId() }, object: { id: activityId() }, actor: { mbox: mbox() }, ...o });
        const direct: Record<string, Record<string, unknown>> = {
          actor: { actor: m },
          object: { object: { objectType: 'Agent', ...m } },
          actorGroupMember: { actor: { objectType: 'Group', member: [{ mbox: mbox() }, m] } },
          objectGroupMember: { object: { objectType: 'Group', mbox: mbox(), member: [m] } },
        };
        const related: Record<string, Record<string, unknown>> = {
          instructor: { context: { instructor: m } },
          team: { context: { team: { objectType: 'Group', member: [m] } } },
          subActor: { object: sub({ actor: m }) },
          subObject: { object: sub({ object: { objectType: 'Agent', ...m } }) },
          subInstructor: { object: sub({ context: { instructor: m } }) },
        };
        const got: Record<string, string> = {};
        for (const [name, o] of Object.entries({ ...direct, ...related })) got[name] = (await post(statement(o)))[0];
        await post(statement({ actor: { mbox: mbox() } }));
        const directIds = Object.keys(direct).map((k) => got[k]);
        assert.deepEqual((await ids(`agent=${enc(m)}`)).sort(), directIds.sort());
        assert.deepEqual((await ids(`agent=${enc(m)}&related_agents=false`)).sort(), directIds.sort());
        assert.deepEqual((await ids(`agent=${enc(m)}&related_agents=true`)).sort(), Object.values(got).sort());
      });

      test('related_activities and related_agents with another filter: every role of the value, in stored order, paged without repeats or gaps', async () => {
        const course = activityId();
        const ann = { mbox: mbox() };
        const bob = { mbox: mbox() };
        const as = (role: 'object' | 'parent' | 'grouping', actor: unknown) =>
          statement({
            actor,
            ...(role === 'object' ? { object: { id: course } } : { object: { id: activityId() }, context: { contextActivities: { [role]: [{ id: course }] } } }),
          });
        // Ann's statements about the course in every role, interleaved with Bob's; then a run of
        // Ann's as the course's context only, and older ones as its object only.
        const pattern: ['object' | 'parent' | 'grouping', unknown][] = [
          ['object', ann],
          ['parent', bob],
          ['object', ann],
          ['grouping', ann],
          ['object', bob],
          ['parent', ann],
          ['object', ann],
          ['parent', ann],
          ['grouping', bob],
          ['parent', ann],
          ['grouping', ann],
          ['parent', ann],
        ];
        const got = await postApart(pattern.map(([role, actor]) => as(role, actor)));
        const annIds = got.filter((_, i) => pattern[i][1] === ann).reverse();
        const q = `activity=${enc(course)}&related_activities=true&agent=${enc(ann)}`;
        assert.deepEqual(await ids(q), annIds);
        for (const limit of [1, 2, 3]) {
          assert.deepEqual((await walk(`${q}&limit=${limit}`)).flat(), annIds, `limit=${limit}`);
          assert.deepEqual((await walk(`${q}&limit=${limit}&ascending=true`)).flat(), [...annIds].reverse(), `limit=${limit} ascending`);
        }
        const objectOnly = got.filter((_, i) => pattern[i][1] === ann && pattern[i][0] === 'object').reverse();
        assert.deepEqual(await ids(`activity=${enc(course)}&agent=${enc(ann)}`), objectOnly);
        // Ann as instructor (related) and as actor (direct) of the same activity's statements.
        const lesson = activityId();
        const roles = await postApart([
          statement({ actor: bob, object: { id: lesson }, context: { instructor: ann } }),
          statement({ actor: ann, object: { id: lesson } }),
          statement({ actor: bob, object: { id: lesson }, context: { instructor: ann } }),
          statement({ actor: bob, object: { id: lesson } }),
        ]);
        const rq = `agent=${enc(ann)}&related_agents=true&activity=${enc(lesson)}`;
        assert.deepEqual((await walk(`${rq}&limit=1`)).flat(), [roles[2], roles[1], roles[0]]);
        assert.deepEqual(await ids(`agent=${enc(ann)}&activity=${enc(lesson)}`), [roles[1]]);
      });

      test('related_agents matches the authority; agent does not', async () => {
        const verb = verbId();
        const [mine] = await post(statement({ verb: { id: verb } }), OTHER);
        await post(statement({ verb: { id: verb } }), ADMIN);
        const authority = { mbox: OTHER.agent.mbox };
        assert.deepEqual(await ids(`verb=${enc(verb)}&agent=${enc(authority)}`), []);
        assert.deepEqual(await ids(`verb=${enc(verb)}&agent=${enc(authority)}&related_agents=true`), [mine]);
      });

      test('agent as an identified Group', async () => {
        const g = { objectType: 'Group', name: 'G', mbox: mbox() };
        const [s1] = await post(statement({ actor: { ...g, member: [{ mbox: mbox() }] } }));
        assert.deepEqual(await ids(`agent=${enc({ objectType: 'Group', mbox: g.mbox })}`), [s1]);
        assert.equal((await t.fetch(`/xAPI/statements?agent=${enc({ objectType: 'Group', member: [{ mbox: g.mbox }] })}`)).status, 400, 'anonymous group');
      });

      test('mine=true: only statements whose authority is the caller', async () => {
        const verb = verbId();
        const [byOther] = await post(statement({ verb: { id: verb } }), OTHER);
        const [byAdmin] = await post(statement({ verb: { id: verb } }), ADMIN);
        assert.deepEqual(await ids(`verb=${enc(verb)}&mine=true`, OTHER), [byOther]);
        assert.deepEqual(await ids(`verb=${enc(verb)}&mine=true`, ADMIN), [byAdmin]);
        assert.deepEqual(await ids(`verb=${enc(verb)}&mine=false`, ADMIN), [byAdmin, byOther]);
        assert.equal((await t.fetch('/xAPI/statements?mine=yes')).status, 400);
      });

      test('since/until with paging and ascending', async () => {
        const verb = verbId();
        const posted = await postApart(Array.from({ length: 7 }, () => statement({ verb: { id: verb } })));
        const since = await storedOf(posted[1]);
        const until = await storedOf(posted[5]);
        const window = posted.slice(2, 6);
        assert.deepEqual((await walk(`verb=${enc(verb)}&since=${enc(since)}&until=${enc(until)}&limit=1`)).flat(), [...window].reverse());
        const pages = await walk(`verb=${enc(verb)}&since=${enc(since)}&until=${enc(until)}&limit=3&ascending=true`);
        assert.deepEqual(
          pages.map((p) => p.length),
          [3, 1],
        );
        assert.deepEqual(pages.flat(), window);
        // A timestamp in another time zone denotes the same instant.
        const shifted = new Date(Date.parse(since)).toISOString().replace('Z', '+00:00');
        assert.deepEqual(await ids(`verb=${enc(verb)}&since=${enc(shifted)}&ascending=true`), posted.slice(2));
      });

      test('the same since/until asked again answers for what was stored since (an until in the future, a since before everything)', async () => {
        const verb = verbId();
        const [first] = await post(statement({ verb: { id: verb } }));
        const since = new Date(Date.parse(await storedOf(first)) - 1).toISOString();
        const until = new Date(Date.now() + 3_600_000).toISOString();
        const query = `verb=${enc(verb)}&since=${enc(since)}&until=${enc(until)}&ascending=true`;
        assert.deepEqual(await ids(query), [first]);
        const [second] = await post(statement({ verb: { id: verb } }));
        assert.deepEqual(await ids(query), [first, second], 'the until bound was not kept while statements could still be stored before it');
        assert.deepEqual(await ids(`verb=${enc(verb)}&since=${enc(since)}&ascending=true`), [first, second]);
        // Once past, an until no longer moves: a statement stored after it stays out.
        const past = new Date(Date.parse(await storedOf(second))).toISOString();
        await sleep(5);
        const pastQuery = `verb=${enc(verb)}&since=${enc(since)}&until=${enc(past)}&ascending=true`;
        assert.deepEqual(await ids(pastQuery), [first, second]);
        const [third] = await post(statement({ verb: { id: verb } }));
        assert.deepEqual(await ids(pastQuery), [first, second]);
        assert.deepEqual(await ids(query), [first, second, third]);
      });

      test('a more link keeps every parameter, format included', async () => {
        const verb = verbId();
        await post(Array.from({ length: 3 }, () => statement({ verb: { id: verb } })));
        const body = await (await t.fetch(`/xAPI/statements?verb=${enc(verb)}&limit=2&format=ids&ascending=true`)).json();
        const more = new URL(body.more, 'http://x').searchParams;
        assert.equal(more.get('format'), 'ids');
        assert.equal(more.get('ascending'), 'true');
        assert.equal(more.get('limit'), '2');
        const next = await (await t.fetch(body.more)).json();
        assert.equal(next.statements.length, 1);
        assert.deepEqual(next.statements[0].verb, { id: verb }, 'still format=ids');
      });

      const OTHERS = {
        agent: enc({ mbox: 'mailto:a@example.com' }),
        verb: enc('http://example.com/v'),
        activity: enc('http://example.com/a'),
        registration: randomUUID(),
        related_activities: 'true',
        related_agents: 'false',
        since: enc('2020-01-01T00:00:00Z'),
        until: enc('2030-01-01T00:00:00Z'),
        limit: '1',
        ascending: 'true',
        mine: 'true',
      };
      for (const single of ['statementId', 'voidedStatementId']) {
        test(`${single} with any parameter but format/attachments is a 400`, async () => {
          const id = randomUUID();
          for (const [k, v] of Object.entries(OTHERS)) {
            const res = await t.fetch(`/xAPI/statements?${single}=${id}&${k}=${v}`);
            assert.equal(res.status, 400, k);
            assert.ok(
              (await res.json()).detail.some((d: { loc: string[] }) => d.loc[1] === k),
              k,
            );
          }
          const res = await t.fetch(`/xAPI/statements?${single}=${id}&format=ids&attachments=false`);
          assert.equal(res.status, 404, 'format and attachments are allowed');
        });
      }

      test('statementId and voidedStatementId together is a 400', async () => {
        const res = await t.fetch(`/xAPI/statements?statementId=${randomUUID()}&voidedStatementId=${randomUUID()}`);
        assert.equal(res.status, 400);
      });

      test('parameter names are case-sensitive; a repeated parameter is a 400', async () => {
        const [id] = await post(statement());
        for (const qs of [`StatementId=${id}`, `statementID=${id}`, 'Verb=http://example.com/v', 'ASCENDING=true', 'Format=ids']) {
          const res = await t.fetch(`/xAPI/statements?${qs}`);
          assert.equal(res.status, 400, qs);
          assert.match(JSON.stringify(await res.json()), /case-sensitive/, qs);
        }
        assert.equal((await t.fetch('/xAPI/statements?limit=1&limit=2')).status, 400);
        assert.equal((await t.fetch('/xAPI/statements?format=full')).status, 400);
        assert.equal((await t.fetch('/xAPI/statements?attachments=yes')).status, 400);
      });
    });

    describe('formats (§2.1.3 format, §2.1.3.s4)', () => {
      const act = activityId();
      const s1 = {
        actor: { objectType: 'Agent', name: 'Ben', mbox: 'mailto:ben@example.com' },
        verb: { id: 'http://adlnet.gov/expapi/verbs/answered', display: { 'en-US': 'answered', fr: 'a répondu', de: 'antwortete' } },
        object: {
          objectType: 'Activity',
          id: act,
          definition: {
            name: { 'en-US': 'Question', fr: 'Question FR' },
            description: { 'en-US': 'Pick one' },
            interactionType: 'choice',
            correctResponsesPattern: ['a'],
            choices: [{ id: 'a', description: { 'en-US': 'Apple', fr: 'Pomme' } }],
          },
        },
        context: {
          instructor: { name: 'Ms Smith', mbox: 'mailto:smith@example.com' },
          contextActivities: { parent: [{ id: 'http://example.com/quiz', definition: { name: { 'en-GB': 'Quiz', fr: 'Quiz FR' } } }] },
        },
      };
      let id1: string;
      let id2: string;
      before(async () => {
        [id1] = await post(s1);
        // A later statement about the same activity, without a definition, and adding a description.
        [id2] = await post(statement({ object: { id: act, definition: { description: { fr: 'Choisissez' } } } }));
      });

      const one = async (id: string, qs: string, headers: Record<string, string> = {}) => {
        const res = await t.fetch(`/xAPI/statements?statementId=${id}&${qs}`, { headers });
        assert.equal(res.status, 200);
        return res.json();
      };

      test('exact (the default): as received plus the LRS-set properties', async () => {
        const got = await one(id1, 'format=exact');
        assert.deepEqual(got.object, s1.object);
        assert.deepEqual(got.verb, s1.verb);
        assert.deepEqual(await one(id1, ''), got);
      });

      test('ids: only identifying information', async () => {
        const got = await one(id1, 'format=ids');
        assert.deepEqual(got.actor, { objectType: 'Agent', mbox: 'mailto:ben@example.com' });
        assert.deepEqual(got.verb, { id: 'http://adlnet.gov/expapi/verbs/answered' });
        assert.deepEqual(got.object, { id: act });
        assert.deepEqual(got.context.instructor, { mbox: 'mailto:smith@example.com' });
        assert.deepEqual(got.context.contextActivities.parent, [{ id: 'http://example.com/quiz' }]);
        assert.deepEqual(got.authority, { objectType: 'Agent', mbox: 'mailto:admin@example.com' });
        assert.equal(got.id, id1);
        assert.ok(got.stored && got.timestamp && got.version);
      });

      test('canonical: the LRS’s definition, one language per map chosen by Accept-Language', async () => {
        const fr = await one(id2, 'format=canonical', { 'accept-language': 'fr-CA, fr;q=0.9, en;q=0.5' });
        assert.deepEqual(fr.object, {
          id: act,
          definition: {
            name: { fr: 'Question FR' },
            description: { fr: 'Choisissez' },
            interactionType: 'choice',
            correctResponsesPattern: ['a'],
            choices: [{ id: 'a', description: { fr: 'Pomme' } }],
          },
        });
        assert.deepEqual(fr.actor, statement().actor, 'agents as in exact');
        const en = await one(id1, 'format=canonical', { 'accept-language': 'en-GB' });
        assert.deepEqual(en.object.definition.name, { 'en-US': 'Question' }, 'same primary language');
        assert.deepEqual(en.object.definition.description, { 'en-US': 'Pick one' });
        assert.deepEqual(en.verb.display, { 'en-US': 'answered' });
        assert.deepEqual(en.context.contextActivities.parent[0].definition.name, { 'en-GB': 'Quiz' });
        assert.deepEqual(en.actor, s1.actor);
        assert.deepEqual(en.context.instructor, s1.context.instructor);
        const de = await one(id1, 'format=canonical', { 'accept-language': 'de' });
        assert.deepEqual(de.verb.display, { de: 'antwortete' });
        assert.equal(Object.keys(de.object.definition.name).length, 1, 'one language even when the preferred one is missing');
      });

      test('formats apply to queries and to voidedStatementId', async () => {
        const q = await (await t.fetch(`/xAPI/statements?activity=${enc(act)}&format=canonical`, { headers: { 'accept-language': 'fr' } })).json();
        assert.deepEqual(
          q.statements.map((s: { id: string }) => s.id),
          [id2, id1],
        );
        for (const s of q.statements) assert.deepEqual(s.object.definition.name, { fr: 'Question FR' });
        const ids1 = await (await t.fetch(`/xAPI/statements?activity=${enc(act)}&format=ids`)).json();
        for (const s of ids1.statements) assert.deepEqual(s.object, { id: act });
        await post(statement({ verb: { id: VOIDED }, object: ref(id1) }));
        const voided = await (await t.fetch(`/xAPI/statements?voidedStatementId=${id1}&format=ids`)).json();
        assert.deepEqual(voided.verb, { id: 'http://adlnet.gov/expapi/verbs/answered' });
      });
    });

    describe('HEAD, Last-Modified, Consistent-Through', () => {
      test('HEAD answers like GET without a body: single statements, queries, errors', async () => {
        const [id] = await post(statement());
        for (const qs of [`statementId=${id}`, `statementId=${id}&format=ids`, 'limit=2', `statementId=${randomUUID()}`, 'limit=nope']) {
          const get = await t.fetch(`/xAPI/statements?${qs}`);
          const head = await t.fetch(`/xAPI/statements?${qs}`, { method: 'HEAD' });
          assert.equal(head.status, get.status, qs);
          assert.equal(await head.text(), '', qs);
          for (const h of ['content-type', 'last-modified', 'x-experience-api-version']) assert.equal(head.headers.get(h), get.headers.get(h), `${qs} ${h}`);
          assert.ok(head.headers.get('x-experience-api-consistent-through'), qs);
          const length = head.headers.get('content-length');
          if (length !== null) assert.equal(Number(length), Buffer.byteLength(await get.text()), qs);
        }
      });

      test('Last-Modified of a single statement is its stored time', async () => {
        const [id] = await post(statement());
        const res = await t.fetch(`/xAPI/statements?statementId=${id}`);
        const s = await res.json();
        assert.equal(Date.parse(res.headers.get('last-modified')!), Math.floor(Date.parse(s.stored) / 1000) * 1000);
      });

      test('X-Experience-API-Consistent-Through on every statements response, errors included', async () => {
        const id = randomUUID();
        const responses: [string, Response][] = [
          ['PUT 204', await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement()))],
          ['PUT 409', await t.fetch(`/xAPI/statements?statementId=${id}`, jsonInit('PUT', statement({ result: { success: true } })))],
          ['POST 200', await t.fetch('/xAPI/statements', jsonInit('POST', statement()))],
          ['POST 400', await t.fetch('/xAPI/statements', jsonInit('POST', { actor: {} }))],
          ['GET 200', await t.fetch(`/xAPI/statements?statementId=${id}`)],
          ['GET 404', await t.fetch(`/xAPI/statements?statementId=${randomUUID()}`)],
          ['GET query', await t.fetch('/xAPI/statements?limit=1')],
          ['GET 400', await t.fetch('/xAPI/statements?nope=1')],
          ['HEAD', await t.fetch('/xAPI/statements', { method: 'HEAD' })],
          ['DELETE 405', await t.fetch('/xAPI/statements', { method: 'DELETE' })],
          ['401', await t.fetch('/xAPI/statements', { user: null })],
          ['no version 400', await t.fetch('/xAPI/statements', { version: null })],
          ['alternate syntax 400', await t.fetch('/xAPI/statements?method=GET&limit=1', { method: 'POST' })],
          ['trailing slash', await t.fetch('/xAPI/statements/?limit=1')],
        ];
        for (const [name, res] of responses) {
          const v = res.headers.get('x-experience-api-consistent-through');
          assert.ok(v && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(v), `${name}: ${v}`);
          assert.ok(!Number.isNaN(Date.parse(v)), name);
        }
        assert.deepEqual(
          responses.map(([, r]) => r.status),
          [204, 409, 200, 400, 200, 404, 200, 400, 200, 405, 401, 400, 400, 200],
        );
      });
    });
  });
}
