/**
 * Credentials in the database (CredentialStore in ./types.ts) once for every backend, as programs
 * (./program.ts, run by ./shared.ts): the same SQL on both. Each change bumps
 * `credential_changes` in its own transaction (the changes are run in one), so that a process
 * that read the same counter has seen every change.
 */
import { LrsError } from '../errors.ts';
import type { Agent } from '../xapi/types.ts';
import { type Program, row, rows, run } from './program.ts';
import type { CredentialRow } from './types.ts';

type Row = Record<string, unknown>;

const COLS = 'key, secret_hash, previous_hash, previous_until_ms, label, scopes, target, agent, validation, created_ms, expires_ms, last_used_ms, revoked_ms';

const num = (v: unknown): number | undefined => (v === null || v === undefined ? undefined : Number(v));

function toRow(r: Row): CredentialRow {
  const out: CredentialRow = {
    key: String(r.key),
    secretHash: String(r.secret_hash),
    label: String(r.label),
    scopes: JSON.parse(String(r.scopes)) as string[],
    target: String(r.target),
    agent: JSON.parse(String(r.agent)) as Agent,
    createdMs: Number(r.created_ms),
  };
  if (r.validation === 'strict' || r.validation === 'lax') out.validation = r.validation;
  if (r.previous_hash !== null && r.previous_hash !== undefined) out.previousHash = String(r.previous_hash);
  const optional = { previousUntilMs: num(r.previous_until_ms), expiresMs: num(r.expires_ms), lastUsedMs: num(r.last_used_ms), revokedMs: num(r.revoked_ms) };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) (out as unknown as Record<string, number>)[k] = v;
  return out;
}

function* bump(): Program<void> {
  yield* run({ text: 'UPDATE credential_changes SET counter = counter + 1 WHERE one = 1', values: [] });
}

/** In a transaction: adds it and bumps the counter; LrsError 'conflict' when the key exists (thrown inside, so nothing is written). */
export function* createCredential(c: CredentialRow): Program<void> {
  const values = [
    c.key,
    c.secretHash,
    c.previousHash ?? null,
    c.previousUntilMs ?? null,
    c.label,
    JSON.stringify(c.scopes),
    c.target,
    JSON.stringify(c.agent),
    c.validation ?? null,
    c.createdMs,
    c.expiresMs ?? null,
    c.lastUsedMs ?? null,
    c.revokedMs ?? null,
  ];
  const n = yield* run({ text: `INSERT INTO credentials (${COLS}) VALUES (${values.map((_, i) => `$${i + 1}`).join(', ')}) ON CONFLICT (key) DO NOTHING`, values });
  if (n === 0) throw new LrsError('conflict', `a credential with the key ${JSON.stringify(c.key)} exists already`);
  yield* bump();
}

export function* getCredential(key: string): Program<CredentialRow | undefined> {
  const r = yield* row({ text: `SELECT ${COLS} FROM credentials WHERE key = $1`, values: [key] });
  return r && toRow(r);
}

export function* listCredentials(target?: string): Program<CredentialRow[]> {
  const where = target === undefined ? '' : ' WHERE target = $1';
  const found = yield* rows({ text: `SELECT ${COLS} FROM credentials${where} ORDER BY key`, values: target === undefined ? [] : [target] });
  return found.map(toRow);
}

/** In a transaction: marks it revoked (a second revoke keeps the first time) and bumps the counter; false when the key is unknown. */
export function* revokeCredential(key: string, atMs: number): Program<boolean> {
  const n = yield* run({ text: 'UPDATE credentials SET revoked_ms = coalesce(revoked_ms, $1) WHERE key = $2', values: [atMs, key] });
  if (n) yield* bump();
  return n > 0;
}

/** In a transaction: the new secret of a credential not revoked (see CredentialStore.rotateCredential) and the counter bumped. */
export function* rotateCredential(key: string, secretHash: string, previousUntilMs?: number): Program<boolean> {
  const keep = previousUntilMs !== undefined;
  const n = yield* run({
    text: `UPDATE credentials SET previous_hash = ${keep ? 'secret_hash' : 'NULL'}, previous_until_ms = $1, secret_hash = $2 WHERE key = $3 AND revoked_ms IS NULL`,
    values: [previousUntilMs ?? null, secretHash, key],
  });
  if (n) yield* bump();
  return n > 0;
}

export function* credentialsVersion(): Program<number> {
  const r = yield* row({ text: 'SELECT counter FROM credential_changes WHERE one = 1', values: [] });
  return Number(r?.counter ?? 0);
}

/** In a transaction: raises each key's last use (never lowers it); the counter stays. */
export function* touchCredentials(uses: { key: string; atMs: number }[]): Program<void> {
  for (const u of uses) {
    yield* run({ text: 'UPDATE credentials SET last_used_ms = $1 WHERE key = $2 AND (last_used_ms IS NULL OR last_used_ms < $1)', values: [u.atMs, u.key] });
  }
}
