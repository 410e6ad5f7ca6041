/**
 * StatementRef targeting written at insert time, the same on both backends. A statement whose
 * object is a StatementRef "reaches" the statement it targets, and on through that one's
 * StatementRef, and so on (a chain is a path: one target per statement). For every statement it
 * reaches (`via`), it gets:
 *
 * - a `statement_reach` row (tenant, seq, via, verb, registration, authority): `via`'s verb and
 *   registration, and the authority every statement from `seq` to `via` shares (NULL when they
 *   differ), which is what `mine` asks of a chain;
 * - `reach_agents` / `reach_activities` rows: `via`'s own link rows under `seq`.
 *
 * So a filter finds the statements that target a match by one index range, as it finds the
 * matches themselves (src/store/sql.ts), instead of walking chains at query time. The rows of a
 * StatementRef are (re)built by walking its chain (ReachWalk) when it is stored, when a statement
 * it reaches (or would reach, once the chain is complete) is stored, erased or rewritten.
 */
import { indexRows } from '../xapi/statement.ts';
import type { Statement } from '../xapi/types.ts';
import type { Program } from './program.ts';

/** A stored statement as the walk reads it (by id). `registration` in the backend's own form. */
export interface ReachStatement {
  seq: number;
  /** Lower-case text form. */
  id: string;
  refId: string | null;
  verb: number;
  registration: unknown;
  authority: number | null;
  full: string;
}

/** A statement whose reach rows are (re)built: a StatementRef, with its target's id. */
export interface ReachSeed {
  seq: number;
  refId: string;
  authority: number | null;
}

export interface ReachRows {
  reach: { seq: number; via: number; verb: number; registration: unknown; authority: number | null }[];
  agents: { agent: number; seq: number; via: number; role: number }[];
  activities: { activity: number; seq: number; via: number; direct: number }[];
}

/** The authority two stretches of a chain share, if they do. */
const shared = (a: number | null, b: number | null): number | null => (a !== null && a === b ? a : null);

interface Walker {
  seed: number;
  authority: number | null;
  next: string;
  visited: Set<number>;
}

/**
 * Walks the chains of several seeds at once, one level per step, so a backend asks for each
 * level's targets in one read: `while ((ids = walk.wanted()).length) walk.found(read(ids))`, then
 * `walk.rows(keyIds(walk.keys()))`. A chain ends at a target that is not stored, or at a
 * statement it has already passed (a cycle of ids).
 */
export class ReachWalk {
  private walkers: Walker[];
  private readonly reached: { seed: number; authority: number | null; target: ReachStatement }[] = [];
  private readonly parsed = new Map<number, ReturnType<typeof indexRows>>();

  constructor(seeds: Iterable<ReachSeed>) {
    this.walkers = [...seeds].map((s) => ({ seed: s.seq, authority: s.authority, next: s.refId, visited: new Set([s.seq]) }));
  }

  /** The ids of the statements the next level targets. */
  wanted(): string[] {
    return [...new Set(this.walkers.map((w) => w.next))];
  }

  /** The stored statements among wanted() (missing ones end their chains). */
  found(statements: ReachStatement[]): void {
    const byId = new Map(statements.map((st) => [st.id, st]));
    const next: Walker[] = [];
    for (const w of this.walkers) {
      const t = byId.get(w.next);
      if (!t || w.visited.has(t.seq)) continue;
      w.visited.add(t.seq);
      const authority = shared(w.authority, t.authority);
      this.reached.push({ seed: w.seed, authority, target: t });
      if (t.refId !== null) next.push({ ...w, authority, next: t.refId });
    }
    this.walkers = next;
  }

  /** The keys (agent keys, activity IRIs) of every statement reached, whose ids rows() needs. */
  keys(): string[] {
    const keys = new Set<string>();
    for (const { target } of this.reached) {
      const rows = this.indexed(target);
      for (const a of rows.agents) keys.add(a.key);
      for (const a of rows.activities) keys.add(a.id);
    }
    return [...keys];
  }

  /** A reached statement's own link rows, from its JSON as prepareStatement made them at insert. */
  private indexed(t: ReachStatement): ReturnType<typeof indexRows> {
    let rows = this.parsed.get(t.seq);
    if (!rows) this.parsed.set(t.seq, (rows = indexRows(JSON.parse(t.full) as Statement)));
    return rows;
  }

  /** The rows to store, given the dictionary ids of keys(). */
  rows(ids: ReadonlyMap<string, number>): ReachRows {
    const out: ReachRows = { reach: [], agents: [], activities: [] };
    for (const { seed, authority, target: t } of this.reached) {
      out.reach.push({ seq: seed, via: t.seq, verb: t.verb, registration: t.registration, authority });
      const rows = this.indexed(t);
      for (const a of rows.agents) out.agents.push({ agent: ids.get(a.key)!, seq: seed, via: t.seq, role: a.role });
      for (const a of rows.activities) out.activities.push({ activity: ids.get(a.id)!, seq: seed, via: t.seq, direct: a.direct ? 1 : 0 });
    }
    return out;
  }
}

/** What differs in the backends' reach SQL (SQLite: row by row on its connection; PostgreSQL: arrays, one statement per step). */
export interface ReachDialect {
  /** Deletes the reach rows of `stored` and of every statement reaching one of them; returns those that are StatementRefs, as seeds. */
  forget(tenant: number, stored: number[]): Program<ReachSeed[]>;
  /** The stored statements with these ids (a level of the walk). */
  targets(tenant: number, ids: string[]): Program<ReachStatement[]>;
  /** The dictionary ids of these keys (`known`: ids the caller has already). */
  keyIds(tenant: number, keys: string[], known?: ReadonlyMap<string, number>): Program<ReadonlyMap<string, number>>;
  write(tenant: number, rows: ReachRows): Program<void>;
}

/**
 * Writes the reach rows of new StatementRefs (`seeds`), and rebuilds those of the statements in
 * `stored` and of every statement reaching one of them: a statement they target has arrived, or a
 * statement of their chains was erased or rewritten. Both backends' write paths run it in their
 * transaction (src/store/program.ts).
 */
export function* rebuildReach(d: ReachDialect, tenant: number, seeds: ReachSeed[], stored: number[], known?: ReadonlyMap<string, number>): Program<void> {
  const all = new Map(seeds.map((s) => [s.seq, s]));
  if (stored.length) for (const s of yield* d.forget(tenant, stored)) all.set(s.seq, s);
  if (!all.size) return;
  const walk = new ReachWalk(all.values());
  for (let ids = walk.wanted(); ids.length; ids = walk.wanted()) walk.found(yield* d.targets(tenant, ids));
  yield* d.write(tenant, walk.rows(yield* d.keyIds(tenant, walk.keys(), known)));
}
