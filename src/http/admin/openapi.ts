/**
 * The OpenAPI description of the admin API's routes (./index.ts), merged into /openapi.json by
 * ../xapi/openapi.ts. Every route needs an admin role (docs/admin-api.md): 403 with xAPI scopes only.
 */
type Json = Record<string, unknown>;

const jsonContent = (schema: Json): Json => ({ 'application/json': { schema } });
const response = (name: string): Json => ({ $ref: `#/components/responses/${name}` });
const TAGS = ['Admin'];

/** The refusals every admin route may answer. */
const REFUSALS: Json = {
  '400': response('BadRequest'),
  '401': response('Unauthorized'),
  '403': {
    description: "The credentials hold no admin scope, or a store administrator asked for what is the operator's",
    content: jsonContent({ $ref: '#/components/schemas/Error' }),
  },
  '429': {
    description: 'Too many failed admin sign-ins from this address or for this user: try again after Retry-After seconds',
    content: jsonContent({ $ref: '#/components/schemas/Error' }),
  },
};
const NOT_FOUND: Json = {
  '404': { description: 'No such store (a store administrator gets this for any store but its own)', content: jsonContent({ $ref: '#/components/schemas/Error' }) },
};

const query = (name: string, description: string, schema: Json = { type: 'string' }): Json => ({ name, in: 'query', required: false, description, schema });
const TARGET = query('target', 'The store (its key; empty: the default store). A store administrator may name only its own.');

const op = (summary: string, description: string, ok: Json, extra: Json = {}, status = '200'): Json => ({
  tags: TAGS,
  summary,
  description,
  ...extra,
  responses: { [status]: { description: 'Done', content: jsonContent(ok) }, ...REFUSALS, ...((extra.responses as Json | undefined) ?? {}) },
});

const body = (properties: Json, required: string[] = []): Json => ({ required: true, content: jsonContent({ type: 'object', additionalProperties: false, properties, required }) });

const storeSummary: Json = {
  type: 'object',
  properties: {
    target: { type: 'string' },
    statements: { type: 'integer', description: 'Statements kept, voided ones included' },
    documents: { type: 'integer' },
    lastStored: { type: ['string', 'null'], format: 'date-time' },
  },
};
const auditEntry: Json = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    time: { type: 'string', format: 'date-time' },
    actor: { type: 'string' },
    actorKind: {
      type: 'string',
      enum: ['file-user', 'database-key', 'token-subject', 'os-user', 'unknown'],
      description: 'What `actor` names (unknown: recorded before kinds were)',
    },
    role: { type: 'string', enum: ['operator', 'store'] },
    via: { type: 'string', enum: ['http', 'cli'] },
    client: { type: 'string', description: "The client's address" },
    action: { type: 'string' },
    target: { type: ['string', 'null'], description: 'The store acted on; null: the server as a whole' },
    details: { type: 'object' },
  },
};
const erasureReport: Json = {
  type: 'object',
  properties: {
    action: { type: 'string', enum: ['erase', 'pseudonymize'] },
    dryRun: { type: 'boolean' },
    target: { type: 'string' },
    statements: { type: 'integer' },
    referring: { type: 'integer' },
    attachments: { type: 'integer' },
    documents: { type: 'integer' },
    rejections: { type: 'integer', description: 'Kept rejections mentioning the person' },
    complete: { type: 'boolean' },
  },
};

const credential: Json = {
  type: 'object',
  properties: {
    key: { type: 'string' },
    label: { type: 'string' },
    scopes: { type: 'array', items: { type: 'string' } },
    target: { type: 'string' },
    agent: { $ref: '#/components/schemas/Agent' },
    validation: { type: 'string', enum: ['strict', 'lax'] },
    created: { type: 'string', format: 'date-time' },
    expires: { type: 'string', format: 'date-time' },
    lastUsed: { type: 'string', format: 'date-time' },
    revoked: { type: 'string', format: 'date-time' },
    previousSecretUntil: { type: 'string', format: 'date-time' },
  },
};
const issued: Json = { allOf: [credential, { type: 'object', properties: { secret: { type: 'string', description: 'Shown this once: it is stored only as its SHA-256' } } }] };
const KEY: Json = { name: 'key', in: 'path', required: true, description: "The credential's key", schema: { type: 'string' } };
const UNKNOWN_KEY: Json = {
  '404': {
    description: "No such key; a store administrator gets this too for another store's, and for an administrator's credential but its own (docs/admin-api.md)",
    content: jsonContent({ $ref: '#/components/schemas/Error' }),
  },
};

