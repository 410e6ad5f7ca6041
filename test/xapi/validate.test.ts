/**
 * Table-driven tests of the xAPI 1.0.3 statement validator (xAPI-Data.md). Each rule has at least
 * one accepted and one rejected case; rejected cases assert the exact list of issue locations
 * (and the type code of each issue).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_ISSUES, MORE_ISSUES, ValidationFailed, type ValidationIssue } from '../../src/errors.ts';
import { toUtc } from '../../src/xapi/statement.ts';
import {
  isDuration,
  isIri,
  isLanguageTag,
  isTimestamp,
  isUuid,
  parseTimestamp,
  timestampOutOfRange,
  validateAgentParam,
  validateStatement,
  validateStatements,
} from '../../src/xapi/validate.ts';

// biome-ignore lint/suspicious/noExplicitAny: the tests reach into statements of any shape
type Any = any;
type Loc = (string | number)[];
type Expected = [Loc, string];

interface Case {
  name: string;
  /** Mutates a fresh base statement (or returns a replacement statement). */
  build: (s: Any) => unknown;
  /** Expected issues, in order, as [loc, type]; empty: the statement is accepted. */
  issues: Expected[];
}

const UUID = 'fd41c918-b88b-4b20-a0a5-a4c32391aaa0';
const SHA2 = '495395e777cd98da653df9615d09c0fd6bb2f8d4788394cd53c56a3bfdcd848a';

const base = (): Any => ({
  actor: { objectType: 'Agent', name: 'Example Learner', mbox: 'mailto:example.learner@adlnet.gov' },
  verb: { id: 'http://adlnet.gov/expapi/verbs/attempted', display: { 'en-US': 'attempted' } },
  object: { objectType: 'Activity', id: 'http://example.adlnet.gov/xapi/example/simpleCBT' },
});

const attachment = (): Any => ({
  usageType: 'http://example.com/attachment-usage/test',
  display: { 'en-US': 'A test attachment' },
  description: { 'en-US': 'A test attachment (description)' },
  contentType: 'text/plain; charset=ascii',
  length: 27,
  sha2: SHA2,
  fileUrl: 'http://over.there.com/file.txt',
});

const oauthAuthority = (): Any => ({
  objectType: 'Group',
  member: [{ account: { homePage: 'http://example.com/xAPI/OAuth/Token', name: 'oauth_consumer_x75db' } }, { mbox: 'mailto:bob@example.com' }],
});

const component = (id: string): Any => ({ id, description: { 'en-US': id } });

/** Appendix C example definitions, one per interactionType. */
const INTERACTIONS: Record<string, Any> = {
  'true-false': { interactionType: 'true-false', correctResponsesPattern: ['true'] },
  choice: {
    interactionType: 'choice',
    correctResponsesPattern: ['golf[,]tetris'],
    choices: ['golf', 'facebook', 'tetris', 'scrabble'].map(component),
  },
  'fill-in': { interactionType: 'fill-in', correctResponsesPattern: ["Bob's your uncle"] },
  'long-fill-in': {
    interactionType: 'long-fill-in',
    correctResponsesPattern: ['{case_matters=false}{lang=en}To store and provide access to learning experiences.'],
  },
  likert: {
    interactionType: 'likert',
    correctResponsesPattern: ['likert_3'],
    scale: ['likert_0', 'likert_1', 'likert_2', 'likert_3'].map(component),
  },
  matching: {
    interactionType: 'matching',
    correctResponsesPattern: ['ben[.]3[,]chris[.]2[,]troy[.]4[,]freddie[.]1'],
    source: ['ben', 'chris', 'troy', 'freddie'].map(component),
    target: ['1', '2', '3', '4'].map(component),
  },
  performance: {
    interactionType: 'performance',
    correctResponsesPattern: ['pong[.]1:[,]dg[.]:10[,]lunch[.]'],
    steps: ['pong', 'dg', 'lunch'].map(component),
  },
  sequencing: {
    interactionType: 'sequencing',
    correctResponsesPattern: ['tim[,]mike[,]ells[,]ben'],
    choices: ['tim', 'ben', 'ells', 'mike'].map(component),
  },
  numeric: { interactionType: 'numeric', correctResponsesPattern: ['4[:]'] },
  other: { interactionType: 'other', correctResponsesPattern: ['(35.937432,-86.868896)'] },
};

const withDefinition = (def: Any) => (s: Any) => {
  s.object.definition = {
    description: { 'en-US': 'An interaction' },
    type: 'http://adlnet.gov/expapi/activities/cmi.interaction',
    ...structuredClone(def),
  };
};

/** The long Appendix A example, verbatim. */
const APPENDIX_A_LONG = {
  id: '6690e6c9-3ef0-4ed3-8b37-7f3964730bee',
  actor: {
    name: 'Team PB',
    mbox: 'mailto:teampb@example.com',
    member: [
      { name: 'Andrew Downes', account: { homePage: 'http://www.example.com', name: '13936749' }, objectType: 'Agent' },
      { name: 'Toby Nichols', openid: 'http://toby.openid.example.org/', objectType: 'Agent' },
      { name: 'Ena Hills', mbox_sha1sum: 'ebd31e95054c018b10727ccffd2ef2ec3a016ee9', objectType: 'Agent' },
    ],
    objectType: 'Group',
  },
  verb: { id: 'http://adlnet.gov/expapi/verbs/attended', display: { 'en-GB': 'attended', 'en-US': 'attended' } },
  result: {
    extensions: {
      'http://example.com/profiles/meetings/resultextensions/minuteslocation': 'X:\\meetings\\minutes\\examplemeeting.one',
    },
    success: true,
    completion: true,
    response: 'We agreed on some example actions.',
    duration: 'PT1H0M0S',
  },
  context: {
    registration: 'ec531277-b57b-4c15-8d91-d292c5b2b8f7',
    contextActivities: {
      parent: [{ id: 'http://www.example.com/meetings/series/267', objectType: 'Activity' }],
      category: [
        {
          id: 'http://www.example.com/meetings/categories/teammeeting',
          objectType: 'Activity',
          definition: {
            name: { en: 'team meeting' },
            description: { en: 'A category of meeting used for regular team meetings.' },
            type: 'http://example.com/expapi/activities/meetingcategory',
          },
        },
      ],
      other: [
        { id: 'http://www.example.com/meetings/occurances/34257', objectType: 'Activity' },
        { id: 'http://www.example.com/meetings/occurances/3425567', objectType: 'Activity' },
      ],
    },
    instructor: {
      name: 'Andrew Downes',
      account: { homePage: 'http://www.example.com', name: '13936749' },
      objectType: 'Agent',
    },
    team: { name: 'Team PB', mbox: 'mailto:teampb@example.com', objectType: 'Group' },
    platform: 'Example virtual meeting software',
    language: 'tlh',
    statement: { objectType: 'StatementRef', id: '6690e6c9-3ef0-4ed3-8b37-7f3964730bee' },
  },
  timestamp: '2013-05-18T05:32:34.804+00:00',
  stored: '2013-05-18T05:32:34.804+00:00',
  authority: { account: { homePage: 'http://cloud.scorm.com/', name: 'anonymous' }, objectType: 'Agent' },
  version: '1.0.0',
  object: {
    id: 'http://www.example.com/meetings/occurances/34534',
    definition: {
      extensions: {
        'http://example.com/profiles/meetings/activitydefinitionextensions/room': {
          name: 'Kilby',
          id: 'http://example.com/rooms/342',
        },
      },
      name: { 'en-GB': 'example meeting', 'en-US': 'example meeting' },
      description: {
        'en-GB': 'An example meeting that happened on a specific occasion with certain people present.',
        'en-US': 'An example meeting that happened on a specific occasion with certain people present.',
      },
      type: 'http://adlnet.gov/expapi/activities/meeting',
      moreInfo: 'http://virtualmeeting.example.com/345256',
    },
    objectType: 'Activity',
  },
};

const ok = (name: string, build: (s: Any) => unknown): Case => ({ name, build, issues: [] });
const bad = (name: string, build: (s: Any) => unknown, ...issues: Expected[]): Case => ({ name, build, issues });
const MISSING = 'value_error.missing';
const EXTRA = 'value_error.extra';
const NULL = 'type_error.null';

