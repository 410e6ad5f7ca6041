/**
 * A seedable generator of realistic xAPI statements (≈ 1.2 KB of JSON each). Statement `i` is a
 * pure function of (seed, i), so any process can generate any slice of the stream on its own —
 * the load-generator processes, the raw-database baselines and the query planner all see the
 * same data without passing it around.
 *
 * The mix: learners skewed towards a few very active ones, 60 % mbox / 33 % account / 7 % openid
 * agents, 5 % of statements by a Group (identified teams and anonymous groups), weighted verbs,
 * courses → modules → questions with full activity definitions, context activities (parent,
 * grouping, category), registrations per learner and course, results with scores and durations,
 * 0.5 % StatementRef comments and 0.3 % voidings of earlier statements.
 */

const LEARNERS = 20_000;
const COURSES = 40;
const MODULES_PER_COURSE = 8;
const QUESTIONS_PER_MODULE = 25;
const TEACHERS = 200;
const TEAMS = 300;
const START_MS = Date.UTC(2026, 0, 1);

export type Statement = Record<string, unknown> & { id: string };

/** 32-bit mix (lowbias32): turns (seed, i) into an independent stream start. */
function mix(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

/** mulberry32 seeded from (seed, i, salt). */
function rng(seed: number, i: number, salt = 0): () => number {
  let s = mix(mix(seed ^ 0x9e3779b9) ^ mix(i) ^ Math.imul(salt, 0x85ebca6b));
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HEX = '0123456789abcdef';
/** A v4-shaped UUID from a random source. */
function uuidFrom(r: () => number): string {
  let s = '';
  for (let k = 0; k < 32; k++) {
    let d = Math.floor(r() * 16);
    if (k === 12) d = 4;
    if (k === 16) d = 8 + (d & 3);
    s += HEX[d];
    if (k === 7 || k === 11 || k === 15 || k === 19) s += '-';
  }
  return s;
}

/** A stable UUID for a key (registrations: one per learner and course; statement ids). */
const keyedUuid = (seed: number, key: number, salt: number): string => uuidFrom(rng(seed, key, salt));

// ----- the population ---------------------------------------------------------------------

/** Learner n's agent: its IFI kind is fixed per learner. */
export function learner(n: number): Record<string, unknown> {
  const kind = n % 15;
  if (kind < 9) return { objectType: 'Agent', name: `Learner ${n}`, mbox: `mailto:learner${n}@example.com` };
  if (kind < 14) return { objectType: 'Agent', name: `Learner ${n}`, account: { homePage: 'https://lms.example.com', name: `u${100000 + n}` } };
  return { objectType: 'Agent', openid: `https://id.example.org/people/${n}` };
}

const teacher = (n: number) => ({ objectType: 'Agent', name: `Teacher ${n}`, mbox: `mailto:teacher${n}@example.com` });

function team(n: number, members: number[]): Record<string, unknown> {
  return { objectType: 'Group', name: `Team ${n}`, account: { homePage: 'https://lms.example.com/teams', name: `team-${n}` }, member: members.map(learner) };
}

const VERBS: [string, string, number][] = [
  ['http://adlnet.gov/expapi/verbs/answered', 'answered', 0.34],
  ['http://adlnet.gov/expapi/verbs/experienced', 'experienced', 0.18],
  ['http://adlnet.gov/expapi/verbs/attempted', 'attempted', 0.09],
  ['http://adlnet.gov/expapi/verbs/progressed', 'progressed', 0.08],
  ['http://adlnet.gov/expapi/verbs/completed', 'completed', 0.07],
  ['http://adlnet.gov/expapi/verbs/launched', 'launched', 0.05],
  ['http://adlnet.gov/expapi/verbs/passed', 'passed', 0.045],
  ['http://adlnet.gov/expapi/verbs/failed', 'failed', 0.025],
  ['http://adlnet.gov/expapi/verbs/initialized', 'initialized', 0.04],
  ['http://adlnet.gov/expapi/verbs/terminated', 'terminated', 0.03],
  ['https://w3id.org/xapi/video/verbs/played', 'played', 0.03],
  ...Array.from({ length: 10 }, (_, k): [string, string, number] => [`https://example.com/xapi/verbs/rare-${k}`, `rare ${k}`, 0.001]),
];
const VERB_TOTAL = VERBS.reduce((a, v) => a + v[2], 0);

export const VERB = {
  common: VERBS[0][0],
  failed: 'http://adlnet.gov/expapi/verbs/failed',
  rare: VERBS[VERBS.length - 3][0],
  voided: 'http://adlnet.gov/expapi/verbs/voided',
  commented: 'http://adlnet.gov/expapi/verbs/commented',
};

const courseIri = (c: number) => `https://courses.example.com/c/${c}`;
const moduleIri = (c: number, m: number) => `https://courses.example.com/c/${c}/m/${m}`;
export const questionIri = (c: number, m: number, q: number) => `https://courses.example.com/c/${c}/m/${m}/q/${q}`;
const programIri = (c: number) => `https://courses.example.com/programs/${c % 6}`;

function questionActivity(c: number, m: number, q: number): Record<string, unknown> {
  return {
    objectType: 'Activity',
    id: questionIri(c, m, q),
    definition: {
      name: { 'en-US': `Question ${q} of module ${m}, course ${c}` },
      description: { 'en-US': 'Which system stores learning records?' },
      type: 'http://adlnet.gov/expapi/activities/cmi.interaction',
      interactionType: 'choice',
      correctResponsesPattern: ['lrs'],
      choices: [
        { id: 'lrs', description: { 'en-US': 'A learning record store' } },
        { id: 'lms', description: { 'en-US': 'A learning management system' } },
        { id: 'cms', description: { 'en-US': 'A content management system' } },
      ],
    },
  };
}

function moduleActivity(c: number, m: number): Record<string, unknown> {
  return {
    objectType: 'Activity',
    id: moduleIri(c, m),
    definition: {
      name: { 'en-US': `Module ${m} of course ${c}`, 'fr-FR': `Module ${m} du cours ${c}` },
      description: { 'en-US': 'A self-paced module with a video, reading and a short quiz.' },
      type: 'http://adlnet.gov/expapi/activities/module',
      moreInfo: `https://courses.example.com/c/${c}/m/${m}/about`,
    },
  };
}

// ----- statements ---------------------------------------------------------------------------

type Kind = 'plain' | 'comment' | 'void';

/** The kind of statement i (the first draw of its stream, so it is cheap to ask for any i). */
function kindOf(seed: number, i: number): Kind {
  const r = rng(seed, i, 1)();
  if (i > 2000 && r < 0.003) return 'void';
  if (i > 2000 && r < 0.008) return 'comment';
  return 'plain';
}

/** Statement i's id. */
export const statementId = (seed: number, i: number): string => keyedUuid(seed, i, 2);

/** An earlier statement (1,000–3,000 back, so it is stored before i arrives) that is not a voiding one. */
function earlierPlain(seed: number, i: number, r: () => number): number {
  let j = i - 1000 - Math.floor(r() * 2000);
  while (j > 0 && kindOf(seed, j) === 'void') j--;
  return Math.max(j, 0);
}

interface LearnerCourse {
  learner: number;
  course: number;
}

/** Which learner acts in statement i, and in which course (skewed: a few learners are very active). */
function who(r: () => number): LearnerCourse {
  const l = Math.floor(LEARNERS * r() ** 2);
  return { learner: l, course: (l * 7 + Math.floor(r() * 3)) % COURSES };
}

const registrationOf = (seed: number, lc: LearnerCourse): string => keyedUuid(seed, lc.learner * COURSES + lc.course, 3);

/** Statement i of the stream `seed` (its timestamp grows with i, from 2026-01-01). */
export function statement(seed: number, i: number): Statement {
  const kind = kindOf(seed, i);
  const r = rng(seed, i, 4);
  const id = statementId(seed, i);
  const lc = who(r);
  const timestamp = new Date(START_MS + i * 997 + Math.floor(r() * 1000)).toISOString();
  const actor = learner(lc.learner);
  if (kind === 'void') {
    const target = earlierPlain(seed, i, r);
    return {
      id,
      actor: { objectType: 'Agent', name: 'LMS administrator', mbox: 'mailto:admin@example.com' },
      verb: { id: VERB.voided, display: { 'en-US': 'voided' } },
      object: { objectType: 'StatementRef', id: statementId(seed, target) },
      timestamp,
    };
  }
  if (kind === 'comment') {
    const target = earlierPlain(seed, i, r);
    return {
      id,
      actor,
      verb: { id: VERB.commented, display: { 'en-US': 'commented' } },
      object: { objectType: 'StatementRef', id: statementId(seed, target) },
      result: { response: 'I found this explanation useful; the second example could be clearer.' },
      context: { registration: registrationOf(seed, lc), language: 'en-US' },
      timestamp,
    };
  }
  let v = r() * VERB_TOTAL;
  let verb = VERBS[0];
  for (const candidate of VERBS) {
    if ((v -= candidate[2]) < 0) {
      verb = candidate;
      break;
    }
  }
  const m = Math.floor(r() * MODULES_PER_COURSE);
  const q = Math.floor(r() * QUESTIONS_PER_MODULE);
  const onQuestion = verb[1] === 'answered' || verb[1] === 'attempted' || (verb[1].startsWith('rare') && r() < 0.5);
  const object = onQuestion ? questionActivity(lc.course, m, q) : moduleActivity(lc.course, m);
  const groupRoll = r();
  const s: Statement = {
    id,
    actor:
      groupRoll < 0.03
        ? team(lc.learner % TEAMS, [lc.learner, (lc.learner + 1) % LEARNERS, (lc.learner + 2) % LEARNERS])
        : groupRoll < 0.05
          ? { objectType: 'Group', member: [actor, learner((lc.learner + 17) % LEARNERS)] }
          : actor,
    verb: { id: verb[0], display: { 'en-US': verb[1] } },
    object,
  };
  if (onQuestion || verb[1] === 'passed' || verb[1] === 'failed' || verb[1] === 'completed') {
    const raw = Math.floor(r() * 11);
    s.result = {
      score: { scaled: raw / 10, raw, min: 0, max: 10 },
      success: verb[1] === 'failed' ? false : raw >= 6,
      completion: true,
      ...(onQuestion && { response: ['lrs', 'lms', 'cms'][Math.floor(r() * 3)] }),
      duration: `PT${Math.floor(r() * 600)}.${Math.floor(r() * 10)}S`,
    };
  } else if (verb[1] === 'progressed' || verb[1] === 'played' || verb[1] === 'experienced') {
    s.result = {
      duration: `PT${Math.floor(r() * 1800)}S`,
      extensions: { 'https://w3id.org/xapi/cmi5/result/extensions/progress': Math.floor(r() * 100) },
    };
  }
  const contextActivities: Record<string, unknown> = {
    ...(onQuestion ? { parent: [{ objectType: 'Activity', id: moduleIri(lc.course, m) }] } : {}),
    grouping: [{ objectType: 'Activity', id: courseIri(lc.course) }, { id: programIri(lc.course) }],
  };
  if (r() < 0.5) contextActivities.category = [{ id: 'https://w3id.org/xapi/cmi5/context/categories/moveon' }];
  const context: Record<string, unknown> = {
    registration: r() < 0.92 ? registrationOf(seed, lc) : undefined,
    contextActivities,
    platform: 'Example LMS',
    language: 'en-US',
    extensions: {
      'https://w3id.org/xapi/cmi5/context/extensions/sessionid': keyedUuid(seed, i >> 4, 5),
    },
  };
  if (context.registration === undefined) delete context.registration;
  if (r() < 0.1) context.instructor = teacher(Math.floor(r() * TEACHERS));
  if (s.actor !== actor && (s.actor as { objectType: string; member: unknown[] }).member.length === 3) context.team = s.actor;
  s.context = context;
  s.timestamp = timestamp;
  return s;
}

/** A statement for the single-statement workloads: from a separate range of the stream. */
export const SINGLES_FROM = 1_000_000_000;

/** Average serialised size over a sample (bytes of UTF-8 JSON). */
export function averageSize(seed: number, from: number, n: number): number {
  let bytes = 0;
  for (let i = from; i < from + n; i++) bytes += Buffer.byteLength(JSON.stringify(statement(seed, i)));
  return bytes / n;
}

/**
 * Filters the query workloads use, with values taken from the first 2,000 statements of the
 * stream, so each matches something at every size the benchmark loads.
 */
export function queryFilters(seed: number): Record<string, Record<string, string>> {
  const ifi = (a: Record<string, unknown>) => {
    const { objectType: _o, name: _n, ...rest } = a;
    return JSON.stringify(rest);
  };
  let rare: Record<string, unknown> | undefined;
  let rareNumber = -1;
  let busy: Statement | undefined;
  for (let i = 0; i < 2000; i++) {
    const s = statement(seed, i);
    const actor = s.actor as Record<string, unknown>;
    const n = Number(/^Learner (\d+)$/.exec(String(actor.name ?? ''))?.[1] ?? -1);
    if (actor.account && n > rareNumber) {
      rareNumber = n;
      rare = actor;
    }
    if (!busy && n === 0 && (s.verb as { id: string }).id === VERB.common) busy = s;
  }
  if (!busy || !rare) throw new Error(`seed ${seed}: no statement of the busy learner among the first 2,000`);
  const question = (busy.object as { id: string }).id;
  const context = busy.context as { registration: string; contextActivities: { parent: { id: string }[] } };
  const agent = ifi(learner(0));
  return {
    plain: {},
    'agent (busy learner)': { agent },
    'agent (rare, account)': { agent: ifi(rare) },
    'agent + related_agents': { agent: ifi(learner(1)), related_agents: 'true' },
    'verb (34 %)': { verb: VERB.common },
    'verb (rare, 0.1 %)': { verb: VERB.rare },
    'activity (one question)': { activity: question },
    'activity + related_activities (a course)': { activity: courseIri(3), related_activities: 'true' },
    registration: { registration: context.registration },
    'agent + verb + activity': { agent, verb: VERB.common, activity: context.contextActivities.parent[0].id, related_activities: 'true' },
  };
}

/**
 * Whether any statement i of [from, to) mentions every string value of a query's parameters (its
 * JSON holds them all): a filter that matches nothing in a pruned store is right to when none
 * does. A superset of what the filter matches (related agents and activities included).
 */
export function streamMentions(seed: number, from: number, to: number, params: Record<string, string>): boolean {
  const leaves: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') leaves.push(v);
    else if (v && typeof v === 'object') for (const x of Object.values(v)) walk(x);
  };
  for (const [k, v] of Object.entries(params)) {
    if (['limit', 'since', 'until', 'related_agents', 'related_activities'].includes(k)) continue;
    try {
      walk(v.startsWith('{') ? JSON.parse(v) : v);
    } catch {
      walk(v);
    }
  }
  for (let i = from; i < to; i++) {
    const json = JSON.stringify(statement(seed, i));
    if (leaves.every((l) => json.includes(JSON.stringify(l)))) return true;
  }
  return false;
}
