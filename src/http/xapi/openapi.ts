/**
 * The OpenAPI 3.1 description of every route the server registers (GET /openapi.json) and the
 * interactive documentation page (GET /docs, Swagger UI served from the npm package: no CDN).
 * Query parameters come from the table the server parses with (src/xapi/params.ts). A route
 * without a description here is listed under `x-undescribed` (and logged at start-up); the test
 * suite requires that list to be empty.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { type Method, type ParamSpec, RESOURCES, acceptedBy, requiredBy } from '../../xapi/params.ts';
import { KNOWN_VERSIONS } from '../../xapi/versions.ts';
import { ADMIN_PATHS } from '../admin/openapi.ts';
import { type Json, ref, SCHEMAS } from './openapi-schemas.ts';

const jsonContent = (schema: Json): Json => ({ 'application/json': { schema } });

/** The schema of a query parameter of each kind. */
function paramSchema(p: ParamSpec): Json {
  switch (p.kind) {
    case 'iri':
      return { type: 'string', format: 'iri' };
    case 'uuid':
      return { type: 'string', format: 'uuid' };
    case 'timestamp':
      return { type: 'string', format: 'date-time' };
    case 'int':
      return { type: 'integer', minimum: 0, ...(p.default && { default: Number(p.default) }) };
    case 'bool':
      return { type: 'boolean', ...(p.default && { default: p.default === 'true' }) };
    case 'enum':
      return { type: 'string', enum: p.values, ...(p.default && { default: p.default }) };
    case 'id':
      return { type: 'string', minLength: 1 };
    case 'cursor':
      return { type: 'string', format: 'uuid' };
    case 'token':
    case 'agent':
      return { type: 'string' };
  }
}

function queryParameter(p: ParamSpec, method: Method): Json {
  const base = { name: p.name, in: 'query', required: requiredBy(p, method), description: p.description };
  // An agent is JSON inside the query string: OpenAPI's `content` form says so.
  if (p.kind === 'agent') return { ...base, content: jsonContent(ref(p.agentOnly ? 'Agent' : 'Actor')) };
  return { ...base, schema: paramSchema(p) };
}

const VERSION_HEADER = { $ref: '#/components/parameters/XapiVersion' };
const ERRORS: Record<string, Json> = {
  '400': { $ref: '#/components/responses/BadRequest' },
  '401': { $ref: '#/components/responses/Unauthorized' },
  '403': { $ref: '#/components/responses/Forbidden' },
  '429': { $ref: '#/components/responses/TooManyRequests' },
};
const etagHeaders = { ETag: { schema: { type: 'string' }, description: 'Quoted SHA-1 of the content' } };
const documentBody = { required: true, content: { 'application/json': { schema: { type: 'object' } }, '*/*': { schema: { type: 'string', format: 'binary' } } } };
const preconditions = [
  { name: 'If-Match', in: 'header', schema: { type: 'string' }, description: 'Write only if the current ETag is one of these (412 otherwise).' },
  { name: 'If-None-Match', in: 'header', schema: { type: 'string' }, description: '`*`: write only if no document exists (412 otherwise).' },
];