const CASES: Record<string, Case[]> = {
  'statement (2.2, 2.4)': [
    ok('the simplest statement (2.4.s2 example)', () => ({
      id: '12345678-1234-5678-1234-567812345678',
      actor: { mbox: 'mailto:xapi@adlnet.gov' },
      verb: { id: 'http://adlnet.gov/expapi/verbs/created', display: { 'en-US': 'created' } },
      object: { id: 'http://example.adlnet.gov/xapi/example/activity' },
    })),
    ok('the long Appendix A example', () => structuredClone(APPENDIX_A_LONG)),
    ok('the Appendix A example with a seconds-only duration', (s) => {
      s.timestamp = '2015-12-18T12:17:00+00:00';
      s.result = { score: { scaled: 0.95 }, success: true, completion: true, duration: 'PT1234S' };
    }),
    ok('properties in any order (2.2.s2.b4)', (s) => ({ object: s.object, verb: s.verb, actor: s.actor })),
    bad('MUST use "actor" (2.2.s2.b3)', (s) => void delete s.actor, [[0, 'actor'], MISSING]),
    bad('MUST use "verb" (2.2.s2.b3)', (s) => void delete s.verb, [[0, 'verb'], MISSING]),
    bad('MUST use "object" (2.2.s2.b3)', (s) => void delete s.object, [[0, 'object'], MISSING]),
    bad(
      'key case must match: "Actor" (2.2.s4.b1.b5)',
      (s) => {
        s.Actor = s.actor;
        delete s.actor;
      },
      [[0, 'Actor'], EXTRA],
      [[0, 'actor'], MISSING],
    ),
    bad('key case must match: "iD"', (s) => void (s.iD = UUID), [[0, 'iD'], EXTRA]),
    bad('additional properties are rejected (2.2.s4.b8)', (s) => void (s.foo = 'bar'), [[0, 'foo'], EXTRA]),
    bad('a statement has no objectType', (s) => void (s.objectType = 'Statement'), [[0, 'objectType'], EXTRA]),
    bad('null values are rejected (2.2.s4.b1.b1)', (s) => void (s.result = null), [[0, 'result'], NULL]),
    bad('null actor name', (s) => void (s.actor.name = null), [[0, 'actor', 'name'], NULL]),
    bad('null inside a language map', (s) => void (s.verb.display['en-US'] = null), [[0, 'verb', 'display', 'en-US'], NULL]),
    bad('null moreInfo', (s) => void (s.object.definition = { moreInfo: null }), [[0, 'object', 'definition', 'moreInfo'], NULL]),
    bad('null registration', (s) => void (s.context = { registration: null }), [[0, 'context', 'registration'], NULL]),
    bad('a statement in a batch must be an object', () => ['statement'], [[0], 'type_error.object']),
    bad(
      'every problem is reported, not just the first',
      (s) => {
        s.id = 'nope';
        s.verb.id = 'nope';
        s.timestamp = 'nope';
      },
      [[0, 'verb', 'id'], 'value_error.iri'],
      [[0, 'id'], 'value_error.uuid'],
      [[0, 'timestamp'], 'value_error.datetime'],
    ),
  ],
  'id (2.4.1, 4.4)': [
    ok('lowercase UUID', (s) => void (s.id = UUID)),
    ok('uppercase UUID', (s) => void (s.id = UUID.toUpperCase())),
    ok('UUID of any variant (spec example 12345678-1234-5678-1234-567812345678)', (s) => void (s.id = '12345678-1234-5678-1234-567812345678')),
    bad('UUID with too many digits', (s) => void (s.id = 'AA97B177-9383-4934-8543-0F91A7A028368'), [[0, 'id'], 'value_error.uuid']),
    bad('UUID with a non-hex letter', (s) => void (s.id = 'MA97B177-9383-4934-8543-0F91A7A02836'), [[0, 'id'], 'value_error.uuid']),
    bad('UUID without dashes', (s) => void (s.id = 'fd41c918b88b4b20a0a5a4c32391aaa0'), [[0, 'id'], 'value_error.uuid']),
    bad('UUID in braces', (s) => void (s.id = `{${UUID}}`), [[0, 'id'], 'value_error.uuid']),
    bad('empty string id (2.2.s4.b1.b4)', (s) => void (s.id = ''), [[0, 'id'], 'value_error.uuid']),
    bad('numeric id', (s) => void (s.id = 12345), [[0, 'id'], 'type_error.string']),
    bad('object id', (s) => void (s.id = { key: 'should fail' }), [[0, 'id'], 'type_error.string']),
  ],
  'actor: Agent (2.4.2.1, 2.4.2.3, 2.4.2.4)': [
    ok('Agent identified by mbox', (s) => void (s.actor = { mbox: 'mailto:xapi@adlnet.gov' })),
    ok('Agent identified by mbox_sha1sum', (s) => void (s.actor = { mbox_sha1sum: 'cd9b00a5611f94eaa7b1661edab976068e364975' })),
    ok('Agent identified by openid', (s) => void (s.actor = { openid: 'http://openid.example.org/12345' })),
    ok('Agent identified by account (2.4.2.4.s3 example)', (s) => void (s.actor = { objectType: 'Agent', account: { homePage: 'http://www.example.com', name: '1625378' } })),
    bad('objectType is case-sensitive (2.2.s4.b1.b6)', (s) => void (s.actor.objectType = 'agent'), [[0, 'actor', 'objectType'], 'value_error.enum']),
    bad('objectType must be a string', (s) => void (s.actor.objectType = 123), [[0, 'actor', 'objectType'], 'type_error.string']),
    bad('an Agent MUST be identified by one IFI (2.4.2.1.s2.b1)', (s) => void delete s.actor.mbox, [[0, 'actor'], 'value_error.ifi']),
    bad('an Agent MUST NOT include more than one IFI (2.4.2.1.s2.b2)', (s) => void (s.actor.openid = 'http://openid.example.org/1'), [[0, 'actor'], 'value_error.ifi']),
    bad('mbox must be a mailto IRI', (s) => void (s.actor.mbox = 'http://should.fail.com'), [[0, 'actor', 'mbox'], 'value_error.mbox']),
    bad('mbox must hold an email address', (s) => void (s.actor.mbox = 'mailto:should.fail.com'), [[0, 'actor', 'mbox'], 'value_error.mbox']),
    bad('mbox without the mailto: scheme', (s) => void (s.actor.mbox = 'xapi@adlnet.gov'), [[0, 'actor', 'mbox'], 'value_error.mbox']),
    bad('mbox_sha1sum must be 40 hex digits', (s) => void (s.actor = { mbox_sha1sum: 'cd9b00a5611f94eaa7b1661edab976068e36497' }), [
      [0, 'actor', 'mbox_sha1sum'],
      'value_error.sha1',
    ]),
    bad('openid must be a URI', (s) => void (s.actor = { openid: 'ab=c://should.fail.com' }), [[0, 'actor', 'openid'], 'value_error.iri']),
    bad('account homePage is required', (s) => void (s.actor = { account: { name: 'x' } }), [[0, 'actor', 'account', 'homePage'], MISSING]),
    bad('account name is required', (s) => void (s.actor = { account: { homePage: 'http://www.example.com' } }), [[0, 'actor', 'account', 'name'], MISSING]),
    bad('account homePage must be an IRL', (s) => void (s.actor = { account: { homePage: 'ab=c://should.fail.com', name: 'x' } }), [
      [0, 'actor', 'account', 'homePage'],
      'value_error.irl',
    ]),
    bad('account name must be a string', (s) => void (s.actor = { account: { homePage: 'http://www.example.com', name: { key: 'value' } } }), [
      [0, 'actor', 'account', 'name'],
      'type_error.string',
    ]),
    bad('account rejects extra properties', (s) => void (s.actor = { account: { homePage: 'http://www.example.com', name: 'x', id: 1 } }), [[0, 'actor', 'account', 'id'], EXTRA]),
    bad('Agent name must be a string', (s) => void (s.actor.name = 123), [[0, 'actor', 'name'], 'type_error.string']),
    bad('an Agent has no member list', (s) => void (s.actor.member = []), [[0, 'actor', 'member'], EXTRA]),
    bad('Agent rejects unknown properties', (s) => void (s.actor.email = 'x@example.com'), [[0, 'actor', 'email'], EXTRA]),
    bad('actor must be an object', (s) => void (s.actor = 'mailto:xapi@adlnet.gov'), [[0, 'actor'], 'type_error.object']),
  ],
  'actor: Group (2.4.2.2)': [
    ok('Anonymous Group with members', (s) => void (s.actor = { objectType: 'Group', member: [{ mbox: 'mailto:a@example.com' }, { openid: 'http://openid.example.org/b' }] })),
    ok('Identified Group without members', (s) => void (s.actor = { objectType: 'Group', name: 'Group Identified', mbox: 'mailto:xapi@adlnet.gov' })),
    ok(
      'Identified Group with members (Appendix B example)',
      (s) =>
        void (s.actor = {
          name: 'Example Group',
          account: { homePage: 'http://example.com/homePage', name: 'GroupAccount' },
          objectType: 'Group',
          member: [
            { name: 'Andrew Downes', mbox: 'mailto:andrew@example.com', objectType: 'Agent' },
            { name: 'Aaron Silvers', openid: 'http://aaron.openid.example.org', objectType: 'Agent' },
          ],
        }),
    ),
    ok('Identified Group with an empty member list', (s) => void (s.actor = { objectType: 'Group', mbox: 'mailto:g@example.com', member: [] })),
    bad('an Anonymous Group MUST include "member" (2.4.2.2.s4.b1)', (s) => void (s.actor = { objectType: 'Group', name: 'x' }), [[0, 'actor', 'member'], MISSING]),
    bad('an Anonymous Group with no members', (s) => void (s.actor = { objectType: 'Group', member: [] }), [[0, 'actor', 'member'], 'value_error.empty']),
    bad(
      'an Identified Group MUST include exactly one IFI (2.4.2.2.s5.b1)',
      (s) => void (s.actor = { objectType: 'Group', mbox: 'mailto:g@example.com', openid: 'http://openid.example.org/g' }),
      [[0, 'actor'], 'value_error.ifi'],
    ),
    bad('a Group MUST NOT contain Groups (2.4.2.2.s4.b2)', (s) => void (s.actor = { objectType: 'Group', member: [{ objectType: 'Group', mbox: 'mailto:g@example.com' }] }), [
      [0, 'actor', 'member', 0, 'objectType'],
      'value_error.not_allowed',
    ]),
    bad('members must be valid Agents', (s) => void (s.actor = { objectType: 'Group', member: [{ mbox: 'mailto:a@example.com' }, { name: 'no ifi' }] }), [
      [0, 'actor', 'member', 1],
      'value_error.ifi',
    ]),
    bad('member must be an array', (s) => void (s.actor = { objectType: 'Group', member: { mbox: 'mailto:a@example.com' } }), [[0, 'actor', 'member'], 'type_error.array']),
    bad(
      'a Group without objectType is read as an Agent',
      (s) => void (s.actor = { member: [{ mbox: 'mailto:a@example.com' }] }),
      [[0, 'actor', 'member'], EXTRA],
      [[0, 'actor'], 'value_error.ifi'],
    ),
  ],
  'verb (2.4.3)': [
    ok('verb without display', (s) => void delete s.verb.display),
    ok('IRI with non-ASCII characters (2.4.3.1)', (s) => void (s.verb.id = 'http://example.com/فعل/خواندن')),
    ok(
      'display in several languages (2.4.3.s8 example)',
      (s) => void (s.verb = { id: 'http://example.com/xapi/verbs#defenestrated', display: { 'en-US': 'defenestrated', es: 'defenestrado' } }),
    ),
    bad('verb id is required', (s) => void delete s.verb.id, [[0, 'verb', 'id'], MISSING]),
    bad('verb id must be an IRI', (s) => void (s.verb.id = 'should fail'), [[0, 'verb', 'id'], 'value_error.iri']),
    bad('verb id must not be relative', (s) => void (s.verb.id = '/verbs/attempted'), [[0, 'verb', 'id'], 'value_error.iri']),
    bad('verb display must be a language map', (s) => void (s.verb.display = 'should error'), [[0, 'verb', 'display'], 'type_error.object']),
    bad('verb display needs one entry', (s) => void (s.verb.display = {}), [[0, 'verb', 'display'], 'value_error.empty']),
    bad('verb display key must be an RFC 5646 tag', (s) => void (s.verb.display = { a12345: 'should error' }), [[0, 'verb', 'display', 'a12345'], 'value_error.language_tag']),
    bad('language map values are strings', (s) => void (s.verb.display = { 'en-US': 1 }), [[0, 'verb', 'display', 'en-US'], 'type_error.string']),
    bad('verb rejects unknown properties', (s) => void (s.verb.name = 'x'), [[0, 'verb', 'name'], EXTRA]),
  ],
  'object: Activity (2.4.4.1)': [
    ok('objectType omitted defaults to Activity (2.4.4.s2)', (s) => void delete s.object.objectType),
    ok(
      'Appendix B Activity',
      (s) =>
        void (s.object = {
          id: 'http://www.example.co.uk/exampleactivity',
          definition: { name: { 'en-GB': 'example activity' }, type: 'http://www.example.co.uk/types/exampleactivitytype' },
          objectType: 'Activity',
        }),
    ),
    ok('Activity id may be a URN', (s) => void (s.object.id = 'urn:uuid:fd41c918-b88b-4b20-a0a5-a4c32391aaa0')),
    bad('objectType must be "Activity" exactly', (s) => void (s.object.objectType = 'activity'), [[0, 'object', 'objectType'], 'value_error.enum']),
    bad('unknown objectType', (s) => void (s.object.objectType = 'Thing'), [[0, 'object', 'objectType'], 'value_error.enum']),
    bad('Activity id is required', (s) => void delete s.object.id, [[0, 'object', 'id'], MISSING]),
    bad('Activity id must be an IRI', (s) => void (s.object.id = 'ab=c://should.fail.com'), [[0, 'object', 'id'], 'value_error.iri']),
    bad('Activity id with a space', (s) => void (s.object.id = 'http://example.com/a b'), [[0, 'object', 'id'], 'value_error.iri']),
    bad('Activity rejects unknown properties', (s) => void (s.object.name = 'x'), [[0, 'object', 'name'], EXTRA]),
    bad('object must be an object', (s) => void (s.object = 'http://example.com/a'), [[0, 'object'], 'type_error.object']),
  ],
  'activity definition (2.4.4.1.s2)': [
    ok(
      'definition with every plain property',
      (s) =>
        void (s.object.definition = {
          name: { 'en-US': 'n' },
          description: { 'en-US': 'd' },
          type: 'http://adlnet.gov/expapi/activities/course',
          moreInfo: 'https://example.com/info',
          extensions: { 'http://example.com/ext': { any: ['json', 1, null] } },
        }),
    ),
    bad('definition must be an object', (s) => void (s.object.definition = 'should error'), [[0, 'object', 'definition'], 'type_error.object']),
    bad('name must be a language map', (s) => void (s.object.definition = { name: 'should error' }), [[0, 'object', 'definition', 'name'], 'type_error.object']),
    bad('name needs one entry', (s) => void (s.object.definition = { name: {} }), [[0, 'object', 'definition', 'name'], 'value_error.empty']),
    bad('description with an invalid tag (region twice)', (s) => void (s.object.definition = { description: { 'en-US': 'ok', 'de-419-DE': 'x' } }), [
      [0, 'object', 'definition', 'description', 'de-419-DE'],
      'value_error.language_tag',
    ]),
    bad('type must be an IRI', (s) => void (s.object.definition = { type: 'should error' }), [[0, 'object', 'definition', 'type'], 'value_error.iri']),
    bad('moreInfo must be an IRL', (s) => void (s.object.definition = { moreInfo: 'should error' }), [[0, 'object', 'definition', 'moreInfo'], 'value_error.irl']),
    bad('definition rejects unknown properties', (s) => void (s.object.definition = { title: 'x' }), [[0, 'object', 'definition', 'title'], EXTRA]),
  ],
  'interaction activities (2.4.4.1.s8-s16)': [
    ...Object.entries(INTERACTIONS).map(([t, def]) => ok(`Appendix C ${t}`, withDefinition(def))),
    ok('interactionType without component lists or pattern', withDefinition({ interactionType: 'likert' })),
    ok('empty correctResponsesPattern (no correct answer)', withDefinition({ interactionType: 'choice', correctResponsesPattern: [] })),
    ok('the same id in source and target lists', withDefinition({ interactionType: 'matching', source: [component('a')], target: [component('a')] })),
    bad('interactionType is case-sensitive (2.2.s4.b1.b6)', withDefinition({ interactionType: 'true-faLse' }), [
      [0, 'object', 'definition', 'interactionType'],
      'value_error.enum',
    ]),
    bad('interactionType must be from the list', withDefinition({ interactionType: 'essay' }), [[0, 'object', 'definition', 'interactionType'], 'value_error.enum']),
    bad('interactionType must be a string', withDefinition({ interactionType: 12345 }), [[0, 'object', 'definition', 'interactionType'], 'type_error.string']),
    bad('choices without interactionType', withDefinition({ choices: [component('a')] }), [[0, 'object', 'definition', 'interactionType'], MISSING]),
    bad('correctResponsesPattern without interactionType', withDefinition({ correctResponsesPattern: ['a'] }), [[0, 'object', 'definition', 'interactionType'], MISSING]),
    bad('scale is not allowed for choice', withDefinition({ interactionType: 'choice', scale: [component('a')] }), [
      [0, 'object', 'definition', 'scale'],
      'value_error.not_allowed',
    ]),
    bad('choices are not allowed for true-false', withDefinition({ interactionType: 'true-false', choices: [component('a')] }), [
      [0, 'object', 'definition', 'choices'],
      'value_error.not_allowed',
    ]),
    bad('steps are not allowed for matching', withDefinition({ interactionType: 'matching', steps: [component('a')] }), [
      [0, 'object', 'definition', 'steps'],
      'value_error.not_allowed',
    ]),
    bad('correctResponsesPattern must be an array', withDefinition({ interactionType: 'other', correctResponsesPattern: 'a' }), [
      [0, 'object', 'definition', 'correctResponsesPattern'],
      'type_error.array',
    ]),
    bad('correctResponsesPattern holds strings', withDefinition({ interactionType: 'numeric', correctResponsesPattern: ['4[:]', 4] }), [
      [0, 'object', 'definition', 'correctResponsesPattern', 1],
      'type_error.string',
    ]),
    bad('component ids MUST be distinct (2.4.4.1.s16.b1)', withDefinition({ interactionType: 'choice', choices: [component('a'), component('a')] }), [
      [0, 'object', 'definition', 'choices', 1, 'id'],
      'value_error.duplicate',
    ]),
    bad('component id is required', withDefinition({ interactionType: 'likert', scale: [{ description: { 'en-US': 'x' } }] }), [
      [0, 'object', 'definition', 'scale', 0, 'id'],
      MISSING,
    ]),
    bad('component rejects unknown properties', withDefinition({ interactionType: 'performance', steps: [{ id: 'a', name: 'x' }] }), [
      [0, 'object', 'definition', 'steps', 0, 'name'],
      EXTRA,
    ]),
    bad('component description is a language map', withDefinition({ interactionType: 'sequencing', choices: [{ id: 'a', description: { 'en-US': 'x', 'not a tag': 'y' } }] }), [
      [0, 'object', 'definition', 'choices', 0, 'description', 'not a tag'],
      'value_error.language_tag',
    ]),
    bad('component list must be an array', withDefinition({ interactionType: 'matching', source: component('a') }), [[0, 'object', 'definition', 'source'], 'type_error.array']),
  ],
  'object: Agent, Group, StatementRef (2.4.4.2, 2.4.4.3)': [
    ok('Agent object with objectType (Appendix B)', (s) => void (s.object = { name: 'Andrew Downes', mbox: 'mailto:andrew@example.co.uk', objectType: 'Agent' })),
    ok('Group object', (s) => void (s.object = { objectType: 'Group', member: [{ mbox: 'mailto:a@example.com' }] })),
    ok('StatementRef object (2.4.4.3.s5 example)', (s) => void (s.object = { objectType: 'StatementRef', id: '8f87ccde-bb56-4c2e-ab83-44982ef22df0' })),
    bad(
      'an Agent object MUST specify objectType (2.4.4.2.s1.b1)',
      (s) => void (s.object = { mbox: 'mailto:andrew@example.co.uk' }),
      [[0, 'object', 'mbox'], EXTRA],
      [[0, 'object', 'id'], MISSING],
    ),
    bad('an Agent object still needs one IFI', (s) => void (s.object = { objectType: 'Agent', name: 'x' }), [[0, 'object'], 'value_error.ifi']),
    bad('StatementRef id MUST be a UUID (2.4.4.3.s4.b2)', (s) => void (s.object = { objectType: 'StatementRef', id: 'http://example.com/s' }), [
      [0, 'object', 'id'],
      'value_error.uuid',
    ]),
    bad('StatementRef id is required', (s) => void (s.object = { objectType: 'StatementRef' }), [[0, 'object', 'id'], MISSING]),
    bad('StatementRef rejects other properties', (s) => void (s.object = { objectType: 'StatementRef', id: UUID, definition: {} }), [[0, 'object', 'definition'], EXTRA]),
  ],
  'voiding (2.3.2)': [
    ok('voiding statement (2.3.2.s3 example)', () => ({
      actor: { objectType: 'Agent', name: 'Example Admin', mbox: 'mailto:admin@example.adlnet.gov' },
      verb: { id: 'http://adlnet.gov/expapi/verbs/voided', display: { 'en-US': 'voided' } },
      object: { objectType: 'StatementRef', id: 'e05aa883-acaf-40ad-bf54-02c8ce485fb0' },
    })),
    bad('the object of a voiding statement MUST be a StatementRef (2.3.2.s2.b1)', (s) => void (s.verb.id = 'http://adlnet.gov/expapi/verbs/voided'), [
      [0, 'object', 'objectType'],
      'value_error.voiding',
    ]),
  ],
  'object: SubStatement (2.4.4.3.s6-s9)': [
    ok(
      'SubStatement (2.4.4.3.s9 example)',
      (s) =>
        void (s.object = {
          objectType: 'SubStatement',
          actor: { objectType: 'Agent', mbox: 'mailto:test@example.com' },
          verb: { id: 'http://example.com/visited', display: { 'en-US': 'will visit' } },
          object: { objectType: 'Activity', id: 'http://example.com/website', definition: { name: { 'en-US': 'Some Awesome Website' } } },
        }),
    ),
    ok(
      'SubStatement with a StatementRef object (Appendix B)',
      (s) =>
        void (s.object = {
          objectType: 'SubStatement',
          actor: { objectType: 'Agent', mbox: 'mailto:agent@example.com' },
          verb: { id: 'http://example.com/confirmed', display: { en: 'confirmed' } },
          object: { objectType: 'StatementRef', id: '9e13cefd-53d3-4eac-b5ed-2cf6693903bb' },
        }),
    ),
    ok(
      'SubStatement MAY have a future timestamp, result, context, attachments (2.4.7.s3.b5)',
      (s) =>
        void (s.object = {
          objectType: 'SubStatement',
          actor: { mbox: 'mailto:test@example.com' },
          verb: { id: 'http://example.com/planned' },
          object: { id: 'http://example.com/website' },
          timestamp: '2999-01-01T00:00:00Z',
          result: { completion: false },
          context: { platform: 'web', contextActivities: { parent: { id: 'http://example.com/p' } } },
          attachments: [attachment()],
        }),
    ),
    ...(['id', 'stored', 'version', 'authority'] as const).map((k) =>
      bad(
        `a SubStatement MUST NOT have "${k}" (2.4.4.3.s8.b3)`,
        (s: Any) => {
          const values = { id: UUID, stored: '2013-05-18T05:32:34.804Z', version: '1.0.0', authority: { mbox: 'mailto:a@example.com' } };
          s.object = { objectType: 'SubStatement', actor: s.actor, verb: s.verb, object: { id: 'http://example.com/a' }, [k]: values[k] };
        },
        [[0, 'object', k], 'value_error.not_allowed'],
      ),
    ),
    bad(
      'a SubStatement MUST NOT contain a SubStatement (2.4.4.3.s8.b4)',
      (s) =>
        void (s.object = {
          objectType: 'SubStatement',
          actor: s.actor,
          verb: s.verb,
          object: { objectType: 'SubStatement', actor: s.actor, verb: s.verb, object: { id: 'http://example.com/a' } },
        }),
      [[0, 'object', 'object', 'objectType'], 'value_error.not_allowed'],
    ),
    bad(
      'a SubStatement is validated as a Statement: verb required (2.4.4.3.s8.b2)',
      (s) => void (s.object = { objectType: 'SubStatement', actor: s.actor, object: { id: 'http://example.com/a' } }),
      [[0, 'object', 'verb'], MISSING],
    ),
    bad('SubStatement actor is validated', (s) => void (s.object = { objectType: 'SubStatement', actor: { name: 'x' }, verb: s.verb, object: { id: 'http://example.com/a' } }), [
      [0, 'object', 'actor'],
      'value_error.ifi',
    ]),
    bad(
      'SubStatement object Agent needs objectType',
      (s) => void (s.object = { objectType: 'SubStatement', actor: s.actor, verb: s.verb, object: { mbox: 'mailto:a@example.com' } }),
      [[0, 'object', 'object', 'mbox'], EXTRA],
      [[0, 'object', 'object', 'id'], MISSING],
    ),
    bad(
      'SubStatement timestamp is validated',
      (s) => void (s.object = { objectType: 'SubStatement', actor: s.actor, verb: s.verb, object: { id: 'http://example.com/a' }, timestamp: 'should fail' }),
      [[0, 'object', 'timestamp'], 'value_error.datetime'],
    ),
    bad(
      'SubStatement rejects unknown properties',
      (s) => void (s.object = { objectType: 'SubStatement', actor: s.actor, verb: s.verb, object: { id: 'http://example.com/a' }, foo: 1 }),
      [[0, 'object', 'foo'], EXTRA],
    ),
  ],
  'result (2.4.5)': [
    ok(
      'result with every property',
      (s) =>
        void (s.result = {
          score: { scaled: 0.95, raw: 95, min: 0, max: 100 },
          success: true,
          completion: false,
          response: 'We agreed on some example actions.',
          duration: 'PT4H35M59.14S',
          extensions: { 'http://example.com/null': null },
        }),
    ),
    ok('scaled at the lower bound -1', (s) => void (s.result = { score: { scaled: -1 } })),
    ok('scaled at the upper bound 1', (s) => void (s.result = { score: { scaled: 1 } })),
    ok('raw equal to min and max bounds', (s) => void (s.result = { score: { raw: 0, min: 0, max: 10 } })),
    ok('empty result object', (s) => void (s.result = {})),
    bad('scaled is between -1 and 1', (s) => void (s.result = { score: { scaled: 1.5 } }), [[0, 'result', 'score', 'scaled'], 'value_error.range']),
    bad('raw must not exceed max', (s) => void (s.result = { score: { raw: 101, min: 0, max: 100 } }), [[0, 'result', 'score', 'raw'], 'value_error.range']),
    bad('raw must not be below min', (s) => void (s.result = { score: { raw: -1, min: 0 } }), [[0, 'result', 'score', 'raw'], 'value_error.range']),
    bad('min must be less than max', (s) => void (s.result = { score: { min: 10, max: 10 } }), [[0, 'result', 'score', 'max'], 'value_error.range']),
    bad('strings where numbers are required (2.2.s4.b1.b2)', (s) => void (s.result = { score: { max: '100' } }), [[0, 'result', 'score', 'max'], 'type_error.number']),
    bad('strings where booleans are required (2.2.s4.b1.b3)', (s) => void (s.result = { completion: 'false' }), [[0, 'result', 'completion'], 'type_error.boolean']),
    bad('success must be a boolean', (s) => void (s.result = { success: 1 }), [[0, 'result', 'success'], 'type_error.boolean']),
    bad('response must be a string', (s) => void (s.result = { response: 42 }), [[0, 'result', 'response'], 'type_error.string']),
    bad('duration must be ISO 8601', (s) => void (s.result = { duration: 'PA1H0M0S' }), [[0, 'result', 'duration'], 'value_error.duration']),
    bad('duration must be a string', (s) => void (s.result = { duration: 12345 }), [[0, 'result', 'duration'], 'type_error.string']),
    bad('score rejects unknown properties', (s) => void (s.result = { score: { percent: 5 } }), [[0, 'result', 'score', 'percent'], EXTRA]),
    bad('result rejects unknown properties', (s) => void (s.result = { grade: 'A' }), [[0, 'result', 'grade'], EXTRA]),
    bad('result extension keys are IRIs (4.1.s3.b1)', (s) => void (s.result = { extensions: { minutes: 1 } }), [[0, 'result', 'extensions', 'minutes'], 'value_error.iri']),
    bad('extensions must be an object', (s) => void (s.result = { extensions: [] }), [[0, 'result', 'extensions'], 'type_error.object']),
  ],
  'context (2.4.6)': [
    ok(
      'context with every property',
      (s) =>
        void (s.context = {
          registration: 'ec531277-b57b-4c15-8d91-d292c5b2b8f7',
          instructor: { objectType: 'Group', member: [{ mbox: 'mailto:i@example.com' }] },
          team: { objectType: 'Group', member: [{ mbox: 'mailto:t@example.com' }] },
          contextActivities: { parent: [{ id: 'http://example.com/p' }], grouping: { id: 'http://example.com/g' }, category: [], other: [] },
          revision: 'r2',
          platform: 'web',
          language: 'zh-Hant-TW',
          statement: { objectType: 'StatementRef', id: UUID },
          extensions: { 'http://example.com/altitude': 1000 },
        }),
    ),
    bad('registration must be a UUID', (s) => void (s.context = { registration: 'abc' }), [[0, 'context', 'registration'], 'value_error.uuid']),
    bad('instructor must be a valid Agent', (s) => void (s.context = { instructor: { name: 'x' } }), [[0, 'context', 'instructor'], 'value_error.ifi']),
    bad('team must be a Group, not an Agent', (s) => void (s.context = { team: { objectType: 'Agent', mbox: 'mailto:t@example.com' } }), [
      [0, 'context', 'team', 'objectType'],
      'value_error.not_allowed',
    ]),
    bad('team must have objectType Group', (s) => void (s.context = { team: { mbox: 'mailto:t@example.com' } }), [[0, 'context', 'team', 'objectType'], MISSING]),
    bad('contextActivities keys are parent/grouping/category/other (2.4.6.2.s4.b1)', (s) => void (s.context = { contextActivities: { Parent: [] } }), [
      [0, 'context', 'contextActivities', 'Parent'],
      EXTRA,
    ]),
    bad(
      'contextActivities values are Activities (2.4.6.2.s4.b2)',
      (s) => void (s.context = { contextActivities: { parent: [{ objectType: 'Agent', mbox: 'mailto:a@example.com' }] } }),
      [[0, 'context', 'contextActivities', 'parent', 0, 'objectType'], 'value_error.enum'],
    ),
    bad('a context Activity needs an id', (s) => void (s.context = { contextActivities: { other: [{ id: 'http://example.com/o' }, { objectType: 'Activity' }] } }), [
      [0, 'context', 'contextActivities', 'other', 1, 'id'],
      MISSING,
    ]),
    bad('a single context Activity is validated too', (s) => void (s.context = { contextActivities: { category: { id: 'not an iri' } } }), [
      [0, 'context', 'contextActivities', 'category', 'id'],
      'value_error.iri',
    ]),
    bad('contextActivities value must be an object or an array', (s) => void (s.context = { contextActivities: { grouping: 'http://example.com/g' } }), [
      [0, 'context', 'contextActivities', 'grouping'],
      'type_error.array',
    ]),
    ok('revision and platform when the object is an Activity', (s) => void (s.context = { revision: '1', platform: 'x' })),
    bad(
      '"revision" only with an Activity object (2.4.6.s4.b1)',
      (s) => {
        s.object = { objectType: 'StatementRef', id: UUID };
        s.context = { revision: '1' };
      },
      [[0, 'context', 'revision'], 'value_error.not_allowed'],
    ),
    bad(
      '"platform" only with an Activity object (2.4.6.s4.b2)',
      (s) => {
        s.object = { objectType: 'Agent', mbox: 'mailto:a@example.com' };
        s.context = { platform: 'x' };
      },
      [[0, 'context', 'platform'], 'value_error.not_allowed'],
    ),
    bad('revision must be a string', (s) => void (s.context = { revision: 2 }), [[0, 'context', 'revision'], 'type_error.string']),
    bad('language must be an RFC 5646 tag', (s) => void (s.context = { language: 'english!' }), [[0, 'context', 'language'], 'value_error.language_tag']),
    bad('context statement must be a StatementRef', (s) => void (s.context = { statement: { id: UUID } }), [[0, 'context', 'statement', 'objectType'], MISSING]),
    bad('context statement objectType must be StatementRef', (s) => void (s.context = { statement: { objectType: 'SubStatement', id: UUID } }), [
      [0, 'context', 'statement', 'objectType'],
      'value_error.enum',
    ]),
    bad('context rejects unknown properties', (s) => void (s.context = { location: 'x' }), [[0, 'context', 'location'], EXTRA]),
    bad('context extension keys are IRIs', (s) => void (s.context = { extensions: { 'http://example.com/ok': 1, 'not an iri': 2 } }), [
      [0, 'context', 'extensions', 'not an iri'],
      'value_error.iri',
    ]),
  ],
  'timestamp and stored (2.4.7, 2.4.8, 4.5)': [
    ok('UTC timestamp with milliseconds', (s) => void (s.timestamp = '2013-05-18T05:32:34.804Z')),
    ok('timestamp with +00:00 offset (Appendix A)', (s) => void (s.timestamp = '2015-11-18T12:17:00+00:00')),
    ok('timestamp with a positive offset and microseconds', (s) => void (s.timestamp = '2016-02-29T23:59:59.123456+05:30')),
    ok('timestamp without offset (time zone is only a SHOULD)', (s) => void (s.timestamp = '2013-05-18T05:32:34')),
    ok('ISO 8601 basic format', (s) => void (s.timestamp = '20130518T053234Z')),
    ok('stored is a timestamp', (s) => void (s.stored = '2013-05-18T05:32:34.804+00:00')),
    bad('a date alone is not a timestamp', (s) => void (s.timestamp = '2013-05-18'), [[0, 'timestamp'], 'value_error.datetime']),
    bad('offset -00:00 is rejected', (s) => void (s.timestamp = '2008-09-15T15:53:00.601-00:00'), [[0, 'timestamp'], 'value_error.datetime']),
    bad('offset -0000 is rejected', (s) => void (s.timestamp = '2008-09-15T15:53:00.601-0000'), [[0, 'timestamp'], 'value_error.datetime']),
    bad('offset -00 is rejected', (s) => void (s.timestamp = '2008-09-15T15:53:00.601-00'), [[0, 'timestamp'], 'value_error.datetime']),
    bad('non-ISO date', (s) => void (s.timestamp = '01/011/2015'), [[0, 'timestamp'], 'value_error.datetime']),
    bad('February 30th', (s) => void (s.timestamp = '2013-02-30T00:00:00Z'), [[0, 'timestamp'], 'value_error.datetime']),
    bad('timestamp must be a string', (s) => void (s.timestamp = 1368855154804), [[0, 'timestamp'], 'type_error.string']),
    bad('stored must be a timestamp', (s) => void (s.stored = 'should fail'), [[0, 'stored'], 'value_error.datetime']),
  ],
  'authority (2.4.9)': [
    ok('authority Agent (Appendix A)', (s) => void (s.authority = { account: { homePage: 'http://cloud.scorm.com/', name: 'anonymous' }, objectType: 'Agent' })),
    ok('3-legged OAuth authority Group of two Agents (2.4.9.s8 example)', (s) => void (s.authority = oauthAuthority())),
    bad(
      'an authority Group must be anonymous',
      (s) => {
        s.authority = oauthAuthority();
        s.authority.mbox = 'mailto:bob@example.com';
      },
      [[0, 'authority'], 'value_error.authority'],
    ),
    bad(
      'an authority Group has exactly two members: one',
      (s) => {
        s.authority = oauthAuthority();
        s.authority.member.pop();
      },
      [[0, 'authority', 'member'], 'value_error.authority'],
    ),
    bad(
      'an authority Group has exactly two members: three',
      (s) => {
        s.authority = oauthAuthority();
        s.authority.member.push({ mbox: 'mailto:james@example.com' });
      },
      [[0, 'authority', 'member'], 'value_error.authority'],
    ),
    bad('an authority Group needs members', (s) => void (s.authority = { objectType: 'Group' }), [[0, 'authority', 'member'], MISSING]),
    bad('an authority Agent needs one IFI', (s) => void (s.authority = { objectType: 'Agent', name: 'x' }), [[0, 'authority'], 'value_error.ifi']),
  ],
  'version (2.4.10)': [
    ok('version 1.0.0', (s) => void (s.version = '1.0.0')),
    ok('version 1.0.3', (s) => void (s.version = '1.0.3')),
    ok('version 1.0', (s) => void (s.version = '1.0')),
    bad('version not starting with 1.0. (2.4.10.s3.b2)', (s) => void (s.version = '1.1.0'), [[0, 'version'], 'value_error.version']),
    bad('version 0.95', (s) => void (s.version = '0.95'), [[0, 'version'], 'value_error.version']),
    bad('version must be a string', (s) => void (s.version = 1.0), [[0, 'version'], 'type_error.string']),
  ],
  'attachments (2.4.11)': [
    ok('attachment with every property', (s) => void (s.attachments = [attachment()])),
    ok('attachment without optional description and fileUrl', (s) => {
      const a = attachment();
      delete a.description;
      delete a.fileUrl;
      s.attachments = [a];
    }),
    ok('SHA-512 digest and zero length', (s) => void (s.attachments = [{ ...attachment(), sha2: 'a'.repeat(128), length: 0 }])),
    bad('attachments must be an array', (s) => void (s.attachments = attachment()), [[0, 'attachments'], 'type_error.array']),
    bad('an attachment must be an object', (s) => void (s.attachments = ['should fail']), [[0, 'attachments', 0], 'type_error.object']),
    bad('usageType must be an IRI', (s) => void (s.attachments = [{ ...attachment(), usageType: 'should fail' }]), [[0, 'attachments', 0, 'usageType'], 'value_error.iri']),
    bad('contentType must be a media type', (s) => void (s.attachments = [{ ...attachment(), contentType: 'should fail' }]), [
      [0, 'attachments', 0, 'contentType'],
      'value_error.media_type',
    ]),
    bad('length must be an integer, not a string', (s) => void (s.attachments = [{ ...attachment(), length: '27' }]), [[0, 'attachments', 0, 'length'], 'type_error.integer']),
    bad('length must be a non-negative integer', (s) => void (s.attachments = [{ ...attachment(), length: 2.5 }]), [[0, 'attachments', 0, 'length'], 'value_error.integer']),
    bad('sha2 must be a string', (s) => void (s.attachments = [{ ...attachment(), sha2: 12345 }]), [[0, 'attachments', 0, 'sha2'], 'type_error.string']),
    bad('sha2 must be a hex SHA-2 digest', (s) => void (s.attachments = [{ ...attachment(), sha2: 'not-a-hash' }]), [[0, 'attachments', 0, 'sha2'], 'value_error.sha2']),
    bad('fileUrl must be an IRL', (s) => void (s.attachments = [{ ...attachment(), fileUrl: 'should fail' }]), [[0, 'attachments', 0, 'fileUrl'], 'value_error.irl']),
    bad(
      'display is required',
      (s) => {
        const a = attachment();
        delete a.display;
        s.attachments = [attachment(), a];
      },
      [[0, 'attachments', 1, 'display'], MISSING],
    ),
    bad(
      'sha2 is required even with fileUrl',
      (s) => {
        const a = attachment();
        delete a.sha2;
        s.attachments = [a];
      },
      [[0, 'attachments', 0, 'sha2'], MISSING],
    ),
    bad('description language map tags are checked', (s) => void (s.attachments = [{ ...attachment(), description: { 'de-419-DE': 'x' } }]), [
      [0, 'attachments', 0, 'description', 'de-419-DE'],
      'value_error.language_tag',
    ]),
    bad('attachment rejects unknown properties', (s) => void (s.attachments = [{ ...attachment(), data: 'x' }]), [[0, 'attachments', 0, 'data'], EXTRA]),
  ],
  'extensions (4.1)': [
    ok(
      'extension values may be any JSON, null included',
      (s) => void (s.result = { extensions: { 'http://example.com/a': null, 'http://example.com/b': [1, { c: null }], 'urn:x:y': 'z' } }),
    ),
    bad('extension keys must be absolute IRIs', (s) => void (s.object.definition = { extensions: { '/relative': 1 } }), [
      [0, 'object', 'definition', 'extensions', '/relative'],
      'value_error.iri',
    ]),
  ],
};

