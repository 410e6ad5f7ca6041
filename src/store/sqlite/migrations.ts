/**
 * Versioned SQLite schema. Append new versions; never edit an applied one.
 *
 * Where it differs from PostgreSQL's (../postgres/migrations.ts) on purpose: one process writes
 * the file through one connection, and what costs is the pages a commit dirties and the WAL
 * checkpoint writes back. So the link tables are keyed (tenant, bucket, key, seq) and the
 * registration index (tenant, seq >> 16, registration, seq) (version 8: writes dirty the newest
 * bucket's pages only, not a random page of each key's range); statement ids live in levels
 * (versions 10 and 18: recent ids in a small table merged in key order into a middle one, and that
 * into the large one, since random UUIDs dirtied a page of the one large index per statement). PostgreSQL, whose ingest kept its
 * pace as the store grew, needs neither, and keys its link tables without the tenant.
 */
import { EARLY_MIGRATIONS, type Migration } from './migrations-early.ts';

export type { Migration } from './migrations-early.ts';

/** The page size of a new database (the raw-limit baseline of `npm run bench` uses the same). */
export const PAGE_SIZE = 8192;
/** WAL pages after which a commit checkpoints: LECTERN_SQLITE_WAL_AUTOCHECKPOINT's default (the benchmark's raw loop uses it too). */
export const WAL_AUTOCHECKPOINT = 20_000;

/**
 * MiB of pages each connection caches unless LECTERN_SQLITE_CACHE_SIZE says otherwise. SQLite's own
 * 2 MiB (250 pages of 8 KB) is less than a page of 100 statements scattered over the file takes
 * with its index pages: a course's page at 1M re-read them from the operating system on every
 * request. 4 MiB held the course's page but not a combined filter's probes (p99 33 ms against 23);
 * 8 MiB was no faster than 6 and peaked higher.
 */
export const CACHE_MIB = 6;

/**
 * The writing connection's cache for a store that has held `statements`: 1 MiB per 312,500 (32 at
 * 10M), at least CACHE_MIB, at most 32. Each group commit touches the newest bucket's pages of
 * every link table and the registration index, and the middle level of statement ids (≈ 25 MB at
 * 10M statements); with 6 MiB at 11–13M the writer re-read ≈ 32 KB per statement from the
 * operating system and ingested 8.1–8.6k statements/s, with 32 MiB 9.5k (64 MiB: 9.3k). A small
 * store keeps the smaller cache (peak RSS at 120k: 216 MB with 32 MiB, 171–190 with 6).
 */
export const writerCacheMiB = (statements: number): number => Math.min(32, Math.max(CACHE_MIB, Math.ceil(statements / 312_500)));

/** SQLite's `cache_size` pragma value for `mib` MiB (negative: in KiB). */
export const cacheSize = (mib = CACHE_MIB): number => -mib * 1024;

