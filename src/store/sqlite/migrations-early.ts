/**
 * SQLite's migrations 1–12 (the schema's first era: the lean layout, seq buckets, id levels), in
 * ./migrations.ts's list before the later ones. Applied ones are never edited.
 */
import { reachBuildSql } from '../sql.ts';
import { SQLITE } from './query.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** A migration that rewrites every statement: how many it will rewrite, logged before it starts. */
  rebuilds?: { count: string; message: string };
}

export const EARLY_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'statements, index tables, attachments, activities, documents',
    sql: `
CREATE TABLE statements (
  seq INTEGER PRIMARY KEY,            -- time-ordered key: keyset paging and stored order
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  stored_ms INTEGER NOT NULL,
  verb TEXT NOT NULL,
  registration TEXT,
  ref_id TEXT,                        -- StatementRef object target
  is_voiding INTEGER NOT NULL DEFAULT 0,
  voided INTEGER NOT NULL DEFAULT 0,
  authority_key TEXT,
  full TEXT NOT NULL                  -- the statement as served
);
CREATE UNIQUE INDEX statements_id ON statements(tenant, id);
CREATE INDEX statements_seq ON statements(tenant, seq);
CREATE INDEX statements_stored ON statements(tenant, stored_ms);
CREATE INDEX statements_verb ON statements(tenant, verb, seq);
CREATE INDEX statements_registration ON statements(tenant, registration, seq) WHERE registration IS NOT NULL;
CREATE INDEX statements_ref ON statements(tenant, ref_id) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_refs_by_seq ON statements(tenant, seq) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_authority ON statements(tenant, authority_key, seq);

CREATE TABLE statement_agents (
  tenant TEXT NOT NULL,
  agent_key TEXT NOT NULL,
  seq INTEGER NOT NULL REFERENCES statements(seq),
  direct INTEGER NOT NULL,            -- 1: actor/object (agent filter); 0: other roles (related_agents)
  PRIMARY KEY (tenant, agent_key, seq)
) WITHOUT ROWID;
CREATE INDEX statement_agents_seq ON statement_agents(seq, agent_key);

CREATE TABLE statement_activities (
  tenant TEXT NOT NULL,
  activity_id TEXT NOT NULL,
  seq INTEGER NOT NULL REFERENCES statements(seq),
  direct INTEGER NOT NULL,            -- 1: object (activity filter); 0: context/substatement (related_activities)
  PRIMARY KEY (tenant, activity_id, seq)
) WITHOUT ROWID;
CREATE INDEX statement_activities_seq ON statement_activities(seq, activity_id);

CREATE TABLE activities (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  definition TEXT NOT NULL,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;

CREATE TABLE attachments (
  tenant TEXT NOT NULL,
  sha2 TEXT NOT NULL,
  content_type TEXT NOT NULL,
  length INTEGER NOT NULL,
  content BLOB NOT NULL,
  PRIMARY KEY (tenant, sha2)
);

CREATE TABLE statement_attachments (
  seq INTEGER NOT NULL REFERENCES statements(seq),
  sha2 TEXT NOT NULL,
  PRIMARY KEY (seq, sha2)
) WITHOUT ROWID;

CREATE TABLE documents (
  tenant TEXT NOT NULL,
  kind TEXT NOT NULL,                 -- state | activity_profile | agent_profile
  activity_id TEXT NOT NULL,
  agent_key TEXT NOT NULL,
  registration TEXT NOT NULL,
  doc_id TEXT NOT NULL,
  content BLOB NOT NULL,
  content_type TEXT NOT NULL,
  etag TEXT NOT NULL,
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, kind, activity_id, agent_key, registration, doc_id)
);
`,
  },
  {
    version: 2,
    name: 'statement forwarding outbox',
    sql: `
-- One row per stored statement and forwarding target, written in the statement's transaction;
-- deleted once delivered. A lease (owner, until) marks the rows a process is sending.
CREATE TABLE forward_outbox (
  id INTEGER PRIMARY KEY,
  target TEXT NOT NULL,               -- the target's url
  seq INTEGER NOT NULL,               -- statements.seq
  state INTEGER NOT NULL DEFAULT 0,   -- 0: queued; 1: dead letter
  attempts INTEGER NOT NULL DEFAULT 0,
  due_ms INTEGER NOT NULL DEFAULT 0,  -- not sent before (retry backoff)
  lease_owner TEXT,
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  last_error TEXT
);
CREATE INDEX forward_outbox_due ON forward_outbox (target, state, due_ms, id);

CREATE TABLE forward_counters (
  target TEXT PRIMARY KEY,
  delivered INTEGER NOT NULL DEFAULT 0,
  retried INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
`,
  },
  {
    version: 3,
    name: 'statement_agents.direct becomes role (xAPI 2.0 contextAgents/contextGroups)',
    // Existing rows keep their meaning (1 and 0); 2.0 statements add 2 and 3.
    sql: `
ALTER TABLE statement_agents RENAME COLUMN direct TO role; -- 1: actor/object (agent filter); 0: instructor, team, authority, SubStatement; 2: contextAgents; 3: contextGroups (all related_agents)
`,
  },
  {
    version: 4,
    name: 'attachment links by hash',
    // Erasure deletes an attachment once no statement of its tenant links it: found by hash.
    sql: 'CREATE INDEX statement_attachments_sha2 ON statement_attachments(sha2);',
  },
  {
    version: 5,
    name: 'no index on stored (since/until bisect seq)',
    // `stored` never decreases with `seq`, so since/until find their seq bounds through
    // statements_seq (src/store/sql.ts: storedSeqSql). The link tables keep their (seq, key)
    // indexes: erasure deletes link rows by seq, and the foreign keys on seq need them.
    sql: 'DROP INDEX statements_stored;',
  },
  {
    version: 6,
    name: 'lean storage: tenants and keys stored once, integer ids in statements and the link tables, 16-byte UUIDs, no foreign keys',
    rebuilds: { count: 'SELECT count(*) AS n FROM statements', message: 'rebuilding statements for lean storage' },
    // The dictionaries first, from the distinct values; then each table is rebuilt in its key
    // order (sequential B-tree appends), its seq values kept (cursors and the forwarding outbox
    // name them) and `full` copied as it is. Rebuilding also drops the foreign keys (SQLite cannot
    // drop a constraint): they cost a parent probe per link row and need an index on seq to
    // delete a statement; erasure deletes link rows by primary key instead.
    sql: `
CREATE TABLE tenants (
  id INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused
  name TEXT NOT NULL UNIQUE             -- the store key ('' for the default store)
);
INSERT INTO tenants (name) SELECT DISTINCT tenant FROM statements ORDER BY tenant;

-- Verbs, activity IRIs and agent keys (authorities included), once per tenant. Ids are never
-- reused, so a process may cache them; erasure deletes an agent's key once no statement
-- names it any more and bumps keys_epoch, which tells every writer to forget its cache.
CREATE TABLE keys (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant INTEGER NOT NULL,              -- tenants.id
  key TEXT NOT NULL,
  UNIQUE (tenant, key)
);
CREATE TABLE keys_epoch (one INTEGER PRIMARY KEY CHECK (one = 1), epoch INTEGER NOT NULL);
INSERT INTO keys_epoch (one, epoch) VALUES (1, 0);
INSERT INTO keys (tenant, key)
SELECT t.id, k.key FROM (
  SELECT tenant, verb AS key FROM statements
  UNION SELECT tenant, authority_key FROM statements WHERE authority_key IS NOT NULL
  UNION SELECT tenant, agent_key FROM statement_agents
  UNION SELECT tenant, activity_id FROM statement_activities
) k JOIN tenants t ON t.name = k.tenant ORDER BY t.id, k.key;

CREATE TABLE statements_lean (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, -- stored order and keyset paging; never reused, even after erasure
  tenant INTEGER NOT NULL,              -- tenants.id
  id BLOB NOT NULL,                     -- the UUID's 16 bytes
  stored_ms INTEGER NOT NULL,           -- never decreases with seq
  verb INTEGER NOT NULL,                -- keys.id
  registration BLOB,                    -- 16 bytes
  ref_id BLOB,                          -- StatementRef object target, 16 bytes
  is_voiding INTEGER NOT NULL DEFAULT 0,
  voided INTEGER NOT NULL DEFAULT 0,
  authority INTEGER,                    -- keys.id of the authority's first actor key
  full TEXT NOT NULL                    -- the statement as served
);
INSERT INTO statements_lean (seq, tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority, full)
SELECT s.seq, t.id, unhex(replace(s.id, '-', '')), s.stored_ms, v.id, unhex(replace(s.registration, '-', '')), unhex(replace(s.ref_id, '-', '')),
       s.is_voiding, s.voided, a.id, s.full
FROM statements s
JOIN tenants t ON t.name = s.tenant
JOIN keys v ON v.tenant = t.id AND v.key = s.verb
LEFT JOIN keys a ON a.tenant = t.id AND a.key = s.authority_key
ORDER BY s.seq;

CREATE TABLE statement_agents_lean (
  tenant INTEGER NOT NULL,
  agent INTEGER NOT NULL,               -- keys.id
  seq INTEGER NOT NULL,
  role INTEGER NOT NULL,                -- see AGENT_ROLE in src/xapi/statement.ts
  PRIMARY KEY (tenant, agent, seq)
) WITHOUT ROWID;
INSERT INTO statement_agents_lean (tenant, agent, seq, role)
SELECT t.id, k.id, a.seq, a.role FROM statement_agents a JOIN tenants t ON t.name = a.tenant JOIN keys k ON k.tenant = t.id AND k.key = a.agent_key
ORDER BY 1, 2, 3;

CREATE TABLE statement_activities_lean (
  tenant INTEGER NOT NULL,
  activity INTEGER NOT NULL,            -- keys.id
  seq INTEGER NOT NULL,
  direct INTEGER NOT NULL,              -- 1: object (activity filter); 0: context/substatement (related_activities)
  PRIMARY KEY (tenant, activity, seq)
) WITHOUT ROWID;
INSERT INTO statement_activities_lean (tenant, activity, seq, direct)
SELECT t.id, k.id, a.seq, a.direct FROM statement_activities a JOIN tenants t ON t.name = a.tenant JOIN keys k ON k.tenant = t.id AND k.key = a.activity_id
ORDER BY 1, 2, 3;

CREATE TABLE statement_attachments_lean (
  seq INTEGER NOT NULL,
  sha2 TEXT NOT NULL,
  PRIMARY KEY (seq, sha2)
) WITHOUT ROWID;
INSERT INTO statement_attachments_lean (seq, sha2) SELECT seq, sha2 FROM statement_attachments ORDER BY seq, sha2;

DROP TABLE statement_attachments;
DROP TABLE statement_activities;
DROP TABLE statement_agents;
DROP TABLE statements;
ALTER TABLE statements_lean RENAME TO statements;
ALTER TABLE statement_agents_lean RENAME TO statement_agents;
ALTER TABLE statement_activities_lean RENAME TO statement_activities;
ALTER TABLE statement_attachments_lean RENAME TO statement_attachments;

CREATE UNIQUE INDEX statements_id ON statements(tenant, id);
CREATE INDEX statements_seq ON statements(tenant, seq);
CREATE INDEX statements_verb ON statements(tenant, verb, seq);
CREATE INDEX statements_registration ON statements(tenant, registration, seq) WHERE registration IS NOT NULL;
CREATE INDEX statements_ref ON statements(tenant, ref_id) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_refs_by_seq ON statements(tenant, seq) WHERE ref_id IS NOT NULL;
CREATE INDEX statements_authority ON statements(tenant, authority, seq);
CREATE INDEX statement_attachments_sha2 ON statement_attachments(sha2);
`,
  },
  {
    version: 7,
    name: 'StatementRef targeting written at insert time: what each StatementRef reaches (src/store/reach.ts)',
    rebuilds: { count: 'SELECT count(*) AS n FROM statements WHERE ref_id IS NOT NULL', message: 'indexing what StatementRefs target' },
    sql: `
CREATE TABLE statement_reach (
  tenant INTEGER NOT NULL,
  seq INTEGER NOT NULL,                 -- a StatementRef statement
  via INTEGER NOT NULL,                 -- a statement its chain reaches
  verb INTEGER NOT NULL,                -- via's verb (keys.id)
  registration BLOB,                    -- via's registration
  authority INTEGER,                    -- the authority of every statement from seq to via, NULL if they differ (mine)
  PRIMARY KEY (tenant, seq, via)
) WITHOUT ROWID;
CREATE INDEX statement_reach_via ON statement_reach(tenant, via);
CREATE INDEX statement_reach_verb ON statement_reach(tenant, verb, seq);
CREATE INDEX statement_reach_registration ON statement_reach(tenant, registration, seq) WHERE registration IS NOT NULL;

-- The link rows of via, under seq.
CREATE TABLE reach_agents (
  tenant INTEGER NOT NULL,
  agent INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  via INTEGER NOT NULL,
  role INTEGER NOT NULL,
  PRIMARY KEY (tenant, agent, seq, via)
) WITHOUT ROWID;
CREATE INDEX reach_agents_seq ON reach_agents(tenant, seq);
CREATE TABLE reach_activities (
  tenant INTEGER NOT NULL,
  activity INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  via INTEGER NOT NULL,
  direct INTEGER NOT NULL,
  PRIMARY KEY (tenant, activity, seq, via)
) WITHOUT ROWID;
CREATE INDEX reach_activities_seq ON reach_activities(tenant, seq);
-- The query no longer walks StatementRefs forward in seq order.
DROP INDEX statements_refs_by_seq;
${reachBuildSql(SQLITE).join(';\n')};
`,
  },
  {
    version: 8,
    name: 'link rows and registrations indexed by seq bucket first (seq >> 16: SEQ_BUCKET_BITS in src/store/sql.ts)',
    rebuilds: { count: 'SELECT count(*) AS n FROM statements', message: 'putting link rows into seq buckets' },
    // The link tables rebuilt in their new key order (sequential appends), the registration index
    // built again on its new key.
    sql: `
CREATE TABLE statement_agents_bucketed (
  tenant INTEGER NOT NULL,
  bucket INTEGER NOT NULL,              -- seq >> 16
  agent INTEGER NOT NULL,               -- keys.id
  seq INTEGER NOT NULL,
  role INTEGER NOT NULL,                -- see AGENT_ROLE in src/xapi/statement.ts
  PRIMARY KEY (tenant, bucket, agent, seq)
) WITHOUT ROWID;
INSERT INTO statement_agents_bucketed (tenant, bucket, agent, seq, role)
SELECT tenant, seq >> 16, agent, seq, role FROM statement_agents ORDER BY 1, 2, 3, 4;
DROP TABLE statement_agents;
ALTER TABLE statement_agents_bucketed RENAME TO statement_agents;

CREATE TABLE statement_activities_bucketed (
  tenant INTEGER NOT NULL,
  bucket INTEGER NOT NULL,              -- seq >> 16
  activity INTEGER NOT NULL,            -- keys.id
  seq INTEGER NOT NULL,
  direct INTEGER NOT NULL,              -- 1: object (activity filter); 0: context/substatement (related_activities)
  PRIMARY KEY (tenant, bucket, activity, seq)
) WITHOUT ROWID;
INSERT INTO statement_activities_bucketed (tenant, bucket, activity, seq, direct)
SELECT tenant, seq >> 16, activity, seq, direct FROM statement_activities ORDER BY 1, 2, 3, 4;
DROP TABLE statement_activities;
ALTER TABLE statement_activities_bucketed RENAME TO statement_activities;

DROP INDEX statements_registration;
CREATE INDEX statements_registration ON statements(tenant, (seq >> 16), registration, seq) WHERE registration IS NOT NULL;
`,
  },
  {
    version: 9,
    name: "canonical activity definitions keyed by the activity IRI's key id",
    // A new activity's definition is then appended (key ids grow), not put at a random place
    // among long text keys.
    sql: `
CREATE TABLE definitions (
  key INTEGER PRIMARY KEY,              -- keys.id of the activity IRI (which names its tenant)
  definition TEXT NOT NULL              -- the canonical definition (JSON)
);
INSERT OR IGNORE INTO tenants (name) SELECT DISTINCT tenant FROM activities;
INSERT OR IGNORE INTO keys (tenant, key) SELECT t.id, a.id FROM activities a JOIN tenants t ON t.name = a.tenant;
INSERT INTO definitions (key, definition)
SELECT k.id, a.definition FROM activities a JOIN tenants t ON t.name = a.tenant JOIN keys k ON k.tenant = t.id AND k.key = a.id ORDER BY k.id;
DROP TABLE activities;
`,
  },
  {
    version: 10,
    name: 'statement ids in two levels: recent ids apart, merged into the rest in bulk',
    rebuilds: { count: 'SELECT count(*) AS n FROM statements', message: 'moving statement ids to their own index' },
    // Statement ids are random (client UUIDs): under a unique index on statements, every insert at
    // 1M statements dirtied a leaf of a 3,500-page B-tree kept ≈ 92 % full (splits, rebalancing),
    // 50 KB written per statement against 22 KB without it (docs/performance.md, "Batch ingest"). New
    // ids go to a small table; every few thousand statements (idLevelsDue in ids.ts; through a
    // middle level since 18) they move to the large one in key order, touching each of its pages
    // once. A lookup probes every level (the statement_seqs view).
    sql: `
CREATE TABLE statement_ids (
  tenant INTEGER NOT NULL,
  id BLOB NOT NULL,                     -- the UUID's 16 bytes
  seq INTEGER NOT NULL,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE TABLE statement_ids_new (        -- ids of statements after id_merge.through
  tenant INTEGER NOT NULL,
  id BLOB NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE TABLE id_merge (one INTEGER PRIMARY KEY CHECK (one = 1), through INTEGER NOT NULL);
INSERT INTO statement_ids (tenant, id, seq) SELECT tenant, id, seq FROM statements ORDER BY tenant, id;
INSERT INTO id_merge (one, through) VALUES (1, (SELECT coalesce(max(seq), 0) FROM statements));
DROP INDEX statements_id;
CREATE VIEW statement_seqs AS SELECT tenant, id, seq FROM statement_ids_new UNION ALL SELECT tenant, id, seq FROM statement_ids;
`,
  },
  {
    version: 11,
    name: 'attachment links say who carried the data: only a statement whose request brought it gives it to readers',
    // carrier: the key id of the statement's authority (0 when it has none) when its request
    // carried the data as a part, NULL when it only declared the hash. Existing links are taken as
    // carried by their statement (what was served before). A restricted reader's check is one
    // probe of (sha2, carrier); erasure keeps the data while a carrying link remains.
    sql: `
ALTER TABLE statement_attachments ADD COLUMN carrier INTEGER;
UPDATE statement_attachments SET carrier = coalesce((SELECT authority FROM statements s WHERE s.seq = statement_attachments.seq), 0);
DROP INDEX statement_attachments_sha2;
CREATE INDEX statement_attachments_carrier ON statement_attachments(sha2, carrier) WHERE carrier IS NOT NULL;
`,
  },
  {
    version: 12,
    name: 'the rules a statement stored under lax validation broke, kept beside it',
    // A side table, so that the statements table and the strict write path stay as they were: a
    // row only for a statement accepted with violations (docs/validation.md).
    sql: `
CREATE TABLE statement_violations (
  seq INTEGER PRIMARY KEY,              -- statements.seq
  violations TEXT NOT NULL              -- JSON list of {loc, msg, type}: the rules it broke
);
`,
  },
];