const issuesOf = (issues: ValidationIssue[]): Expected[] => issues.map((i) => [i.loc, i.type]);

for (const [group, cases] of Object.entries(CASES)) {
  describe(group, () => {
    for (const c of cases) {
      test(`${c.issues.length ? 'rejects' : 'accepts'}: ${c.name}`, () => {
        const s = base();
        const replaced = c.build(s);
        const body = replaced === undefined ? s : replaced;
        const input = structuredClone(body);
        const { statements, issues } = validateStatements(body, '1.0.3');
        assert.deepEqual(issuesOf(issues), c.issues, JSON.stringify(issues, null, 1));
        for (const i of issues) assert.ok(i.msg.length > 0);
        assert.deepEqual(body, input, 'the input must not be modified');
        if (!c.issues.length) assert.equal(statements.length, 1);
      });
    }
  });
}

describe('validateStatements: batches and copies', () => {
  test('an empty array is accepted with no statements', () => {
    assert.deepEqual(validateStatements([], '1.0.3'), { statements: [], issues: [], more: 0 });
  });
  test('a non-object, non-array body is an issue at loc []', () => {
    for (const body of ['x', 1, null, true]) {
      const { issues } = validateStatements(body, '1.0.3');
      assert.deepEqual(issuesOf(issues), [[[], 'type_error.object']]);
    }
  });
  test('issue locations start with the index in the batch', () => {
    const second = base();
    second.actor.mbox = 'nope';
    const { issues, statements } = validateStatements([base(), second, 'x'], '1.0.3');
    assert.deepEqual(issuesOf(issues), [
      [[1, 'actor', 'mbox'], 'value_error.mbox'],
      [[2], 'type_error.object'],
    ]);
    assert.equal(statements.length, 3);
  });
  test('two statements of a batch with the same id are rejected', () => {
    const a = { ...base(), id: UUID };
    const b = { ...base(), id: UUID.toUpperCase() };
    const { issues } = validateStatements([a, b], '1.0.3');
    assert.deepEqual(issuesOf(issues), [[[1, 'id'], 'value_error.duplicate']]);
  });
  test('a single context activity is normalised into a one-element array (2.4.6.2.s4.b3)', () => {
    const s = base();
    s.context = { contextActivities: { parent: { id: 'http://example.com/p' }, other: [{ id: 'http://example.com/o' }] } };
    const { statements, issues } = validateStatements(s, '1.0.3');
    assert.deepEqual(issues, []);
    assert.deepEqual(statements[0].context?.contextActivities, {
      parent: [{ id: 'http://example.com/p' }],
      other: [{ id: 'http://example.com/o' }],
    });
    assert.deepEqual(s.context.contextActivities.parent, { id: 'http://example.com/p' }, 'input untouched');
  });
  test('returned statements are deep copies equal to valid input', () => {
    const input = structuredClone(APPENDIX_A_LONG);
    const { statements, issues } = validateStatements(input, '1.0.3');
    assert.deepEqual(issues, []);
    assert.deepEqual(statements[0], APPENDIX_A_LONG);
    const out = statements[0] as Any;
    out.actor.member[0].account.name = 'changed';
    out.object.definition.extensions['http://example.com/profiles/meetings/activitydefinitionextensions/room'].name = 'changed';
    assert.deepEqual(input, APPENDIX_A_LONG);
  });
  test('__proto__ keys inside extension values are copied as plain data', () => {
    const s = JSON.parse(
      '{"actor":{"mbox":"mailto:a@example.com"},"verb":{"id":"http://example.com/v"},"object":{"id":"http://example.com/a"},' +
        '"result":{"extensions":{"http://example.com/e":{"__proto__":{"polluted":true}}}}}',
    );
    const { statements, issues } = validateStatements(s, '1.0.3');
    assert.deepEqual(issues, []);
    const ext = (statements[0].result!.extensions as Any)['http://example.com/e'];
    assert.equal(Object.getPrototypeOf(ext), Object.prototype);
    assert.ok(Object.hasOwn(ext, '__proto__'));
    assert.equal(({} as Any).polluted, undefined);
  });
  test('absurdly deep extension values are a 400 issue, not a stack overflow', () => {
    const deep = (n: number) => JSON.parse('['.repeat(n) + ']'.repeat(n));
    const s = base();
    s.result = { extensions: { 'http://example.com/ok': deep(500), 'http://example.com/deep': deep(100_000) } };
    assert.deepEqual(issuesOf(validateStatements(s, '1.0.3').issues), [[[0, 'result', 'extensions', 'http://example.com/deep'], 'value_error.too_deep']]);
  });
  test('a __proto__ key in a statement is an extra field', () => {
    const s = JSON.parse('{"actor":{"mbox":"mailto:a@example.com"},"verb":{"id":"http://example.com/v"},"object":{"id":"http://example.com/a"},"__proto__":{}}');
    assert.deepEqual(issuesOf(validateStatements(s, '1.0.3').issues), [[[0, '__proto__'], EXTRA]]);
  });
  test('validateStatement reports at the given loc', () => {
    const issues: ValidationIssue[] = [];
    const s = base();
    delete s.verb;
    const out = validateStatement(s, [7], issues, '1.0.3');
    assert.deepEqual(issuesOf(issues), [[[7, 'verb'], MISSING]]);
    assert.ok(out);
  });
  test('messages are plain English', () => {
    const s = base();
    s.actor.openid = 'http://openid.example.org/1';
    s.extra = 1;
    delete s.verb;
    const { issues } = validateStatements(s, '1.0.3');
    assert.deepEqual(
      issues.map((i) => i.msg),
      ['an Agent must have exactly one inverse functional identifier, found 2: mbox, openid', 'extra field not permitted', 'field required'],
    );
  });
});