export const MIGRATIONS: Migration[] = [
  ...EARLY_MIGRATIONS,
  {
    version: 13,
    name: 'rejected writes kept for the operator (src/ops/rejections.ts), bounded per store',
    // AUTOINCREMENT: an id is never given again after the oldest rows are trimmed, so the id an
    // operator read in \`lectern rejections list\` names the same rejection until it goes.
    sql: `
CREATE TABLE rejections (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  username TEXT NOT NULL,
  method TEXT NOT NULL,
  path TEXT NOT NULL,
  query TEXT NOT NULL,                  -- JSON: the query parameters
  status INTEGER NOT NULL,
  reasons TEXT NOT NULL,                -- JSON: [{loc, msg, type, requirement?}]
  types TEXT NOT NULL,                  -- ' type1 type2 ': what --reason matches
  headers TEXT NOT NULL,                -- JSON: content-type, if-match, if-none-match as sent
  version TEXT NOT NULL,
  body BLOB,                            -- up to LECTERN_REJECTIONS_MAX_BODY bytes; NULL: none read
  body_bytes INTEGER NOT NULL,          -- the body's size as received
  writer TEXT NOT NULL                  -- JSON: the credential's agent and access, for replay
);
CREATE INDEX rejections_tenant ON rejections(tenant, id);
CREATE INDEX rejections_at ON rejections(at_ms);
`,
  },
  {
    version: 14,
    name: 'credentials in the database: key and secret pairs with scopes, and a change counter every process reads',
    // The secret is kept as its SHA-256 only (src/auth/database.ts). JSON as text: the scopes and
    // the agent are only ever read whole. Times are epoch ms. credential_changes is bumped by every
    // create, revoke and rotation: a server reads it every few seconds and drops its cached rows
    // when it moved (last_used_ms writes leave it alone).
    sql: `
CREATE TABLE credentials (
  key TEXT PRIMARY KEY,
  secret_hash TEXT NOT NULL,
  previous_hash TEXT,                    -- the secret before a rotation, during its grace
  previous_until_ms INTEGER,
  label TEXT NOT NULL DEFAULT '',
  scopes TEXT NOT NULL,                  -- JSON list of scope names
  target TEXT NOT NULL DEFAULT '',
  agent TEXT NOT NULL,                   -- JSON Agent (the authority of its statements)
  validation TEXT,                       -- 'strict' or 'lax'; NULL: the server's default
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  last_used_ms INTEGER,
  revoked_ms INTEGER
) WITHOUT ROWID;
CREATE TABLE credential_changes (one INTEGER PRIMARY KEY CHECK (one = 1), counter INTEGER NOT NULL);
INSERT INTO credential_changes (one, counter) VALUES (1, 0);
`,
  },
  {
    version: 15,
    name: 'the audit log of admin actions',
    // Append-only; listed newest first by id, by store (target: NULL for server-wide actions).
    sql: `
CREATE TABLE admin_audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time_ms INTEGER NOT NULL,
  actor TEXT NOT NULL,
  role TEXT NOT NULL,
  via TEXT NOT NULL,                    -- http | cli
  client TEXT NOT NULL,                 -- the client's address, or the CLI's host
  action TEXT NOT NULL,
  target TEXT,                          -- the store acted on; NULL: the server as a whole
  details TEXT NOT NULL                 -- JSON: counts, keys, urls; never a secret
);
CREATE INDEX admin_audit_target ON admin_audit(target, id);
`,
  },
  {
    version: 16,
    name: "statements counted per store, day and verb, and per minute, as they are written: the console's Overview",
    rebuilds: { count: 'SELECT count(*) AS n FROM statements', message: 'counting statements per store, day and verb' },
    // src/store/overview.ts keeps them. The backfill reads every statement once (the statements
    // table in seq order, a temporary B-tree for the groups): 200k statements 0.47 s,
    // 1M 2.9 s (docs/console.md, "Overview"). The minutes start empty: they count arrivals from now on.
    sql: `
CREATE TABLE statement_counts (
  tenant INTEGER NOT NULL,              -- tenants.id
  day INTEGER NOT NULL,                 -- the UTC day of stored: stored_ms / 86400000
  verb INTEGER NOT NULL,                -- keys.id of the verb
  n INTEGER NOT NULL,
  PRIMARY KEY (tenant, day, verb)
) WITHOUT ROWID;
INSERT INTO statement_counts (tenant, day, verb, n) SELECT tenant, stored_ms / 86400000, verb, count(*) FROM statements GROUP BY 1, 2, 3;
CREATE TABLE statement_minutes (
  tenant INTEGER NOT NULL,
  minute INTEGER NOT NULL,              -- stored_ms / 60000; the last hour's only
  n INTEGER NOT NULL,
  PRIMARY KEY (tenant, minute)
) WITHOUT ROWID;
`,
  },
  {
    version: 17,
    name: "forwarding outbox rows found by statement: erase and prune remove a statement's rows without reading the whole outbox",
    // A target down for a day holds every statement since in the outbox; without this index each
    // deleted statement scanned it all.
    sql: `CREATE INDEX forward_outbox_seq ON forward_outbox(seq);`,
  },
  {
    version: 18,
    name: 'statement ids in three levels: recent ids merged into a middle level often, that into the rest rarely',
    // With two levels a merge rewrites most pages of the large level: at 10M statements 290 MB
    // every 63,000 statements (a 1.5 s commit, 4.6 KB written per statement, growing as √N). A
    // middle level takes the frequent merges; the large level is rewritten every few hundred
    // thousand (idLevelsDue in ids.ts). statement_ids_mid holds the ids of seqs in
    // (big_through, through]; statement_ids those up to big_through.
    sql: `
CREATE TABLE statement_ids_mid (
  tenant INTEGER NOT NULL,
  id BLOB NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
ALTER TABLE id_merge ADD COLUMN big_through INTEGER NOT NULL DEFAULT 0;
UPDATE id_merge SET big_through = through;
DROP VIEW statement_seqs;
CREATE VIEW statement_seqs AS
  SELECT tenant, id, seq FROM statement_ids_new UNION ALL
  SELECT tenant, id, seq FROM statement_ids_mid UNION ALL
  SELECT tenant, id, seq FROM statement_ids;
`,
  },
  {
    version: 19,
    name: 'statement ids in four levels: an upper level between the middle one and the rest',
    // With three levels the large one was rewritten every 430,000 statements at 10M (290 MB, a
    // 2 s commit and its write-back): an upper level takes the middle one's merges, and the large
    // level is rewritten every 1.7M (idLevelsDue in ids.ts). statement_ids_upper holds the ids of
    // seqs in (big_through, upper_through], statement_ids_mid those in (upper_through, through].
    // Instant: the upper level starts empty.
    sql: `
CREATE TABLE statement_ids_upper (
  tenant INTEGER NOT NULL,
  id BLOB NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
ALTER TABLE id_merge ADD COLUMN upper_through INTEGER NOT NULL DEFAULT 0;
UPDATE id_merge SET upper_through = big_through;
DROP VIEW statement_seqs;
CREATE VIEW statement_seqs AS
  SELECT tenant, id, seq FROM statement_ids_new UNION ALL
  SELECT tenant, id, seq FROM statement_ids_mid UNION ALL
  SELECT tenant, id, seq FROM statement_ids_upper UNION ALL
  SELECT tenant, id, seq FROM statement_ids;
`,
  },
  {
    version: 20,
    name: 'the console sessions signed out before their expiry: every process refuses a copy of their cookie',
    // Read by id on every console request; rows are deleted past expires_ms (the session's own
    // expiry, after which its cookie is refused anyway) by each sign-out.
    sql: `
CREATE TABLE ended_sessions (
  id TEXT PRIMARY KEY,
  expires_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX ended_sessions_expires ON ended_sessions(expires_ms);
`,
  },
  {
    version: 21,
    name: 'kept rejections found by credential: a store over LECTERN_REJECTIONS_MAX trims each credential to its fair share',
    // keepRejections (src/store/rejections.ts) counts a store's rows per username and deletes a
    // credential's oldest on every keep: both are ranges of this index. Instant: the table holds
    // at most LECTERN_REJECTIONS_MAX rows per store.
    sql: `CREATE INDEX rejections_writer ON rejections(tenant, username, id);`,
  },
  {
    version: 22,
    name: 'the Overview\'s counts bounded: at most 100 verbs per store and day, the rest in one "other" row',
    // src/store/overview.ts (VERBS_PER_DAY) keeps the bound from now on; this folds the rows stored
    // before: each (store, day)'s 100 heaviest verbs keep their row, the others' statements go to
    // the "other" row (verb 0). One sorted pass over statement_counts (docs/operations.md).
    sql: `
CREATE TEMP TABLE counts_folded AS
  SELECT tenant, day, verb, n FROM (SELECT tenant, day, verb, n, row_number() OVER (PARTITION BY tenant, day ORDER BY n DESC, verb) AS r FROM statement_counts WHERE verb <> 0)
  WHERE r > 100;
INSERT INTO statement_counts (tenant, day, verb, n) SELECT tenant, day, 0, sum(n) FROM counts_folded GROUP BY tenant, day;
DELETE FROM statement_counts WHERE (tenant, day, verb) IN (SELECT tenant, day, verb FROM counts_folded);
DROP TABLE counts_folded;
`,
  },
  {
    version: 23,
    name: "the audit's actor says what kind it is; kept rejections claimed by the replay under way",
    // Existing entries get the kind their row tells: the CLI's are the OS user's; an HTTP entry
    // whose actor is a database credential's key was that key (a key is never a credentials-file
    // user's name); the rest cannot be told apart (a file user or a token subject): unknown. A
    // claim expires by itself, so that a replay killed mid-way leaves nothing claimed for long.
    sql: `
ALTER TABLE admin_audit ADD COLUMN actor_kind TEXT NOT NULL DEFAULT 'unknown'; -- file-user | database-key | token-subject | os-user | unknown
UPDATE admin_audit SET actor_kind = CASE
  WHEN via = 'cli' THEN 'os-user'
  WHEN EXISTS (SELECT 1 FROM credentials c WHERE c.key = admin_audit.actor) THEN 'database-key'
  ELSE 'unknown' END;
ALTER TABLE rejections ADD COLUMN claim TEXT;                 -- the replay holding it (a random token)
ALTER TABLE rejections ADD COLUMN claimed_until_ms INTEGER;   -- until when; NULL: not claimed
`,
  },
];