/** What each xAPI resource method does and answers, beyond its parameters. */
const XAPI_OPERATIONS: Record<string, Partial<Record<Method, Json>>> = {
  '/xAPI/statements': {
    GET: {
      summary: 'Get one statement or query statements',
      description: 'With statementId/voidedStatementId: that statement (404 if absent). Otherwise a page of matching statements, newest first, and a `more` link to the next page.',
      parameters: [{ name: 'Accept-Language', in: 'header', schema: { type: 'string' }, description: 'Languages for format=canonical' }],
      responses: {
        '200': {
          description: 'A statement, or a StatementResult; multipart/mixed with attachments=true',
          headers: { 'X-Experience-API-Consistent-Through': { schema: { type: 'string', format: 'date-time' } } },
          content: { 'application/json': { schema: { oneOf: [ref('Statement'), ref('StatementResult')] } }, 'multipart/mixed': { schema: { type: 'string', format: 'binary' } } },
        },
        '404': { $ref: '#/components/responses/NotFound' },
      },
    },
    HEAD: { summary: 'As GET, headers only', responses: { '200': { description: 'The headers a GET would send' }, '404': { $ref: '#/components/responses/NotFound' } } },
    PUT: {
      summary: 'Store one statement under the given id',
      requestBody: {
        required: true,
        content: {
          'application/json': { schema: ref('Statement') },
          'multipart/mixed': { schema: { type: 'string', format: 'binary', description: "The statement, then each attachment's data in a part with X-Experience-API-Hash" } },
        },
      },
      responses: {
        '204': { description: 'Stored (or already stored, identical)' },
        '409': { $ref: '#/components/responses/Conflict' },
        '413': { $ref: '#/components/responses/TooLarge' },
      },
    },
    POST: {
      summary: 'Store one or many statements',
      requestBody: {
        required: true,
        content: {
          'application/json': { schema: { oneOf: [ref('Statement'), { type: 'array', items: ref('Statement') }] } },
          'multipart/mixed': { schema: { type: 'string', format: 'binary', description: "The statements, then each attachment's data in a part with X-Experience-API-Hash" } },
        },
      },
      responses: {
        '200': { description: 'The ids of the statements, in order', content: jsonContent({ type: 'array', items: { type: 'string', format: 'uuid' } }) },
        '409': { $ref: '#/components/responses/Conflict' },
        '413': { $ref: '#/components/responses/TooLarge' },
      },
    },
  },
  ...Object.fromEntries(
    (['state', 'activityProfile', 'agentProfile'] as const).map((r) => [
      RESOURCES[r].path,
      {
        GET: {
          summary: `Get a ${RESOURCES[r].name} document, or list document ids`,
          responses: {
            '200': {
              description: 'The document as stored (with its Content-Type), or a JSON array of ids',
              headers: { ...etagHeaders, 'Last-Modified': { schema: { type: 'string' } } },
              content: { '*/*': { schema: {} } },
            },
            '404': { $ref: '#/components/responses/NotFound' },
          },
        },
        HEAD: { summary: 'As GET, headers only', responses: { '200': { description: 'The headers a GET would send' }, '404': { $ref: '#/components/responses/NotFound' } } },
        PUT: {
          summary: `Store a ${RESOURCES[r].name} document (replacing it)`,
          parameters: preconditions,
          requestBody: documentBody,
          responses: {
            '204': { description: 'Stored', headers: etagHeaders },
            '409': { $ref: '#/components/responses/Conflict' },
            '412': { $ref: '#/components/responses/PreconditionFailed' },
            '413': { $ref: '#/components/responses/TooLarge' },
          },
        },
        POST: {
          summary: `Merge a JSON object into a ${RESOURCES[r].name} document (or create it)`,
          parameters: preconditions,
          requestBody: documentBody,
          responses: {
            '204': { description: 'Stored', headers: etagHeaders },
            '412': { $ref: '#/components/responses/PreconditionFailed' },
            '413': { $ref: '#/components/responses/TooLarge' },
          },
        },
        DELETE: {
          summary: r === 'state' ? 'Delete a State document, or every document of the activity and agent' : `Delete a ${RESOURCES[r].name} document`,
          parameters: preconditions,
          responses: { '204': { description: 'Deleted (or there was none)' }, '412': { $ref: '#/components/responses/PreconditionFailed' } },
        },
      },
    ]),
  ),
  '/xAPI/activities': {
    GET: {
      summary: 'The Activity with the definition the LRS has assembled',
      responses: { '200': { description: 'The Activity', headers: etagHeaders, content: jsonContent(ref('Activity')) } },
    },
    HEAD: { summary: 'As GET, headers only', responses: { '200': { description: 'The headers a GET would send' } } },
  },
  '/xAPI/agents': {
    GET: { summary: 'The Person object of an Agent', responses: { '200': { description: 'The Person', headers: etagHeaders, content: jsonContent(ref('Person')) } } },
    HEAD: { summary: 'As GET, headers only', responses: { '200': { description: 'The headers a GET would send' } } },
  },
  '/xAPI/about': {
    GET: {
      summary: 'Supported xAPI versions (no credentials needed)',
      security: [],
      responses: {
        '200': {
          description: 'About',
          content: jsonContent({ type: 'object', properties: { version: { type: 'array', items: { type: 'string' } }, extensions: { type: 'object' } } }),
        },
      },
    },
    HEAD: { summary: 'As GET, headers only', security: [], responses: { '200': { description: 'The headers a GET would send' } } },
  },
};