describe('validateAgentParam', () => {
  const run = (v: unknown): Expected[] => {
    const issues: ValidationIssue[] = [];
    validateAgentParam(v, ['query', 'agent'], issues);
    return issuesOf(issues);
  };
  const cases: [string, unknown, Expected[]][] = [
    ['Agent with mbox', { mbox: 'mailto:a@example.com' }, []],
    ['Agent with objectType and account', { objectType: 'Agent', account: { homePage: 'http://example.com', name: 'a' } }, []],
    ['identified Group', { objectType: 'Group', openid: 'http://openid.example.org/g' }, []],
    ['anonymous Group is not allowed', { objectType: 'Group', member: [{ mbox: 'mailto:a@example.com' }] }, [[['query', 'agent'], 'value_error.ifi']]],
    ['Agent with two IFIs', { mbox: 'mailto:a@example.com', mbox_sha1sum: 'cd9b00a5611f94eaa7b1661edab976068e364975' }, [[['query', 'agent'], 'value_error.ifi']]],
    ['Agent without IFI', { name: 'a' }, [[['query', 'agent'], 'value_error.ifi']]],
    ['invalid mbox', { mbox: 'a@example.com' }, [[['query', 'agent', 'mbox'], 'value_error.mbox']]],
    ['extra property', { mbox: 'mailto:a@example.com', age: 3 }, [[['query', 'agent', 'age'], EXTRA]]],
    ['not an object', 'mailto:a@example.com', [[['query', 'agent'], 'type_error.object']]],
    ['an array', [{ mbox: 'mailto:a@example.com' }], [[['query', 'agent'], 'type_error.object']]],
  ];
  for (const [name, value, expected] of cases) {
    test(`${expected.length ? 'rejects' : 'accepts'}: ${name}`, () => assert.deepEqual(run(value), expected));
  }
});