const rejection: Json = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    target: { type: 'string' },
    time: { type: 'string', format: 'date-time' },
    username: { type: 'string' },
    method: { type: 'string' },
    path: { type: 'string' },
    query: { type: 'object' },
    status: { type: 'integer' },
    reasons: { type: 'array', items: { type: 'object' } },
    headers: { type: 'object' },
    version: { type: 'string' },
    bodyBytes: { type: 'integer' },
    bodyCut: { type: 'boolean' },
    body: { description: 'show only: the body kept, as JSON when it parses' },
  },
};
const ID: Json = { name: 'id', in: 'path', required: true, description: "The kept rejection's id", schema: { type: 'string' } };

export const ADMIN_PATHS: Record<string, Json> = {
  '/admin/api/status': {
    get: op('Server status (operator)', 'Version, backend, xAPI versions served, uptime, and the statements this process stored per minute over the last minutes.', {
      type: 'object',
      properties: {
        version: { type: 'string' },
        backend: { type: 'string' },
        xapiVersions: { type: 'array', items: { type: 'string' } },
        startedAt: { type: 'string', format: 'date-time' },
        uptimeSeconds: { type: 'integer' },
        ingest: { type: 'array', items: { type: 'object', properties: { minute: { type: 'string', format: 'date-time' }, statements: { type: 'integer' } } } },
      },
    }),
  },
  '/admin/api/stores': {
    get: op(
      'Stores and their figures',
      'An operator sees every store, a store administrator its own.',
      { type: 'object', properties: { stores: { type: 'array', items: storeSummary } } },
      {
        parameters: [TARGET],
        responses: NOT_FOUND,
      },
    ),
  },
  '/admin/api/overview': {
    get: op(
      "A store's overview",
      "Statements in total and per UTC day of the last 30 days, the top verbs of those days and the statements of every other verb, the ingest rate (every process counted), the newest statement's time, the rejections of the last day; for the operator also forwarding (server-wide) and every store's totals. From counts kept as statements are written: no scan of the statements.",
      {
        type: 'object',
        properties: {
          target: { type: 'string' },
          now: { type: 'string', format: 'date-time' },
          statements: { type: 'integer', description: 'Statements kept, voided ones included' },
          lastStored: { type: ['string', 'null'], format: 'date-time' },
          days: {
            type: 'array',
            description: 'The last 30 UTC days, oldest first, today last',
            items: { type: 'object', properties: { date: { type: 'string', format: 'date' }, statements: { type: 'integer' } } },
          },
          topVerbs: { type: 'array', items: { type: 'object', properties: { verb: { type: 'string' }, statements: { type: 'integer' } } } },
          otherVerbs: {
            type: 'integer',
            description: 'Statements of those days whose verb is not in topVerbs (a store and day counts 100 verbs apart at most, the rest together)',
          },
          ingest: {
            type: 'object',
            properties: {
              perMinute: { type: 'number', description: 'The mean of the last 5 complete minutes' },
              minutes: { type: 'array', items: { type: 'object', properties: { minute: { type: 'string', format: 'date-time' }, statements: { type: 'integer' } } } },
            },
          },
          rejectionsLastDay: { type: 'integer' },
          forwarding: {
            type: 'object',
            description: "The operator's only",
            properties: {
              queued: { type: 'integer' },
              dead: { type: 'integer' },
              lagMs: { type: ['integer', 'null'] },
              targets: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    target: { type: 'string' },
                    active: { type: 'boolean' },
                    queued: { type: 'integer' },
                    dead: { type: 'integer' },
                    lagMs: { type: ['integer', 'null'] },
                  },
                },
              },
            },
          },
          stores: {
            type: 'array',
            description: "The operator's only: every store with statements",
            items: {
              type: 'object',
              properties: { target: { type: 'string' }, statements: { type: 'integer' }, recent: { type: 'integer', description: 'Statements of the last 30 days' } },
            },
          },
        },
      },
      { parameters: [TARGET], responses: NOT_FOUND },
    ),
  },
  '/admin/api/forwarding': {
    get: op('Forwarding status per target (operator)', "Queued, delivered, retried and dead items of each target, and the newest dead letter's error.", {
      type: 'object',
      properties: {
        targets: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              target: { type: 'string' },
              active: { type: 'boolean' },
              queued: { type: 'integer' },
              delivered: { type: 'integer' },
              retried: { type: 'integer' },
              dead: { type: 'integer' },
              lastError: { type: 'string' },
            },
          },
        },
      },
    }),
  },
  '/admin/api/forwarding/dead-letters': {
    get: op(
      'Dead letters (operator)',
      "Oldest first: which statement of which store, for which target, after how many attempts, and the last error. `more`: the next page's URL, or empty.",
      {
        type: 'object',
        properties: {
          deadLetters: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                id: { type: 'string' },
                target: { type: 'string' },
                store: { type: 'string' },
                statementId: { type: 'string', format: 'uuid' },
                attempts: { type: 'integer' },
                lastError: { type: ['string', 'null'] },
              },
            },
          },
          more: { type: 'string' },
        },
      },
      {
        parameters: [
          query('url', "Only this target's"),
          query('after', 'Only items after this id (the next page)', { type: 'integer', minimum: 0 }),
          query('limit', 'Dead letters per page', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }),
        ],
      },
    ),
  },
  '/admin/api/forwarding/retry': {
    post: op(
      'Re-queue dead letters (operator; audited)',
      'Of every target, or of `url`.',
      { type: 'object', properties: { requeued: { type: 'integer' } } },
      {
        requestBody: body({ url: { type: 'string', description: "One target's url" } }),
        responses: { '404': { description: 'Not a target', content: jsonContent({ $ref: '#/components/schemas/Error' }) } },
      },
    ),
  },
  '/admin/api/erase': {
    post: op(
      'Erase or pseudonymize a learner (audited)',
      'A dry run (counts only) unless `dryRun` is false. A run is recorded in the audit log and in LECTERN_AUDIT_FILE, as `lectern erase` records it.',
      erasureReport,
      {
        requestBody: body(
          {
            target: { type: 'string', description: "The store; a store administrator's own by default, the default store for an operator" },
            agent: { $ref: '#/components/schemas/Actor' },
            dryRun: { type: 'boolean', default: true },
            pseudonymize: { type: 'boolean', default: false, description: 'Replace by a keyed pseudonym (LECTERN_PSEUDONYMIZE_KEY) instead of erasing' },
          },
          ['agent'],
        ),
        responses: NOT_FOUND,
      },
    ),
  },
  '/admin/api/credentials': {
    get: op(
      'Credentials kept in the database',
      "Never a secret. An operator sees every store's (or `target`'s), a store administrator its own store's.",
      { type: 'object', properties: { credentials: { type: 'array', items: credential } } },
      {
        parameters: [TARGET],
        responses: NOT_FOUND,
      },
    ),
    post: op(
      'Create a credential (audited)',
      'Its secret is in this answer and nowhere else. A store administrator creates in its own store only, and may not give the admin scope.',
      issued,
      {
        requestBody: body(
          {
            scopes: { type: 'array', items: { type: 'string' } },
            agent: { $ref: '#/components/schemas/Agent' },
            target: { type: 'string' },
            key: { type: 'string', description: 'A key of your choosing; default: generated' },
            label: { type: 'string' },
            expires: { type: 'string', description: 'ISO 8601 date or date-time with a zone' },
            validation: { type: 'string', enum: ['strict', 'lax'] },
          },
          ['scopes', 'agent'],
        ),
        responses: { ...NOT_FOUND, '409': { description: 'The key exists, or is a user of the credentials file', content: jsonContent({ $ref: '#/components/schemas/Error' }) } },
      },
      '201',
    ),
  },
  '/admin/api/credentials/{key}/revoke': {
    post: op('Revoke a credential (audited)', 'Every server refuses it within LECTERN_AUTH_CREDENTIALS_REFRESH.', credential, { parameters: [KEY], responses: UNKNOWN_KEY }),
  },
  '/admin/api/credentials/{key}/rotate': {
    post: op('Give a credential a new secret (audited)', 'The new secret is in this answer only; with `grace`, the old one works that many seconds more.', issued, {
      parameters: [KEY],
      requestBody: { ...body({ grace: { type: 'integer', minimum: 0, default: 0 } }), required: false },
      responses: { ...UNKNOWN_KEY, '409': { description: 'The credential is revoked', content: jsonContent({ $ref: '#/components/schemas/Error' }) } },
    }),
  },
  '/admin/api/rejections': {
    get: op(
      'Kept rejections (refused writes)',
      "Oldest first, without their bodies. An operator sees every store's (or `target`'s), a store administrator its own store's.",
      { type: 'object', properties: { rejections: { type: 'array', items: rejection } } },
      {
        parameters: [
          TARGET,
          query('since', 'Only those kept at or after this time', { type: 'string', format: 'date-time' }),
          query('reason', 'A reason type, or its prefix up to a dot (value_error finds value_error.iri)'),
          query('limit', 'At most this many', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }),
        ],
        responses: NOT_FOUND,
      },
    ),
  },
  '/admin/api/rejections/{id}': {
    get: op('One kept rejection, with its body', '', rejection, {
      parameters: [ID],
      responses: { '404': { description: "No such id (a store administrator gets this for another store's)", content: jsonContent({ $ref: '#/components/schemas/Error' }) } },
    }),
  },
  '/admin/api/rejections/replay': {
    post: op(
      'Replay kept rejections (audited)',
      'Each through the path a new request takes, under the credential it came with while it still holds the grant it wrote with: accepted ones are stored and removed, refused ones stay with their new reasons, those whose writer no longer holds it are skipped (the reason in `writer`) unless `overrideWriter`; those another replay under way holds are left to it (`claimed`).',
      {
        type: 'object',
        properties: {
          results: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                id: { type: 'string' },
                outcome: { type: 'string', enum: ['stored', 'refused', 'not_replayable', 'skipped', 'claimed'] },
                status: { type: 'integer' },
                reasons: { type: 'array', items: { type: 'object' } },
                writer: { type: 'string' },
              },
            },
          },
          replayed: { type: 'integer' },
          stored: { type: 'integer' },
          refused: { type: 'integer' },
          notReplayable: { type: 'integer' },
          skipped: { type: 'integer' },
          claimed: { type: 'integer', description: 'Left to another replay under way, which holds them' },
        },
      },
      {
        requestBody: body({
          ids: { type: 'array', items: { type: 'string' } },
          all: { type: 'boolean', description: 'Every kept rejection (of `target`; a store administrator: of its store)' },
          target: { type: 'string' },
          validation: { type: 'string', enum: ['strict', 'lax'], description: "Instead of the credential's" },
          overrideWriter: { type: 'boolean', description: 'Replay too those whose writer no longer holds the grant it wrote with (audited)' },
        }),
        responses: NOT_FOUND,
      },
    ),
  },
  '/admin/api/rejections/clear': {
    post: op(
      'Remove kept rejections (audited)',
      'Of one store (`target`; a store administrator: its own), or with `all` (operator) of every store.',
      { type: 'object', properties: { cleared: { type: 'integer' } } },
      {
        requestBody: body({ target: { type: 'string' }, all: { type: 'boolean' } }),
        responses: NOT_FOUND,
      },
    ),
  },
  '/admin/api/audit': {
    get: op(
      'The audit log of admin actions',
      "Newest first. A store administrator sees its own store's entries only. `more`: the next page's URL, or empty.",
      {
        type: 'object',
        properties: { entries: { type: 'array', items: auditEntry }, more: { type: 'string' } },
      },
      {
        parameters: [
          TARGET,
          query('action', 'Only this action, e.g. erase, forwarding.retry'),
          query('actor', 'Only this user'),
          query('since', 'Only entries at or after this time', { type: 'string', format: 'date-time' }),
          query('until', 'Only entries at or before this time', { type: 'string', format: 'date-time' }),
          query('limit', 'Entries per page', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }),
          query('before', 'Only entries older than this id (the next page)', { type: 'integer', minimum: 1 }),
        ],
        responses: NOT_FOUND,
      },
    ),
  },
};