const healthCheck = (summary: string, body: Json): Json => ({
  get: {
    tags: ['Operations'],
    summary,
    security: [],
    responses: { '200': { description: 'Up', content: jsonContent(body) }, '500': { description: 'The database does not answer', content: jsonContent(body) } },
  },
});

/** /heartbeat's body: `replicas` with LECTERN_POSTGRES_READ_URLS (docs/scaling.md, "Read replicas"). */
const HEARTBEAT: Json = {
  type: 'object',
  properties: {
    database: { type: 'string' },
    replicas: {
      type: 'array',
      items: {
        type: 'object',
        properties: { replica: { type: 'integer' }, state: { type: 'string', enum: ['starting', 'up', 'lagging', 'down', 'promoted'] }, lag_ms: { type: ['integer', 'null'] } },
      },
    },
  },
};

/** The routes outside the xAPI resources, by path. */
const OTHER_PATHS: Record<string, Json> = {
  ...ADMIN_PATHS,
  '/whoami': {
    get: {
      tags: ['Operations'],
      summary: 'The authenticated user',
      responses: {
        '200': {
          description: 'The user',
          content: jsonContent({ type: 'object', properties: { username: { type: 'string' }, scopes: { type: 'array', items: { type: 'string' } }, agent: ref('Agent') } }),
        },
        '401': ERRORS['401'],
        '429': ERRORS['429'],
      },
    },
  },
  '/lbheartbeat': healthCheck('Liveness: 200 while the process is up (no credentials)', { type: 'object' }),
  '/__lbheartbeat__': healthCheck('Alias of /lbheartbeat', { type: 'object' }),
  '/heartbeat': healthCheck("Readiness: checks the database with a real query, and shows each read replica's state (no credentials)", HEARTBEAT),
  '/__heartbeat__': healthCheck('Alias of /heartbeat', HEARTBEAT),
  '/metrics': {
    get: {
      tags: ['Operations'],
      summary: 'Prometheus metrics (LECTERN_METRICS_ACCESS: the all scope in the default store by default, or open)',
      responses: {
        '200': { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: { type: 'string' } } } },
        '401': ERRORS['401'],
        '403': ERRORS['403'],
        '429': ERRORS['429'],
      },
    },
  },
  '/openapi.json': {
    get: { tags: ['Operations'], summary: 'This description', security: [], responses: { '200': { description: 'OpenAPI 3.1', content: jsonContent({ type: 'object' }) } } },
  },
  '/docs': {
    get: {
      tags: ['Operations'],
      summary: 'Interactive documentation of this API',
      security: [],
      responses: { '200': { description: 'An HTML page', content: { 'text/html': { schema: { type: 'string' } } } } },
    },
  },
  '/docs/assets/{file}': {
    get: {
      tags: ['Operations'],
      summary: "The documentation page's scripts and styles",
      security: [],
      parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
      responses: { '200': { description: 'The file' }, '404': { $ref: '#/components/responses/NotFound' } },
    },
  },
};

const error = (description: string): Json => ({ description, content: jsonContent(ref('Error')) });

/** A route as the server registered it. */
export interface RegisteredRoute {
  url: string;
  methods: readonly string[];
}

/** The path item of an xAPI resource: each method's operation with the parameters of the table; a method undescribed goes into `missing`. */
function resourceItem(resource: (typeof RESOURCES)[keyof typeof RESOURCES], url: string, missing: string[]): Json {
  const item: Json = {};
  for (const method of resource.methods as readonly Method[]) {
    const op = XAPI_OPERATIONS[url]?.[method];
    if (!op) {
      missing.push(`${method} ${url}`);
      continue;
    }
    const authenticated = op.security === undefined;
    item[method.toLowerCase()] = {
      tags: [resource.name],
      ...op,
      parameters: [
        ...(url === '/xAPI/about' ? [] : [VERSION_HEADER]),
        ...resource.params.filter((p) => acceptedBy(p, method)).map((p) => queryParameter(p, method)),
        ...((op.parameters as Json[] | undefined) ?? []),
      ],
      responses: { ...(op.responses as Json), '400': ERRORS['400'], ...(authenticated && { '401': ERRORS['401'], '403': ERRORS['403'], '429': ERRORS['429'] }) },
    };
  }
  return item;
}