describe('format helpers', () => {
  const table = <T>(name: string, fn: (v: unknown) => T, rows: [unknown, T][]) => {
    test(name, () => {
      for (const [input, want] of rows) assert.equal(fn(input), want, `${name}(${JSON.stringify(input)})`);
    });
  };
  table('isUuid', isUuid, [
    [UUID, true],
    ['00000000-0000-0000-0000-000000000000', true],
    ['FD41C918-B88B-4B20-A0A5-A4C32391AAA0', true],
    ['fd41c918-b88b-4b20-a0a5-a4c32391aaa', false],
    ['fd41c918_b88b-4b20-a0a5-a4c32391aaa0', false],
    ['gd41c918-b88b-4b20-a0a5-a4c32391aaa0', false],
    ['fd41c918-b88b4-b20-a0a5-a4c32391aaa0', false],
    ['fd41c918-b88b-4b20-a0a5-a4c32391aaé0', false],
    ['fd41c918-b88b-4b20-a0a5-a4c32391aaa0 ', false],
    [42, false],
  ]);
  table('isIri', isIri, [
    ['http://example.com', true],
    ['https://example.com/path?q=1#frag', true],
    ['urn:uuid:fd41c918-b88b-4b20-a0a5-a4c32391aaa0', true],
    ['mailto:a@example.com', true],
    ['tag:example.com,2005:x', true],
    ['http://example.com/%C3%A9', true],
    ['http://例え.jp/パス', true],
    ['ab=c://should.fail.com', false],
    ['should fail', false],
    ['/relative/path', false],
    ['#fragment', false],
    ['http://', false],
    ['http:', false],
    ['http:///path', false],
    ['http://example.com/a b', false],
    ['http://example.com/<x>', false],
    ['http://example.com/%zz', false],
    ['http://example.com/#a#b', false],
    ['1http://example.com', false],
    ['HTTP://example.com', true],
    ['hTtPs://example.com', true],
    ['HTTPS:///path', false],
    ['Http:example.com', false],
    ['httpx:example.com', true],
    ['http4:example.com', true],
    ['x:a%41b', true],
    ['x:a%4', false],
    ['x:a%', false],
    ['x:a\u007fb', false],
    ['x:a\u0085b', false],
    ['x:a\u00a0b', true],
    ['x:a|b', false],
    ['x:a^b', false],
    ['', false],
    [null, false],
  ]);
  table('isLanguageTag', isLanguageTag, [
    ['en', true],
    ['en-US', true],
    ['es-MX', true],
    ['tlh', true],
    ['zh-Hant-TW', true],
    ['es-419', true],
    ['sl-rozaj-biske', true],
    ['de-CH-1901', true],
    ['zh-min-nan', true],
    ['en-US-u-ca-gregory', true],
    ['en-a-bbb-x-a-ccc', true],
    ['x-private', true],
    ['i-klingon', true],
    ['en-GB-oed', true],
    ['EN-us', true],
    ['a12345', false],
    ['de-419-DE', false],
    ['en_US', false],
    ['en-', false],
    ['-en', false],
    ['e', false],
    ['toolonglanguage', false],
    ['sl-rozaj-rozaj', false],
    ['en-a-bb-a-cc', false],
    ['en-a', false],
    ['en-x', false],
    ['', false],
    [1, false],
  ]);
  table('isDuration', isDuration, [
    ['PT4H35M59.14S', true],
    ['PT16559.14S', true],
    ['P3Y1M29DT4H35M59.14S', true],
    ['P3Y', true],
    ['P4W', true],
    ['PT1H0M0.1S', true],
    ['PT1234S', true],
    ['P0D', true],
    ['PT0,5S', true],
    ['P0.5Y', true],
    ['P16559.14S', false],
    ['P4W1D', false],
    ['PA1H0M0S', false],
    ['P', false],
    ['PT', false],
    ['P1DT', false],
    ['PT1.5H30M', false],
    ['P1M1Y', false],
    ['PT1S1M', false],
    ['-PT1S', false],
    ['P0003-01-29T04:35:59', false],
    ['pt1s', false],
    ['should fail', false],
    [12345, false],
  ]);
  test('parseTimestamp agrees with Date.parse on valid extended timestamps', () => {
    for (const t of [
      '2013-05-18T05:32:34.804Z',
      '2013-05-18T05:32:34.804+00:00',
      '2016-02-29T23:59:59.999+05:30',
      '1970-01-01T00:00:00Z',
      '0001-01-01T00:00:00Z',
      '9999-12-31T23:59:59.999Z',
      '2000-03-01T12:00:00-08:00',
    ]) {
      assert.equal(parseTimestamp(t), Date.parse(t), t);
    }
  });
  table('parseTimestamp', parseTimestamp, [
    ['20130518T053234.804Z', Date.parse('2013-05-18T05:32:34.804Z')],
    ['2013-05-18T05:32:34,8Z', Date.parse('2013-05-18T05:32:34.800Z')],
    ['2013-05-18t05:32:34z', Date.parse('2013-05-18T05:32:34Z')],
    ['2013-05-18T05:32:34.8049999Z', Date.parse('2013-05-18T05:32:34.804Z')],
    ['2013-05-18T05:32Z', Date.parse('2013-05-18T05:32:00Z')],
    ['2013-05-18T05:32:34+0130', Date.parse('2013-05-18T05:32:34+01:30')],
    ['2013-05-18T05:32:34+01', Date.parse('2013-05-18T05:32:34+01:00')],
    ['2013-05-18T05:32:34', Date.parse('2013-05-18T05:32:34Z')],
    ['2013-05-18', undefined],
    ['05:32:34Z', undefined],
    ['2013-05-18 05:32:34Z', undefined],
    ['2013-05-18T05:32:34.Z', undefined],
    ['2013-05-18T24:00:00Z', undefined],
    ['2013-05-18T05:60:00Z', undefined],
    ['2013-13-18T05:32:34Z', undefined],
    ['2013-02-29T05:32:34Z', undefined],
    ['2013-05-18T05:32:34-00:00', undefined],
    ['2013-05-18T05:32:34+24:00', undefined],
    ['2013-05-18T0532Z', undefined],
    ['2013-05-18T05:32:34Zjunk', undefined],
    ['20130518T05:32:34Z', undefined],
    ['should fail', undefined],
    [1368855154804, undefined],
  ]);
  test('isTimestamp matches parseTimestamp', () => {
    assert.equal(isTimestamp('2013-05-18T05:32:34.804Z'), true);
    assert.equal(isTimestamp('2013-05-18'), false);
  });
});

