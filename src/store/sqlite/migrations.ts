/** Versioned SQLite schema. Append new versions; never edit an applied one. */
export const MIGRATIONS: { version: number; name: string; sql: string }[] = [
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
];
