/**
 * PostgreSQL's migrations 1–12 (the schema's first era: lean storage, the reach tables, link
 * tables without the tenant), in ./migrations.ts's list before the later ones. Applied ones are
 * never edited.
 */
import { reachBuildSql } from '../sql.ts';
import { POSTGRES } from './query.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** A query run before a long migration: one row with `message` (logged) or none. */
  announce?: string;
}

export const EARLY_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'statements, index tables, attachments, activities, documents',
    sql: `
-- Taken under the tenant's advisory lock, so within a tenant seq order is commit order.
CREATE SEQUENCE statements_seq AS bigint;

CREATE TABLE statements (
  seq bigint PRIMARY KEY,             -- time-ordered key: keyset paging and stored order
  tenant text NOT NULL,
  id uuid NOT NULL,
  stored_ms bigint NOT NULL,          -- never decreases with seq within a tenant
  verb text NOT NULL,
  registration uuid,
  ref_id uuid,                        -- StatementRef object target
  is_voiding smallint NOT NULL DEFAULT 0,
  voided smallint NOT NULL DEFAULT 0,
  authority_key text,
  -- The statement exactly as served. json (not jsonb) keeps the text byte for byte and accepts
  -- \\u0000, which jsonb rejects; it is still queryable with ->, ->> and a cast to jsonb.
  "full" json NOT NULL
);
CREATE UNIQUE INDEX statements_id ON statements (tenant, id);
CREATE INDEX statements_seq_idx ON statements (tenant, seq);
CREATE INDEX statements_stored ON statements (tenant, stored_ms, seq);
CREATE INDEX statements_verb ON statements (tenant, verb, seq);
CREATE INDEX statements_registration ON statements (tenant, registration, seq) WHERE registration IS NOT NULL;
CREATE INDEX statements_ref ON statements (tenant, ref_id) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_refs_by_seq ON statements (tenant, seq) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_authority ON statements (tenant, authority_key, seq);

-- No foreign keys: rows of one statement are written in one transaction, and per-row FK checks
-- would cost every insert (and do not carry over to a sharded layout).
CREATE TABLE statement_agents (
  tenant text NOT NULL,
  agent_key text NOT NULL,
  seq bigint NOT NULL,
  direct smallint NOT NULL,           -- 1: actor/object (agent filter); 0: other roles (related_agents)
  PRIMARY KEY (tenant, agent_key, seq) INCLUDE (direct)
);
CREATE INDEX statement_agents_seq ON statement_agents (seq, agent_key) INCLUDE (direct);

CREATE TABLE statement_activities (
  tenant text NOT NULL,
  activity_id text NOT NULL,
  seq bigint NOT NULL,
  direct smallint NOT NULL,           -- 1: object (activity filter); 0: context/substatement (related_activities)
  PRIMARY KEY (tenant, activity_id, seq) INCLUDE (direct)
);
CREATE INDEX statement_activities_seq ON statement_activities (seq, activity_id) INCLUDE (direct);

CREATE TABLE activities (
  tenant text NOT NULL,
  id text NOT NULL,
  definition json NOT NULL,
  PRIMARY KEY (tenant, id)
);

CREATE TABLE attachments (
  tenant text NOT NULL,
  sha2 text NOT NULL,
  content_type text NOT NULL,
  length bigint NOT NULL,
  content bytea NOT NULL,
  PRIMARY KEY (tenant, sha2)
);

CREATE TABLE statement_attachments (
  seq bigint NOT NULL,
  sha2 text NOT NULL,
  PRIMARY KEY (seq, sha2)
);

CREATE TABLE documents (
  tenant text NOT NULL,
  kind text NOT NULL,                 -- state | activity_profile | agent_profile
  activity_id text NOT NULL,
  agent_key text NOT NULL,
  registration text NOT NULL,
  doc_id text NOT NULL,
  content bytea NOT NULL,
  content_type text NOT NULL,
  etag text NOT NULL,
  updated_ms bigint NOT NULL,
  PRIMARY KEY (tenant, kind, activity_id, agent_key, registration, doc_id)
);
`,
  },
  {
    version: 2,
    name: 'no planner statistics on tenant',
    // With statistics, a tenant created since the last ANALYZE is estimated at one row, so every
    // tenant-leading index looks as good as the one a query needs (an insert's id lookup walked a
    // whole tenant through statements_authority). Without them every tenant is estimated alike.
    // (Statistics gathered before this runs stay until a superuser deletes them from pg_statistic.)
    sql: `
ALTER TABLE statements ALTER COLUMN tenant SET STATISTICS 0;
ALTER TABLE statement_agents ALTER COLUMN tenant SET STATISTICS 0;
ALTER TABLE statement_activities ALTER COLUMN tenant SET STATISTICS 0;
ALTER TABLE activities ALTER COLUMN tenant SET STATISTICS 0;
`,
  },
  {
    version: 3,
    name: 'statement forwarding outbox',
    sql: `
-- One row per stored statement and forwarding target, written in the statement's transaction;
-- deleted once delivered. A lease (owner, until; database clock) marks the rows a process is
-- sending: claims skip leased rows and lock candidates with FOR UPDATE SKIP LOCKED.
CREATE TABLE forward_outbox (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  target text NOT NULL,               -- the target's url
  seq bigint NOT NULL,                -- statements.seq
  state smallint NOT NULL DEFAULT 0,  -- 0: queued; 1: dead letter
  attempts integer NOT NULL DEFAULT 0,
  due_ms bigint NOT NULL DEFAULT 0,   -- not sent before (retry backoff)
  lease_owner text,
  lease_until_ms bigint NOT NULL DEFAULT 0,
  last_error text
);
CREATE INDEX forward_outbox_due ON forward_outbox (target, state, due_ms, id);

CREATE TABLE forward_counters (
  target text PRIMARY KEY,
  delivered bigint NOT NULL DEFAULT 0,
  retried bigint NOT NULL DEFAULT 0
);
`,
  },
  {
    version: 4,
    name: 'statement_agents.direct becomes role (xAPI 2.0 contextAgents/contextGroups)',
    // Existing rows keep their meaning (1 and 0); 2.0 statements add 2 and 3. The INCLUDE
    // columns of the indexes follow the rename.
    sql: `
ALTER TABLE statement_agents RENAME COLUMN direct TO role;
COMMENT ON COLUMN statement_agents.role IS '1: actor/object (agent filter); 0: instructor, team, authority, SubStatement; 2: contextAgents; 3: contextGroups (all related_agents)';
`,
  },
  {
    version: 5,
    name: 'attachment links by hash',
    // Erasure deletes an attachment once no statement of its tenant links it: found by hash.
    sql: 'CREATE INDEX statement_attachments_sha2 ON statement_attachments (sha2);',
  },
  {
    version: 6,
    name: 'leaner indexes: none on stored, link tables by seq alone',
    // `stored` never decreases with `seq` within a tenant, so since/until find their seq bounds
    // through statements_seq_idx (src/store/sql.ts: storedSeqSql). The filters' link probes carry
    // the tenant, so the primary keys (tenant, key, seq) answer them; only erasure still finds
    // link rows by seq, for which seq alone is enough.
    sql: `
DROP INDEX statements_stored;
DROP INDEX statement_agents_seq;
CREATE INDEX statement_agents_seq ON statement_agents (seq);
DROP INDEX statement_activities_seq;
CREATE INDEX statement_activities_seq ON statement_activities (seq);
`,
  },
  {
    version: 7,
    name: 'lean storage: tenants and keys as integer dictionary ids',
    // The planner's row count (no scan of a large table just to say how large it is).
    announce:
      "SELECT 'rebuilding statements for lean storage: ' || reltuples::bigint || ' statements (estimated)' AS message FROM pg_class WHERE oid = 'statements'::regclass AND reltuples > 1000",
    // Tenants, verbs, activity IRIs and agent keys are stored once, in `tenants` and `keys`;
    // statements and the link tables hold their integer ids (src/store/sql.ts). The tables are
    // rebuilt rather than altered (a column cannot change type through a join): new tables
    // filled by one INSERT … SELECT each, in seq order, then the old ones dropped and the indexes
    // built on the full tables (rows in the old tables' order, which is seq order as written:
    // no sort of the JSON). seq values stay (cursors and the outbox name them), and `full`
    // (json) keeps each statement's text byte for byte. The link tables lose their seq index:
    // erasure deletes link rows by primary key, computed from the stored JSON. Identity ids are
    // never reused. No planner statistics on tenant, as migration 2 did for the old columns.
    sql: `
SET LOCAL work_mem = '256MB';
SET LOCAL maintenance_work_mem = '256MB';

CREATE TABLE tenants (
  id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name text NOT NULL UNIQUE
);
CREATE TABLE keys (
  id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  tenant integer NOT NULL,            -- tenants.id
  key text NOT NULL,                  -- a verb, an activity IRI or an agent key (authorities too)
  UNIQUE (tenant, key)
);

-- Bumped by every erasure that deletes keys: a writer resolves ids before its transaction and
-- checks, under the tenant lock, that no erasure has deleted one since.
CREATE TABLE keys_epoch (n bigint NOT NULL);
INSERT INTO keys_epoch VALUES (0);

INSERT INTO tenants (name)
  SELECT tenant FROM statements UNION SELECT tenant FROM statement_agents UNION SELECT tenant FROM statement_activities ORDER BY 1;
INSERT INTO keys (tenant, key)
  SELECT t.id, k.key FROM (
    SELECT tenant, verb AS key FROM statements
    UNION SELECT tenant, authority_key FROM statements WHERE authority_key IS NOT NULL
    UNION SELECT tenant, agent_key FROM statement_agents
    UNION SELECT tenant, activity_id FROM statement_activities
  ) k JOIN tenants t ON t.name = k.tenant;

CREATE TABLE lean_statements (
  seq bigint NOT NULL,                -- time-ordered key: keyset paging and stored order
  stored_ms bigint NOT NULL,          -- never decreases with seq within a tenant
  id uuid NOT NULL,
  tenant integer NOT NULL,            -- tenants.id
  verb integer NOT NULL,              -- keys.id
  authority integer,                  -- keys.id of the authority's first actor key
  is_voiding smallint NOT NULL DEFAULT 0,
  voided smallint NOT NULL DEFAULT 0,
  registration uuid,
  ref_id uuid,                        -- StatementRef object target
  -- The statement exactly as served. json (not jsonb) keeps the text byte for byte and accepts
  -- \\u0000, which jsonb rejects.
  "full" json NOT NULL
);
INSERT INTO lean_statements (seq, stored_ms, id, tenant, verb, authority, is_voiding, voided, registration, ref_id, "full")
  SELECT s.seq, s.stored_ms, s.id, t.id, v.id, a.id, s.is_voiding, s.voided, s.registration, s.ref_id, s."full"
  FROM statements s JOIN tenants t ON t.name = s.tenant JOIN keys v ON v.tenant = t.id AND v.key = s.verb
  LEFT JOIN keys a ON a.tenant = t.id AND a.key = s.authority_key;

CREATE TABLE lean_agents (
  tenant integer NOT NULL,
  agent integer NOT NULL,             -- keys.id
  seq bigint NOT NULL,
  role smallint NOT NULL              -- see migration 4
);
INSERT INTO lean_agents (tenant, agent, seq, role)
  SELECT t.id, k.id, x.seq, x.role FROM statement_agents x JOIN tenants t ON t.name = x.tenant JOIN keys k ON k.tenant = t.id AND k.key = x.agent_key;

CREATE TABLE lean_activities (
  tenant integer NOT NULL,
  activity integer NOT NULL,          -- keys.id
  seq bigint NOT NULL,
  direct smallint NOT NULL            -- 1: object (activity filter); 0: context/substatement (related_activities)
);
INSERT INTO lean_activities (tenant, activity, seq, direct)
  SELECT t.id, k.id, x.seq, x.direct FROM statement_activities x JOIN tenants t ON t.name = x.tenant JOIN keys k ON k.tenant = t.id AND k.key = x.activity_id;

DROP TABLE statements, statement_agents, statement_activities;
ALTER TABLE lean_statements RENAME TO statements;
ALTER TABLE lean_agents RENAME TO statement_agents;
ALTER TABLE lean_activities RENAME TO statement_activities;

ALTER TABLE statements ADD PRIMARY KEY (seq);
CREATE UNIQUE INDEX statements_id ON statements (tenant, id);
CREATE INDEX statements_seq_idx ON statements (tenant, seq);
CREATE INDEX statements_verb ON statements (tenant, verb, seq);
CREATE INDEX statements_registration ON statements (tenant, registration, seq) WHERE registration IS NOT NULL;
CREATE INDEX statements_ref ON statements (tenant, ref_id) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_refs_by_seq ON statements (tenant, seq) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_authority ON statements (tenant, authority, seq);
ALTER TABLE statement_agents ADD PRIMARY KEY (tenant, agent, seq) INCLUDE (role);
ALTER TABLE statement_activities ADD PRIMARY KEY (tenant, activity, seq) INCLUDE (direct);
COMMENT ON COLUMN statement_agents.role IS '1: actor/object (agent filter); 0: instructor, team, authority, SubStatement; 2: contextAgents; 3: contextGroups (all related_agents)';

ALTER TABLE statements ALTER COLUMN tenant SET STATISTICS 0;
ALTER TABLE statement_agents ALTER COLUMN tenant SET STATISTICS 0;
ALTER TABLE statement_activities ALTER COLUMN tenant SET STATISTICS 0;
ALTER TABLE keys ALTER COLUMN tenant SET STATISTICS 0;
ANALYZE tenants, keys, statements, statement_agents, statement_activities;
`,
  },
  {
    version: 8,
    name: 'StatementRef targeting written at insert time: what each StatementRef reaches (src/store/reach.ts)',
    announce: "SELECT 'indexing what StatementRefs target: ' || count(*) || ' statements' AS message FROM statements WHERE ref_id IS NOT NULL HAVING count(*) > 0",
    sql: `
CREATE TABLE statement_reach (
  tenant integer NOT NULL,
  seq bigint NOT NULL,                -- a StatementRef statement
  via bigint NOT NULL,                -- a statement its chain reaches
  verb integer NOT NULL,              -- via's verb (keys.id)
  registration uuid,                  -- via's registration
  authority integer,                  -- the authority of every statement from seq to via, NULL if they differ (mine)
  PRIMARY KEY (tenant, seq, via)
);
CREATE INDEX statement_reach_via ON statement_reach (tenant, via);
CREATE INDEX statement_reach_verb ON statement_reach (tenant, verb, seq);
CREATE INDEX statement_reach_registration ON statement_reach (tenant, registration, seq) WHERE registration IS NOT NULL;

-- The link rows of via, under seq.
CREATE TABLE reach_agents (
  tenant integer NOT NULL,
  agent integer NOT NULL,
  seq bigint NOT NULL,
  via bigint NOT NULL,
  role smallint NOT NULL,
  PRIMARY KEY (tenant, agent, seq, via) INCLUDE (role)
);
CREATE INDEX reach_agents_seq ON reach_agents (tenant, seq);
CREATE TABLE reach_activities (
  tenant integer NOT NULL,
  activity integer NOT NULL,
  seq bigint NOT NULL,
  via bigint NOT NULL,
  direct smallint NOT NULL,
  PRIMARY KEY (tenant, activity, seq, via) INCLUDE (direct)
);
CREATE INDEX reach_activities_seq ON reach_activities (tenant, seq);
-- The query no longer walks StatementRefs forward in seq order.
DROP INDEX statements_refs_by_seq;
${reachBuildSql(POSTGRES).join(';\n')};
ANALYZE statement_reach, reach_agents, reach_activities;
`,
  },
  {
    version: 9,
    name: 'statement JSON compressed in its row (lz4)',
    announce:
      "SELECT 'compressing stored statements: ' || reltuples::bigint || ' statements (estimated)' AS message FROM pg_class WHERE oid = 'statements'::regclass AND reltuples > 1000",
    // PostgreSQL compresses a row's values only when the row is longer than ≈ 2 KB
    // (TOAST_TUPLE_THRESHOLD, fixed when PostgreSQL is built); a statement row is ≈ 1.5 KB, so
    // its JSON was stored as sent. `toast_pad` is a column whose only job is to make every row
    // cross that threshold: 2 KB of spaces, which compress to ≈ 20 bytes. The toaster then
    // compresses `full` in the row (STORAGE MAIN: compressed in place, moved out of line only
    // past ≈ 8 KB), down to toast_tuple_target. lz4 decompresses a page's rows in PostgreSQL
    // faster than it reads them uncompressed (docs/performance.md, "Disk"). A row written
    // without the pad default (an UPDATE of `full`) must set `toast_pad = DEFAULT` too.
    //
    // The volatile default of ADD COLUMN rewrites the table once, each row compressed as it is
    // written; then the constant default, which adding a column would store without a rewrite.
    sql: `
ALTER TABLE statements SET (toast_tuple_target = 128), ALTER COLUMN "full" SET STORAGE MAIN;
DO $$
DECLARE method text := '';
BEGIN
  -- lz4 where PostgreSQL has it (14 or later, built with it); else its pglz. In EXECUTE: older
  -- versions do not parse COMPRESSION.
  IF current_setting('server_version_num')::int >= 140000 THEN
    BEGIN
      EXECUTE 'ALTER TABLE statements ALTER COLUMN "full" SET COMPRESSION lz4';
      method := ' COMPRESSION lz4';
    EXCEPTION WHEN feature_not_supported THEN
      NULL;
    END;
  END IF;
  EXECUTE 'ALTER TABLE statements ADD COLUMN toast_pad text' || method ||
    ' DEFAULT repeat('' '', 2048 + 0 * random()::int), ALTER COLUMN toast_pad SET STORAGE MAIN';
END $$;
ALTER TABLE statements ALTER COLUMN toast_pad SET DEFAULT repeat(' ', 2048);
COMMENT ON COLUMN statements.toast_pad IS 'spaces that make every row long enough for PostgreSQL to compress full in place (migration 9)';
ANALYZE statements;
`,
  },
  {
    version: 10,
    name: 'link tables keyed (key, role, seq), without the tenant',
    announce:
      "SELECT 'rebuilding the agent and activity links: ' || reltuples::bigint || ' rows (estimated)' AS message FROM pg_class WHERE oid = 'statement_activities'::regclass AND reltuples > 10000",
    // A key id belongs to one tenant's dictionary, so the tenant column repeated what the key
    // says; the role moves into the key. Each entry is then 28 bytes, small enough for
    // PostgreSQL to split a page at the point where a key's newest entries arrive rather than in
    // the middle (src/store/postgres/dialect.ts, LINK_ROLES). Rebuilt as migration 7 did: new tables filled in
    // their old order, the old ones dropped, the keys built on the full tables.
    sql: `
SET LOCAL maintenance_work_mem = '256MB';
CREATE TABLE agents_by_role (
  agent integer NOT NULL,             -- keys.id (of the tenant's dictionary)
  role smallint NOT NULL,             -- see migration 4
  seq bigint NOT NULL
);
INSERT INTO agents_by_role (agent, role, seq) SELECT agent, role, seq FROM statement_agents;
CREATE TABLE activities_by_role (
  activity integer NOT NULL,          -- keys.id (of the tenant's dictionary)
  direct smallint NOT NULL,           -- 1: object (activity filter); 0: context/substatement (related_activities)
  seq bigint NOT NULL
);
INSERT INTO activities_by_role (activity, direct, seq) SELECT activity, direct, seq FROM statement_activities;
DROP TABLE statement_agents, statement_activities;
ALTER TABLE agents_by_role RENAME TO statement_agents;
ALTER TABLE activities_by_role RENAME TO statement_activities;
ALTER TABLE statement_agents ADD CONSTRAINT statement_agents_pkey PRIMARY KEY (agent, role, seq);
ALTER TABLE statement_activities ADD CONSTRAINT statement_activities_pkey PRIMARY KEY (activity, direct, seq);
COMMENT ON COLUMN statement_agents.role IS '1: actor/object (agent filter); 0: instructor, team, authority, SubStatement; 2: contextAgents; 3: contextGroups (all related_agents)';
ANALYZE statement_agents, statement_activities;
`,
  },
  {
    version: 11,
    name: 'attachment links say who carried the data: only a statement whose request brought it gives it to readers',
    // As SQLite's migration 11: carrier is the key id of the statement's authority (0 without one)
    // when its request carried the data, NULL when it only declared the hash; existing links are
    // taken as carried by their statement.
    sql: `
ALTER TABLE statement_attachments ADD COLUMN carrier integer;
UPDATE statement_attachments l SET carrier = coalesce(s.authority, 0) FROM statements s WHERE s.seq = l.seq;
DROP INDEX statement_attachments_sha2;
CREATE INDEX statement_attachments_carrier ON statement_attachments (sha2, carrier) WHERE carrier IS NOT NULL;
COMMENT ON COLUMN statement_attachments.carrier IS 'keys.id of the authority of the statement whose request carried the data (0: none); NULL: the hash was only declared';
`,
  },
  {
    version: 12,
    name: 'the bytes of each statement JSON, so that a page is cut to its byte bound before the JSON is read',
    announce:
      "SELECT 'measuring stored statements: ' || reltuples::bigint || ' statements (estimated)' AS message FROM pg_class WHERE oid = 'statements'::regclass AND reltuples > 100000",
    // octet_length(full::text) decompresses and copies the whole value (a json has no cast to
    // text that keeps it as it is): 1.8 s for 40 rows of 19 MB. A statement page reads this
    // column instead (src/store/sql.ts, pageCols). Filled by a rewrite of the table (ALTER TYPE
    // with USING), as migration 9's: no dead rows, each row's JSON kept compressed as it was
    // (100k statements, 130 MB with their indexes: 0.6 s).
    sql: `
ALTER TABLE statements ADD COLUMN full_bytes integer;
ALTER TABLE statements ALTER COLUMN full_bytes TYPE integer USING octet_length("full"::text), ALTER COLUMN full_bytes SET NOT NULL;
COMMENT ON COLUMN statements.full_bytes IS 'octet_length of full as text: what a statement page counts against LECTERN_MAX_PAGE_BYTES (migration 12)';
`,
  },
];