/** What the paths refer to. */
const COMPONENTS: Json = {
  securitySchemes: {
    basicAuth: { type: 'http', scheme: 'basic' },
    bearerAuth: { type: 'http', scheme: 'bearer', description: 'An OpenID Connect access token (LECTERN_RUNSERVER_AUTH_BACKENDS=oidc)' },
  },
  parameters: {
    XapiVersion: {
      name: 'X-Experience-API-Version',
      in: 'header',
      required: true,
      schema: { type: 'string', enum: ['1.0.3', '2.0.0'], default: '2.0.0' },
      description: 'The xAPI version the request is made under: 1.0.x (served as 1.0.3) or 2.0.x (served as 2.0.0).',
    },
  },
  responses: {
    BadRequest: error('Malformed request: the body says what and where'),
    Unauthorized: error('Missing or wrong credentials'),
    Forbidden: error('The credentials do not allow this'),
    NotFound: error('No such statement or document'),
    Conflict: error('Conflicts with what is stored'),
    PreconditionFailed: error('If-Match / If-None-Match not met'),
    TooLarge: error('The body is larger than this LRS accepts'),
    TooManyRequests: error('Too many failed or concurrent password checks from this address: try again after Retry-After seconds'),
  },
  schemas: SCHEMAS,
};

/**
 * The document for `routes`. xAPI paths get their parameters from the table, the others their
 * entry in OTHER_PATHS; routes with neither are listed in `x-undescribed`.
 */
export function buildOpenApi(routes: readonly RegisteredRoute[], version: string): Json {
  const paths: Record<string, Json> = {};
  const missing: string[] = [];
  for (const route of routes) {
    const url = route.url.replace(/\*$/, '{file}').replace(/:(\w+)/g, '{$1}');
    const resource = Object.values(RESOURCES).find((r) => r.path === url);
    if (resource) paths[url] = resourceItem(resource, url, missing);
    else if (OTHER_PATHS[url]) paths[url] = OTHER_PATHS[url];
    else {
      missing.push(`${route.methods.join('/')} ${url}`);
      paths[url] = Object.fromEntries(route.methods.map((m) => [m.toLowerCase(), { summary: 'Not described yet', responses: { default: { description: 'See docs/api.md' } } }]));
    }
  }
  return {
    ...(missing.length && { 'x-undescribed': missing }),
    openapi: '3.1.0',
    info: {
      title: 'Lectern LRS',
      version,
      description:
        `An xAPI ${[...KNOWN_VERSIONS].reverse().join(' and ')} Learning Record Store. Every xAPI resource needs the X-Experience-API-Version header (except About) ` +
        'and HTTP Basic credentials of a user in the credentials file (`lectern auth`). Every resource also accepts the Alternate Request ' +
        'Syntax (POST with ?method=) and CORS.',
    },
    security: [{ basicAuth: [] }, { bearerAuth: [] }],
    paths,
    components: COMPONENTS,
  };
}

/** Swagger UI's files, from the swagger-ui-dist package. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};
let assetDir: string | undefined;
const cache = new Map<string, Buffer>();

/** A documentation asset by file name, or undefined for any other name. */
export function docsAsset(file: string): { contentType: string; body: Buffer } | undefined {
  const contentType = ASSETS[file];
  if (!contentType) return undefined;
  assetDir ??= dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  let body = cache.get(file);
  if (!body) cache.set(file, (body = readFileSync(join(assetDir, file))));
  return { contentType, body };
}

/** The /docs page: Swagger UI reading /openapi.json, everything served by this server. */
export const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Lectern LRS API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
<script>
window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout',
  validatorUrl: null,
});
</script>
</body>
</html>
`;
