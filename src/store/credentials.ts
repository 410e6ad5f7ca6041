/**
 * Credentials in the database (CredentialStore in ./types.ts) once for every backend, as programs
 * (./program.ts) run by the backend's CredentialPort: the same SQL on both. Each change bumps `credential_changes` in
 * its own transaction, so that a process that read the same counter has seen every change.
 */
import { LrsError } from '../errors.ts';
import type { Agent } from '../xapi/types.ts';
import { type Program, row, rows, run } from './program.ts';
import type { CredentialRow, CredentialStore } from './types.ts';

type Row = Record<string, unknown>;

/** How a backend runs credential programs: alone, or in one transaction. */
export interface CredentialPort {
  run<T>(program: Program<T>): Promise<T>;
  tx<T>(program: Program<T>): Promise<T>;
}

const COLS =
  'key, secret_hash, previous_hash, previous_until_ms, label, scopes, target, agent, validation, created_ms, expires_ms, last_used_ms, revoked_ms';

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

export class StoreCredentials implements CredentialStore {
  private readonly port: CredentialPort;

  constructor(port: CredentialPort) {
    this.port = port;
  }

  private *bump(): Program<void> {
    yield* run({ text: 'UPDATE credential_changes SET counter = counter + 1 WHERE one = 1', values: [] });
  }

  async createCredential(c: CredentialRow): Promise<void> {
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
    const self = this;
    await this.port.tx(
      (function* () {
        const n = yield* run({ text: `INSERT INTO credentials (${COLS}) VALUES (${values.map((_, i) => `$${i + 1}`).join(', ')}) ON CONFLICT (key) DO NOTHING`, values });
        // Thrown inside the transaction: it rolls back, nothing is written.
        if (n === 0) throw new LrsError('conflict', `a credential with the key ${JSON.stringify(c.key)} exists already`);
        yield* self.bump();
      })(),
    );
  }

  async getCredential(key: string): Promise<CredentialRow | undefined> {
    const r = await this.port.run(row({ text: `SELECT ${COLS} FROM credentials WHERE key = $1`, values: [key] }));
    return r && toRow(r);
  }

  async listCredentials(target?: string): Promise<CredentialRow[]> {
    const where = target === undefined ? '' : ' WHERE target = $1';
    const found = await this.port.run(rows({ text: `SELECT ${COLS} FROM credentials${where} ORDER BY key`, values: target === undefined ? [] : [target] }));
    return found.map(toRow);
  }

  revokeCredential(key: string, atMs: number): Promise<boolean> {
    const self = this;
    return this.port.tx(
      (function* () {
        const n = yield* run({ text: `UPDATE credentials SET revoked_ms = coalesce(revoked_ms, $1) WHERE key = $2`, values: [atMs, key] });
        if (n) yield* self.bump();
        return n > 0;
      })(),
    );
  }

  rotateCredential(key: string, secretHash: string, previousUntilMs?: number): Promise<boolean> {
    const keep = previousUntilMs !== undefined;
    const self = this;
    return this.port.tx(
      (function* () {
        const n = yield* run({
          text: `UPDATE credentials SET previous_hash = ${keep ? 'secret_hash' : 'NULL'}, previous_until_ms = $1, secret_hash = $2 WHERE key = $3 AND revoked_ms IS NULL`,
          values: [previousUntilMs ?? null, secretHash, key],
        });
        if (n) yield* self.bump();
        return n > 0;
      })(),
    );
  }

  async credentialsVersion(): Promise<number> {
    const r = await this.port.run(row({ text: 'SELECT counter FROM credential_changes WHERE one = 1', values: [] }));
    return Number(r?.counter ?? 0);
  }

  async touchCredentials(uses: { key: string; atMs: number }[]): Promise<void> {
    if (!uses.length) return;
    await this.port.tx(
      (function* () {
        for (const u of uses) {
          yield* run({ text: 'UPDATE credentials SET last_used_ms = $1 WHERE key = $2 AND (last_used_ms IS NULL OR last_used_ms < $1)', values: [u.atMs, u.key] });
        }
      })(),
    );
  }
}
