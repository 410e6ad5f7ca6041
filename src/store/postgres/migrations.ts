/**
 * Versioned PostgreSQL schema. Append new versions; never edit an applied one. Table and column
 * names match the SQLite schema so src/store/sql.ts serves both; flags are smallint 0/1 for the
 * same reason.
 *
 * Where it differs from SQLite's (../sqlite/migrations.ts) on purpose: the link tables are keyed
 * (key, role, seq) without the tenant (version 10: a key id belongs to one tenant; 28-byte entries
 * let B-tree pages split at the full point as a key's newest entries arrive, 76 % full against
 * 52 %); no seq buckets and one unique (tenant, id) index, as PostgreSQL's ingest keeps its pace
 * as the store grows (SQLite's bucketed link tables and two-level id index are for a single
 * writer's dirtied pages and checkpoints); every process shares the database, so `seq` is taken
 * under the tenant's advisory lock and times come from the database clock.
 */
import { EARLY_MIGRATIONS, type Migration } from './migrations-early.ts';

export type { Migration } from './migrations-early.ts';

export const MIGRATIONS: Migration[] = [
  ...EARLY_MIGRATIONS,
  {
    version: 13,
    name: 'the rules a statement stored under lax validation broke, kept beside it',
    // As SQLite's migration 12: a row only for a statement accepted with violations (docs/validation.md).
    sql: `
CREATE TABLE statement_violations (
  seq bigint PRIMARY KEY,
  violations json NOT NULL
);
COMMENT ON TABLE statement_violations IS 'the rules a statement stored under lax validation broke (statements.seq; a JSON list of {loc, msg, type})';
`,
  },
  {
    version: 14,
    name: 'rejected writes kept for the operator (src/ops/rejections.ts), bounded per store',
    // As SQLite's migration 13; the tenant by name (a handful of rows per store, read rarely).
    sql: `
CREATE TABLE rejections (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant text NOT NULL,
  at_ms bigint NOT NULL,
  username text NOT NULL,
  method text NOT NULL,
  path text NOT NULL,
  query text NOT NULL,
  status smallint NOT NULL,
  reasons text NOT NULL,
  types text NOT NULL,
  headers text NOT NULL,
  version text NOT NULL,
  body bytea,
  body_bytes integer NOT NULL,
  writer text NOT NULL
);
CREATE INDEX rejections_tenant ON rejections (tenant, id);
CREATE INDEX rejections_at ON rejections (at_ms);
COMMENT ON TABLE rejections IS 'writes refused with 400, 409 or 413, kept for lectern rejections (LECTERN_REJECTIONS_MAX per store, LECTERN_REJECTIONS_KEEP_DAYS)';
COMMENT ON COLUMN rejections.types IS 'the reasons'' types between spaces: what --reason matches';
`,
  },
  {
    version: 15,
    name: 'credentials in the database: key and secret pairs with scopes, and a change counter every process reads',
    // As SQLite's migration 14: the secret as its SHA-256 only, the scopes and agent as JSON text
    // (read whole, written by the same SQL on both backends), times in epoch ms.
    sql: `
CREATE TABLE credentials (
  key text PRIMARY KEY,
  secret_hash text NOT NULL,
  previous_hash text,
  previous_until_ms bigint,
  label text NOT NULL DEFAULT '',
  scopes text NOT NULL,
  target text NOT NULL DEFAULT '',
  agent text NOT NULL,
  validation text,
  created_ms bigint NOT NULL,
  expires_ms bigint,
  last_used_ms bigint,
  revoked_ms bigint
);
CREATE TABLE credential_changes (one integer PRIMARY KEY CHECK (one = 1), counter bigint NOT NULL);
INSERT INTO credential_changes (one, counter) VALUES (1, 0);
COMMENT ON COLUMN credentials.secret_hash IS 'base64url SHA-256 of the generated secret (never the secret)';
COMMENT ON TABLE credential_changes IS 'bumped by every credential create, revoke and rotation: servers drop their cached credentials when it moves';
`,
  },
  {
    version: 16,
    name: 'the audit log of admin actions',
    // As SQLite's migration 15.
    sql: `
CREATE TABLE admin_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  time_ms bigint NOT NULL,
  actor text NOT NULL,
  role text NOT NULL,
  via text NOT NULL,
  client text NOT NULL,
  action text NOT NULL,
  target text,
  details text NOT NULL
);
CREATE INDEX admin_audit_target ON admin_audit (target, id);
COMMENT ON TABLE admin_audit IS 'admin actions: who, what, when, from where (never a secret); append-only';
`,
  },
  {
    version: 17,
    name: "statements counted per store, day and verb, and per minute, as they are written: the console's Overview",
    announce:
      "SELECT 'counting statements per store, day and verb: ' || reltuples::bigint || ' statements (estimated)' AS message FROM pg_class WHERE oid = 'statements'::regclass AND reltuples > 100000",
    // As SQLite's migration 16 (src/store/overview.ts keeps them); the backfill is one
    // aggregate over the statements (a hash aggregate: a few hundred groups per store).
    sql: `
CREATE TABLE statement_counts (
  tenant integer NOT NULL,
  day integer NOT NULL,
  verb integer NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (tenant, day, verb)
);
INSERT INTO statement_counts (tenant, day, verb, n) SELECT tenant, (stored_ms / 86400000)::integer, verb, count(*) FROM statements GROUP BY 1, 2, 3;
CREATE TABLE statement_minutes (
  tenant integer NOT NULL,
  minute integer NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (tenant, minute)
);
COMMENT ON TABLE statement_counts IS 'statements per tenant, UTC day of stored (stored_ms / 86400000) and verb (keys.id), kept by every write and deletion: the console''s Overview';
COMMENT ON TABLE statement_minutes IS 'statements stored per tenant and minute (stored_ms / 60000) in the last hour: the Overview''s ingest rate across processes';
`,
  },
  {
    version: 18,
    name: "forwarding outbox rows found by statement: erase and prune remove a statement's rows without reading the whole outbox",
    // As SQLite's migration 17: a deletion batch's "seq IN (…)" otherwise reads the whole outbox.
    sql: `CREATE INDEX forward_outbox_seq ON forward_outbox (seq);`,
  },
  {
    version: 19,
    name: 'autovacuum reclaims what a prune or an erase deleted once 1 % of a statement table is dead, not 20 %',
    // PostgreSQL's default (autovacuum_vacuum_scale_factor 0.2) leaves a prune of a tenth of a large
    // store unvacuumed until as many rows again are inserted: the new rows then take fresh pages and
    // the tables grow by what was pruned. At 1 % autovacuum runs during the prune, the freed space is
    // reused by the next inserts (docs/performance.md, "Ten million statements").
    sql: `
ALTER TABLE statements SET (autovacuum_vacuum_scale_factor = 0.01, toast.autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE statement_agents SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE statement_activities SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE statement_reach SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE reach_agents SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE reach_activities SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE statement_attachments SET (autovacuum_vacuum_scale_factor = 0.01);
`,
  },
  {
    version: 20,
    name: 'autovacuum visits the statement tables after 1 % new rows, not 20 %: the newest statements are read from the indexes alone',
    // Every page query reads the newest statements first, through index-only scans whose entries
    // need a heap visit until a vacuum marks their pages all-visible. With PostgreSQL's default
    // (autovacuum_vacuum_insert_scale_factor 0.2) the newest fifth of a store never is: at 10M the
    // combined filter's page visited the heap for each of its 3,500 index entries, 19 ms instead
    // of 9 (docs/performance.md, "Ten million statements"). A vacuum of an insert-only table
    // reads only the pages not yet all-visible, so visiting more often costs no more in all.
    sql: `
ALTER TABLE statements SET (autovacuum_vacuum_insert_scale_factor = 0.01);
ALTER TABLE statement_agents SET (autovacuum_vacuum_insert_scale_factor = 0.01);
ALTER TABLE statement_activities SET (autovacuum_vacuum_insert_scale_factor = 0.01);
ALTER TABLE statement_reach SET (autovacuum_vacuum_insert_scale_factor = 0.01);
ALTER TABLE reach_agents SET (autovacuum_vacuum_insert_scale_factor = 0.01);
ALTER TABLE reach_activities SET (autovacuum_vacuum_insert_scale_factor = 0.01);
`,
  },
  {
    version: 21,
    name: 'the console sessions signed out before their expiry: every process refuses a copy of their cookie',
    // As SQLite's migration 20.
    sql: `
CREATE TABLE ended_sessions (
  id text PRIMARY KEY,
  expires_ms bigint NOT NULL
);
CREATE INDEX ended_sessions_expires ON ended_sessions (expires_ms);
COMMENT ON TABLE ended_sessions IS 'console sessions signed out before expires_ms (their own expiry): refused by every server; deleted past it';
`,
  },
  {
    version: 22,
    name: 'kept rejections found by credential: a store over LECTERN_REJECTIONS_MAX trims each credential to its fair share',
    // As SQLite's migration 21.
    sql: `CREATE INDEX rejections_writer ON rejections (tenant, username, id);`,
  },
  {
    version: 23,
    name: 'the Overview\'s counts bounded: at most 100 verbs per store and day, the rest in one "other" row',
    // As SQLite's migration 22. ANALYZE: the Overview's reads, planned for the rows before the
    // fold, read the whole table until autovacuum analyzes it.
    sql: `
CREATE TEMPORARY TABLE counts_folded ON COMMIT DROP AS
  SELECT tenant, day, verb, n FROM (SELECT tenant, day, verb, n, row_number() OVER (PARTITION BY tenant, day ORDER BY n DESC, verb) AS r FROM statement_counts WHERE verb <> 0) c
  WHERE r > 100;
INSERT INTO statement_counts (tenant, day, verb, n) SELECT tenant, day, 0, sum(n) FROM counts_folded GROUP BY tenant, day;
DELETE FROM statement_counts c USING counts_folded f WHERE c.tenant = f.tenant AND c.day = f.day AND c.verb = f.verb;
ANALYZE statement_counts;
`,
  },
  {
    version: 24,
    name: "the audit's actor says what kind it is; kept rejections claimed by the replay under way",
    // As SQLite's migration 23.
    sql: `
ALTER TABLE admin_audit ADD COLUMN actor_kind text NOT NULL DEFAULT 'unknown';
UPDATE admin_audit a SET actor_kind = CASE
  WHEN a.via = 'cli' THEN 'os-user'
  WHEN EXISTS (SELECT 1 FROM credentials c WHERE c.key = a.actor) THEN 'database-key'
  ELSE 'unknown' END;
ALTER TABLE rejections ADD COLUMN claim text;
ALTER TABLE rejections ADD COLUMN claimed_until_ms bigint;
COMMENT ON COLUMN admin_audit.actor_kind IS 'file-user, database-key, token-subject, os-user, or unknown (entries written before kinds were recorded)';
COMMENT ON COLUMN rejections.claim IS 'the replay holding the row (a random token) until claimed_until_ms: a concurrent replay skips it';
`,
  },
];
