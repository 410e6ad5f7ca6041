/** The schemas of the OpenAPI description (./openapi.ts): the xAPI objects, errors and the views' bodies. */
export type Json = Record<string, unknown>;

export const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });

/** Schemas of bodies; the server validates statements by xAPI-Data §2 (src/xapi/validate.ts). */
export const SCHEMAS: Record<string, Json> = {
  Error: {
    type: 'object',
    required: ['detail'],
    properties: {
      detail: {
        oneOf: [
          { type: 'string' },
          {
            type: 'array',
            items: { type: 'object', properties: { loc: { type: 'array', items: { type: ['string', 'integer'] } }, msg: { type: 'string' }, type: { type: 'string' } } },
          },
        ],
      },
    },
  },
  LanguageMap: { type: 'object', additionalProperties: { type: 'string' }, description: 'RFC 5646 language tag → text' },
  Account: { type: 'object', required: ['homePage', 'name'], properties: { homePage: { type: 'string', format: 'iri' }, name: { type: 'string' } } },
  Agent: {
    type: 'object',
    description: 'Exactly one identifier: mbox, mbox_sha1sum, openid or account',
    properties: {
      objectType: { const: 'Agent' },
      name: { type: 'string' },
      mbox: { type: 'string', pattern: '^mailto:' },
      mbox_sha1sum: { type: 'string', pattern: '^[0-9a-fA-F]{40}$' },
      openid: { type: 'string', format: 'uri' },
      account: ref('Account'),
    },
  },
  Group: {
    type: 'object',
    required: ['objectType'],
    description: 'An anonymous Group lists members; an identified Group has one identifier, as an Agent',
    properties: {
      objectType: { const: 'Group' },
      name: { type: 'string' },
      member: { type: 'array', items: ref('Agent') },
      mbox: { type: 'string' },
      mbox_sha1sum: { type: 'string' },
      openid: { type: 'string' },
      account: ref('Account'),
    },
  },
  Actor: { oneOf: [ref('Agent'), ref('Group')] },
  Verb: { type: 'object', required: ['id'], properties: { id: { type: 'string', format: 'iri' }, display: ref('LanguageMap') } },
  Activity: {
    type: 'object',
    required: ['id'],
    properties: {
      objectType: { const: 'Activity' },
      id: { type: 'string', format: 'iri' },
      definition: {
        type: 'object',
        properties: {
          name: ref('LanguageMap'),
          description: ref('LanguageMap'),
          type: { type: 'string', format: 'iri' },
          moreInfo: { type: 'string', format: 'iri' },
          interactionType: { type: 'string' },
          correctResponsesPattern: { type: 'array', items: { type: 'string' } },
          extensions: { type: 'object' },
        },
      },
    },
  },
  StatementRef: { type: 'object', required: ['objectType', 'id'], properties: { objectType: { const: 'StatementRef' }, id: { type: 'string', format: 'uuid' } } },
  Attachment: {
    type: 'object',
    required: ['usageType', 'display', 'contentType', 'length', 'sha2'],
    properties: {
      usageType: { type: 'string', format: 'iri' },
      display: ref('LanguageMap'),
      description: ref('LanguageMap'),
      contentType: { type: 'string' },
      length: { type: 'integer', minimum: 0 },
      sha2: { type: 'string' },
      fileUrl: { type: 'string', format: 'iri' },
    },
  },
  Statement: {
    type: 'object',
    required: ['actor', 'verb', 'object'],
    description: "An xAPI 1.0.3 statement (xAPI-Data §2.4); the LRS sets stored, authority (the user's agent), version, id and timestamp when absent.",
    properties: {
      id: { type: 'string', format: 'uuid' },
      actor: ref('Actor'),
      verb: ref('Verb'),
      object: { description: 'An Activity, Agent, Group, StatementRef or SubStatement', type: 'object' },
      result: {
        type: 'object',
        properties: {
          score: { type: 'object', properties: { scaled: { type: 'number', minimum: -1, maximum: 1 }, raw: { type: 'number' }, min: { type: 'number' }, max: { type: 'number' } } },
          success: { type: 'boolean' },
          completion: { type: 'boolean' },
          response: { type: 'string' },
          duration: { type: 'string', description: 'ISO 8601 duration' },
          extensions: { type: 'object' },
        },
      },
      context: {
        type: 'object',
        properties: {
          registration: { type: 'string', format: 'uuid' },
          instructor: ref('Actor'),
          team: ref('Group'),
          contextActivities: { type: 'object' },
          revision: { type: 'string' },
          platform: { type: 'string' },
          language: { type: 'string' },
          statement: ref('StatementRef'),
          extensions: { type: 'object' },
        },
      },
      timestamp: { type: 'string', format: 'date-time' },
      stored: { type: 'string', format: 'date-time' },
      authority: ref('Actor'),
      version: { type: 'string' },
      attachments: { type: 'array', items: ref('Attachment') },
    },
  },
  StatementResult: {
    type: 'object',
    required: ['statements', 'more'],
    properties: { statements: { type: 'array', items: ref('Statement') }, more: { type: 'string', description: 'Relative URL of the next page, or empty' } },
  },
  Person: {
    type: 'object',
    properties: {
      objectType: { const: 'Person' },
      name: { type: 'array', items: { type: 'string' } },
      mbox: { type: 'array', items: { type: 'string' } },
      mbox_sha1sum: { type: 'array', items: { type: 'string' } },
      openid: { type: 'array', items: { type: 'string' } },
      account: { type: 'array', items: ref('Account') },
    },
  },
};
