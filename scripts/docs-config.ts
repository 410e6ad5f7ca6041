/**
 * Writes the settings tables of docs/configuration.md from SETTINGS (src/config.ts): one row per
 * setting, its name, its default and its `help` as the text. `npm run docs:config` rewrites the
 * part of the page between the two markers; test/docs-config.test.ts fails when the page and the
 * table differ. The prose around the tables is written by hand.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SETTINGS } from '../src/config.ts';

type Key = keyof typeof SETTINGS;

export const PAGE = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));
export const BEGIN = '<!-- settings: written by `npm run docs:config` from src/config.ts; edit the help texts there -->';
export const END = '<!-- end of settings -->';

/** The page's sections, in order; a setting placed in none goes to the last, "Other settings". */
export const SECTIONS: { title: string; settings: Key[] }[] = [
  { title: 'Server', settings: ['backend', 'host', 'port', 'workers', 'trustProxy', 'corsAllowedOrigins', 'logLevel', 'shutdownTimeout'] },
  { title: 'SQLite', settings: ['sqlitePath', 'sqliteSynchronous', 'sqliteWriterThread', 'sqliteWalAutocheckpoint', 'sqliteCacheSize', 'sqliteReaders'] },
  {
    title: 'PostgreSQL',
    settings: ['postgresUrl', 'postgresPoolSize', 'postgresStatementTimeout', 'postgresConnectTimeout', 'postgresConnectRetries', 'postgresConnectBackoff'],
  },
  {
    title: 'Authentication and scopes',
    settings: [
      'authFile',
      'authCacheMaxSize',
      'authCacheTtl',
      'authBcryptConcurrency',
      'authMaxFailures',
      'authFailureWindow',
      'authBackends',
      'authBackend',
      'oidcIssuerUri',
      'oidcAudience',
      'oidcScopeClaim',
      'oidcTargetClaim',
      'oidcValidationClaim',
      'oidcDiscoveryRetries',
      'oidcJwksCooldown',
      'restrictByScopes',
      'restrictByAuthority',
    ],
  },
  {
    title: 'Requests and pages',
    settings: [
      'maxSearchHits',
      'maxPageBytes',
      'maxRequestSize',
      'maxBodiesInFlight',
      'maxBodiesInFlightPerUser',
      'requestBodyTimeout',
      'requestBodyMinRate',
      'maxDocumentSize',
      'maxStatementsPerRequest',
      'maxJsonValues',
    ],
  },
  { title: 'xAPI versions', settings: ['xapiVersions', 'xapiStrictVersion', 'xapiValidation'] },
  { title: 'Statement forwarding', settings: ['xapiForwardings', 'forwardingBackoff', 'forwardingBatchSize', 'forwardingLease'] },
  {
    title: 'Monitoring and metrics',
    settings: ['monitoringDsn', 'executionEnvironment', 'monitoringLrsTracesSampleRate', 'monitoringCliTracesSampleRate', 'monitoringIgnoreHealthChecks', 'metricsAccess'],
  },
  { title: 'Data lifecycle', settings: ['auditFile', 'pseudonymizeKey', 'retentionDays'] },
];

const cell = (text: string): string => text.replace(/\|/g, '\\|');

/** A setting's row: `| `NAME` | `default` (or (empty)) | help |`. */
export function settingRow(key: Key): string {
  const s = SETTINGS[key];
  return `| \`${s.name}\` | ${s.default === '' ? '(empty)' : `\`${cell(s.default)}\``} | ${cell(s.help)} |`;
}

/** Every setting's row, by variable name, in SETTINGS order. */
export function settingRows(): Map<string, string> {
  return new Map((Object.keys(SETTINGS) as Key[]).map((key) => [SETTINGS[key].name, settingRow(key)]));
}

/** The generated part of the page: a heading and a table per section. */
export function renderSettings(): string {
  const placed = new Set(SECTIONS.flatMap((s) => s.settings));
  const other = (Object.keys(SETTINGS) as Key[]).filter((key) => !placed.has(key));
  const sections = other.length > 0 ? [...SECTIONS, { title: 'Other settings', settings: other }] : SECTIONS;
  const parts = sections.map(({ title, settings }) => [`### ${title}`, '', '| variable | default | meaning |', '|---|---|---|', ...settings.map(settingRow)].join('\n'));
  return [BEGIN, '', parts.join('\n\n'), '', END].join('\n');
}

/** The page with its generated part replaced by today's. */
export function updatePage(page: string): string {
  const from = page.indexOf(BEGIN);
  const to = page.indexOf(END);
  if (from < 0 || to < from) throw new Error(`docs/configuration.md needs the markers ${BEGIN} and ${END}`);
  return page.slice(0, from) + renderSettings() + page.slice(to + END.length);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const page = readFileSync(PAGE, 'utf8');
  const next = updatePage(page);
  if (next !== page) writeFileSync(PAGE, next);
  console.log(next === page ? 'docs/configuration.md is up to date' : 'docs/configuration.md rewritten from src/config.ts');
}
