import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { activityIdsOf, CANONICAL_KEYS_PER_STEP, canonicalStatement as canonicalSteps, idsStatement } from '../../src/xapi/formats.ts';
import { ACCEPT_LANGUAGE_MAX_RANGES, type LanguageRange, languagePreferences, parseAcceptLanguage, pickLanguage } from '../../src/xapi/languages.ts';
import type { ActivityDefinition, LanguageMap, Statement } from '../../src/xapi/types.ts';

const MAP = { 'en-US': 'color', 'en-GB': 'colour', fr: 'couleur', 'de-CH': 'Farbe', und: '?' };
const prefs = (header: string | undefined) => languagePreferences(parseAcceptLanguage(header));
const pickFor = (map: LanguageMap, header: string | undefined): LanguageMap => pickLanguage(map, prefs(header));
const pick = (header: string | undefined, map: Record<string, string> = MAP): string[] => Object.keys(pickFor(map, header));
const FULL_SMALL: Statement = {
  actor: { objectType: 'Agent', mbox: 'mailto:ben@example.com' },
  verb: { id: 'http://example.com/did', display: { en: 'did', fr: 'a fait' } },
  object: { objectType: 'Activity', id: 'http://example.com/thing' },
};
/** The canonical rewrite run through all its steps. */
function canonicalStatement(s: Statement, defs: ReadonlyMap<string, ActivityDefinition>, header: string): Statement {
  const steps = canonicalSteps(s, defs, prefs(header));
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

describe('parseAcceptLanguage', () => {
  it('reads ranges and q-values, lower-cased, in header order', () => {
    assert.deepEqual(parseAcceptLanguage('da, en-GB;q=0.8, en;q=0.7, *;q=0.1'), [
      { range: 'da', q: 1 },
      { range: 'en-gb', q: 0.8 },
      { range: 'en', q: 0.7 },
      { range: '*', q: 0.1 },
    ]);
  });
  it('skips malformed entries instead of failing', () => {
    assert.deepEqual(parseAcceptLanguage('fr;q=2, en_US, , de;q=abc, it ; Q=0.5, x-klingon'), [
      { range: 'it', q: 0.5 },
      { range: 'x-klingon', q: 1 },
    ]);
    assert.deepEqual(parseAcceptLanguage(undefined), []);
    assert.deepEqual(parseAcceptLanguage(''), []);
  });
});

describe('the cost of choosing languages (counted, never timed)', () => {
  // 3,876 ranges naming languages none of the maps has (xa-a, xa-b, …).
  const many = Array.from({ length: 3876 }, (_, i) => `x${String.fromCharCode(97 + (i % 26))}-${String.fromCharCode(97 + (Math.floor(i / 26) % 26))}`).join(',');
  it(`a header's first ${ACCEPT_LANGUAGE_MAX_RANGES} well-formed ranges are kept, the rest ignored`, () => {
    assert.equal(parseAcceptLanguage(`${many},fr`).length, ACCEPT_LANGUAGE_MAX_RANGES);
    assert.deepEqual(pick(`${many},fr`, { 'en-US': 'color', fr: 'couleur' }), ['en-US']);
  });
  it('the ranges are read once per request; each map reads its own keys once, whatever the header holds', () => {
    let rangeReads = 0;
    const ranges = new Proxy(parseAcceptLanguage(`${many},fr`), {
      get(target, prop, receiver) {
        if (typeof prop === 'string' && /^\d+$/.test(prop)) rangeReads++;
        return Reflect.get(target, prop, receiver) as LanguageRange;
      },
    });
    const languages = languagePreferences(ranges);
    assert.equal(rangeReads, ACCEPT_LANGUAGE_MAX_RANGES);
    let mapReads = 0;
    const map = new Proxy({ 'en-US': 'color', 'en-GB': 'colour', fr: 'couleur' } as LanguageMap, {
      get: (target, prop, receiver) => (mapReads++, Reflect.get(target, prop, receiver) as string),
      ownKeys: (target) => (mapReads++, Reflect.ownKeys(target)),
    });
    for (let i = 0; i < 1000; i++) assert.deepEqual(pickLanguage(map, languages), { 'en-US': 'color' });
    assert.equal(rangeReads, ACCEPT_LANGUAGE_MAX_RANGES, 'no map reads the ranges again');
    assert.equal(mapReads, 2000, 'per map: its keys listed once, the chosen entry read once');
  });
  it(`a statement's rewrite yields after every ${CANONICAL_KEYS_PER_STEP} keys`, () => {
    const activities = Array.from({ length: 5000 }, (_, i) => ({ id: `http://example.com/a${i}`, definition: { name: { en: 'a', fr: 'b' }, description: { en: 'c', fr: 'd' } } }));
    const s = { ...structuredClone(FULL_SMALL), context: { contextActivities: { other: activities } } } as Statement;
    const steps = canonicalSteps(s, new Map(), prefs('fr'));
    let yields = 0;
    let r = steps.next();
    for (; !r.done; r = steps.next()) yields++;
    // 20,000 activity keys and the verb's 2.
    assert.equal(yields, Math.floor(20_002 / CANONICAL_KEYS_PER_STEP));
    assert.deepEqual((r.value.context!.contextActivities!.other as { definition: unknown }[])[4999].definition, { name: { fr: 'b' }, description: { fr: 'd' } });
  });
});

describe('pickLanguage (one language per map, RFC 2616 Accept-Language)', () => {
  it('an exact match wins', () => assert.deepEqual(pick('fr'), ['fr']));
  it('matching is case-insensitive and keeps the map key as written', () => assert.deepEqual(pick('EN-gb'), ['en-GB']));
  it('a range matches longer tags at a hyphen (de → de-CH)', () => assert.deepEqual(pick('de'), ['de-CH']));
  it('highest q wins, whatever the order in the header', () => assert.deepEqual(pick('fr;q=0.4, en-GB;q=0.9'), ['en-GB']));
  it('a key takes the q of the longest matching range', () => assert.deepEqual(pick('en;q=0.9, en-US;q=0.1, fr;q=0.5'), ['en-GB']));
  it('equal q: the range listed first wins', () => {
    assert.deepEqual(pick('fr, en-GB'), ['fr']);
    assert.deepEqual(pick('en-GB, fr'), ['en-GB']);
  });
  it('same primary language when nothing matches exactly (en-AU → an en-* entry)', () => {
    assert.deepEqual(pick('en-AU', { fr: 'couleur', 'en-GB': 'colour' }), ['en-GB']);
    assert.deepEqual(pick('en-AU', { fr: 'couleur', en: 'colour' }), ['en']);
  });
  it('an exact match, even at lower q, comes before a primary-language one', () => assert.deepEqual(pick('en-AU, fr;q=0.2', { 'en-GB': 'colour', fr: 'couleur' }), ['fr']));
  it('nothing acceptable: und, else the first entry', () => {
    assert.deepEqual(pick('ja'), ['und']);
    assert.deepEqual(pick('ja', { fr: 'couleur', 'en-GB': 'colour' }), ['fr']);
    assert.deepEqual(pick(undefined, { fr: 'couleur', 'en-GB': 'colour' }), ['fr']);
    assert.deepEqual(pick('*', { fr: 'couleur', und: '?' }), ['und']);
  });
  it('q=0 excludes a language unless nothing else is left', () => {
    assert.deepEqual(pick('fr;q=0', { fr: 'couleur', 'en-GB': 'colour' }), ['en-GB']);
    assert.deepEqual(pick('en-GB, *;q=0', { fr: 'couleur', 'en-US': 'color' }), ['en-US'], 'same primary language');
    assert.deepEqual(pick('ja, *;q=0', { fr: 'couleur', 'en-US': 'color' }), ['fr'], 'one language is always returned');
  });
  it('maps of zero or one entry are returned as they are', () => {
    assert.deepEqual(pickFor({}, 'fr'), {});
    assert.deepEqual(pickFor({ de: 'Farbe' }, 'fr'), { de: 'Farbe' });
  });
  it('returns the chosen entry with its text', () => assert.deepEqual(pickFor(MAP, 'fr'), { fr: 'couleur' }));
});

const FULL: Statement = {
  id: '2a41c918-b88b-4220-8a71-4a8b1d3d6f11',
  actor: { objectType: 'Agent', name: 'Ben', mbox: 'mailto:ben@example.com' },
  verb: { id: 'http://adlnet.gov/expapi/verbs/answered', display: { 'en-US': 'answered', fr: 'a répondu' } },
  object: {
    objectType: 'Activity',
    id: 'http://example.com/q1',
    definition: {
      name: { 'en-US': 'Question 1', fr: 'Question un' },
      description: { 'en-US': 'Pick one', fr: 'Choisissez' },
      interactionType: 'choice',
      correctResponsesPattern: ['a'],
      choices: [
        { id: 'a', description: { 'en-US': 'Apple', fr: 'Pomme' } },
        { id: 'b', description: { 'en-US': 'Pear', fr: 'Poire' } },
      ],
    },
  },
  result: { response: 'a', success: true },
  context: {
    registration: 'ec531277-b57b-4c15-8d91-d292c5b2b8f7',
    instructor: { name: 'Ms Smith', account: { homePage: 'http://example.com', name: 'smith' } },
    team: {
      objectType: 'Group',
      name: 'Team',
      member: [
        { mbox: 'mailto:a@example.com', name: 'A' },
        { openid: 'http://example.com/b', name: 'B' },
      ],
    },
    contextActivities: {
      parent: [{ id: 'http://example.com/quiz', definition: { name: { 'en-US': 'Quiz', fr: 'Quiz FR' } } }],
      category: [{ objectType: 'Activity', id: 'http://example.com/cat' }],
    },
    extensions: { 'http://example.com/ext': { name: 'not a language map' } },
  },
  timestamp: '2024-05-01T10:00:00.000Z',
  stored: '2024-05-01T10:00:01.000Z',
  authority: {
    objectType: 'Group',
    member: [
      { name: 'App', account: { homePage: 'http://example.com/oauth', name: 'app' } },
      { mbox: 'mailto:boss@example.com', name: 'Boss' },
    ],
  },
  version: '1.0.0',
  attachments: [
    {
      usageType: 'http://example.com/usage',
      display: { 'en-US': 'Certificate', fr: 'Certificat' },
      description: { 'en-US': 'The certificate', fr: 'Le certificat' },
      contentType: 'text/plain',
      length: 5,
      sha2: 'a'.repeat(64),
    },
  ],
};

const SUB: Statement = {
  id: '5d8b7c41-3c2e-4d21-9a8e-6d0a0c2b1e22',
  actor: { objectType: 'Group', name: 'Anonymous', member: [{ name: 'One', mbox: 'mailto:one@example.com' }] },
  verb: { id: 'http://example.com/planned', display: { 'en-US': 'planned' } },
  object: {
    objectType: 'SubStatement',
    actor: { objectType: 'Group', name: 'Identified', mbox: 'mailto:group@example.com', member: [{ mbox: 'mailto:x@example.com' }] },
    verb: { id: 'http://example.com/will-visit', display: { 'en-US': 'will visit', fr: 'visitera' } },
    object: { id: 'http://example.com/museum', definition: { name: { 'en-US': 'Museum', fr: 'Musée' } } },
    context: { contextActivities: { other: [{ id: 'http://example.com/trip' }] } },
  },
};

describe('idsStatement (format=ids)', () => {
  it('keeps only identifying information of agents, groups, verbs and activities', () => {
    const out = idsStatement(structuredClone(FULL));
    assert.deepEqual(out.actor, { objectType: 'Agent', mbox: 'mailto:ben@example.com' });
    assert.deepEqual(out.verb, { id: 'http://adlnet.gov/expapi/verbs/answered' });
    assert.deepEqual(out.object, { id: 'http://example.com/q1' });
    assert.deepEqual(out.context?.instructor, { account: { homePage: 'http://example.com', name: 'smith' } });
    assert.deepEqual(
      out.context?.team,
      { objectType: 'Group', member: [{ mbox: 'mailto:a@example.com' }, { openid: 'http://example.com/b' }] },
      'anonymous group: its members’ IFIs',
    );
    assert.deepEqual(out.context?.contextActivities, { parent: [{ id: 'http://example.com/quiz' }], category: [{ id: 'http://example.com/cat' }] });
    assert.deepEqual(out.authority, {
      objectType: 'Group',
      member: [{ account: { homePage: 'http://example.com/oauth', name: 'app' } }, { mbox: 'mailto:boss@example.com' }],
    });
  });
  it('leaves everything else as stored', () => {
    const out = idsStatement(structuredClone(FULL));
    for (const k of ['id', 'result', 'timestamp', 'stored', 'version', 'attachments'] as const) assert.deepEqual(out[k], FULL[k], k);
    assert.equal(out.context?.registration, FULL.context?.registration);
    assert.deepEqual(out.context?.extensions, FULL.context?.extensions);
    assert.deepEqual(Object.keys(out), Object.keys(FULL), 'property order kept');
  });
  it('reduces inside a SubStatement; an identified group loses its members', () => {
    const out = idsStatement(structuredClone(SUB));
    assert.deepEqual(out.actor, { objectType: 'Group', member: [{ mbox: 'mailto:one@example.com' }] });
    assert.deepEqual(out.object, {
      objectType: 'SubStatement',
      actor: { objectType: 'Group', mbox: 'mailto:group@example.com' },
      verb: { id: 'http://example.com/will-visit' },
      object: { id: 'http://example.com/museum' },
      context: { contextActivities: { other: [{ id: 'http://example.com/trip' }] } },
    });
  });
  it('does not modify its input', () => {
    const input = structuredClone(FULL);
    idsStatement(input);
    assert.deepEqual(input, FULL);
  });
});

describe('activityIdsOf', () => {
  it('lists every activity once: object, context activities, SubStatement ones', () => {
    assert.deepEqual(activityIdsOf([FULL]), ['http://example.com/q1', 'http://example.com/quiz', 'http://example.com/cat']);
    assert.deepEqual(activityIdsOf([SUB]), ['http://example.com/museum', 'http://example.com/trip']);
  });

  it('across statements each once, in order of appearance, the first `max` only', () => {
    assert.deepEqual(activityIdsOf([FULL, SUB, FULL]), [
      'http://example.com/q1',
      'http://example.com/quiz',
      'http://example.com/cat',
      'http://example.com/museum',
      'http://example.com/trip',
    ]);
    assert.deepEqual(activityIdsOf([FULL, SUB], 4), ['http://example.com/q1', 'http://example.com/quiz', 'http://example.com/cat', 'http://example.com/museum']);
  });
});

describe('canonicalStatement (format=canonical)', () => {
  const canonical: ActivityDefinition = {
    name: { 'en-US': 'Question One (canonical)', fr: 'Question un (canonique)', de: 'Frage eins' },
    description: { 'en-US': 'Pick one', fr: 'Choisissez' },
    interactionType: 'choice',
    correctResponsesPattern: ['a'],
    choices: [{ id: 'a', description: { 'en-US': 'Apple', fr: 'Pomme' } }],
  };
  const defs = new Map([['http://example.com/q1', canonical]]);

  it('uses the canonical definition and reduces every language map to the preferred language', () => {
    const out = canonicalStatement(structuredClone(FULL), defs, 'fr, en;q=0.5');
    assert.deepEqual(out.object, {
      objectType: 'Activity',
      id: 'http://example.com/q1',
      definition: {
        name: { fr: 'Question un (canonique)' },
        description: { fr: 'Choisissez' },
        interactionType: 'choice',
        correctResponsesPattern: ['a'],
        choices: [{ id: 'a', description: { fr: 'Pomme' } }],
      },
    });
    assert.deepEqual(out.verb, { id: 'http://adlnet.gov/expapi/verbs/answered', display: { fr: 'a répondu' } });
    assert.deepEqual(out.attachments?.[0].display, { fr: 'Certificat' });
    assert.deepEqual(out.attachments?.[0].description, { fr: 'Le certificat' });
    assert.deepEqual(out.context?.contextActivities?.parent, [{ id: 'http://example.com/quiz', definition: { name: { fr: 'Quiz FR' } } }], 'no canonical one: its own, filtered');
    assert.deepEqual(out.context?.contextActivities?.category, [{ objectType: 'Activity', id: 'http://example.com/cat' }]);
  });
  it('keeps agents and groups exactly as stored, and extensions untouched', () => {
    const out = canonicalStatement(structuredClone(FULL), defs, 'fr');
    assert.deepEqual(out.actor, FULL.actor);
    assert.deepEqual(out.authority, FULL.authority);
    assert.deepEqual(out.context?.team, FULL.context?.team);
    assert.deepEqual(out.context?.extensions, FULL.context?.extensions);
  });
  it('each map on its own: a language missing from one map falls back there only', () => {
    const out = canonicalStatement(structuredClone(FULL), defs, 'de, fr;q=0.5');
    const d = (out.object as { definition: ActivityDefinition }).definition;
    assert.deepEqual(d.name, { de: 'Frage eins' });
    assert.deepEqual(d.description, { fr: 'Choisissez' });
  });
  it('reaches into SubStatements', () => {
    const out = canonicalStatement(structuredClone(SUB), new Map(), 'fr');
    const sub = out.object as { verb: unknown; object: unknown };
    assert.deepEqual(sub.verb, { id: 'http://example.com/will-visit', display: { fr: 'visitera' } });
    assert.deepEqual(sub.object, { id: 'http://example.com/museum', definition: { name: { fr: 'Musée' } } });
  });
});