describe('timestamps: the UTC range, and stored forms accepted back', () => {
  test('an instant outside years 0000-9999 in UTC is refused; the edges are accepted', () => {
    for (const ts of ['9999-12-31T23:59:59-23:59', '9999-12-31T23:00:00-01:00', '9999-12-31T23:59:60Z', '0000-01-01T00:00:00+00:01', '0000-01-01T00:59:59+01']) {
      assert.equal(parseTimestamp(ts), undefined, ts);
      assert.equal(timestampOutOfRange(ts), true, ts);
      const issues: ValidationIssue[] = [];
      validateStatement({ ...base(), timestamp: ts }, [0], issues, '2.0.0');
      assert.deepEqual(
        issues.map((i) => [i.loc, i.type]),
        [[[0, 'timestamp'], 'value_error.datetime_range']],
        ts,
      );
    }
    assert.equal(timestampOutOfRange('9999-13-01T00:00:00Z'), false, 'malformed is not out of range');
    for (const ts of ['0000-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59+23:59', '0000-01-01T23:59:59-00:01']) {
      assert.notEqual(parseTimestamp(ts), undefined, ts);
    }
  });

  test('every accepted timestamp is stored (as sent, or in UTC under 2.0) in a form parseTimestamp accepts, at the same instant', () => {
    const accepted = [
      '2013-05-18T05:32:34.804Z',
      '2013-05-18T05:32:34.804+09:00',
      '2013-05-18T05:32:34,8045-01:30',
      '20130518T053234.5+0100',
      '2013-05-18T05:32+02',
      '2013-05-18T05',
      '2016-12-31T23:59:60.5+01:00',
      '0000-01-01T23:59:59.123456789+23:59',
      '9999-12-31T00:00:00-23:59',
      '0500-03-01T00:30:00+01:00',
      '1969-12-31T23:59:59.999-00:01',
      '2013-05-18t05:32:34z',
    ];
    for (const ts of accepted) {
      const ms = parseTimestamp(ts);
      assert.notEqual(ms, undefined, ts);
      const utc = toUtc(ts);
      const stored = utc ?? ts;
      assert.equal(parseTimestamp(stored), ms, `${ts} → ${stored}`);
      if (utc !== undefined) assert.match(utc, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, ts);
    }
  });
});

describe('ValidationFailed: issues capped', () => {
  test('the first MAX_ISSUES, then one saying how many more; long keys clipped; rebuilt as it is', () => {
    const issues = Array.from({ length: 150 }, (_, i): ValidationIssue => ({ loc: [i, 'k'.repeat(1000)], msg: 'm'.repeat(1000), type: 't' }));
    const err = new ValidationFailed(issues, 7);
    assert.equal(err.issues!.length, MAX_ISSUES + 1);
    assert.deepEqual(err.issues![MAX_ISSUES], { loc: [], msg: 'and 57 more problems not listed', type: MORE_ISSUES });
    assert.ok((err.issues![0].loc[1] as string).length <= 201);
    assert.ok(err.message.length < 50_000);
    // As the SQLite writer thread's message is turned back into an error: unchanged.
    assert.deepEqual(new ValidationFailed(err.issues!).issues, err.issues);
    const { issues: listed, more } = validateStatements(Array(1000).fill({}), '1.0.3');
    assert.equal(listed.length, MAX_ISSUES);
    assert.equal(more, 2900);
  });
});
