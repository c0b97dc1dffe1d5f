// What the interleaver's helpers (caches.ts, edits.ts) read of the run: where the pass is and how an invoke's values
// are cut from its table.
import type { TensorPayload } from '../../../protocol/interleave.js';
import type { ObservationPoint } from '../graph/addresses.js';
import type { ModuleNode } from '../graph/model-graph.js';
import { isWithin } from '../graph/scopes.js';
import type { ForwardRun, HostContext } from './host-context.js';
import type { Mediator } from './mediator.js';

export interface PassView {
  readonly ctx: HostContext;
  readonly mediators: Mediator[];
  /** The step the pass is at. */
  readonly step: number;
  /** Rank of the last point served in the current step (-1: none yet). */
  readonly rank: number;
  /** Steps the request runs. */
  readonly steps: number;
  /** The current step's pass (undefined before the first). */
  readonly pass: ForwardRun | undefined;
  /** Set once no forward pass will run any more. */
  readonly finished: 'done' | 'stopped' | undefined;
  addrOf(p: ObservationPoint, step?: number): string;
  /** Where the pass is, in words. */
  here(): string;
  /** Whether (step, rank) lies behind the pass. */
  before(step: number, rank: number): boolean;
  /** The invoke's rows of the point's tensors. */
  valuesFor(inv: Mediator, p: ObservationPoint, position?: number): TensorPayload[];
  /** The alias carrying a swapped module input, when the point is that module's input. */
  aliasFor(tensor: string, p: ObservationPoint): string | undefined;
  /** Modules every invoke skips at this step. */
  skippedByAll(): ModuleNode[];
  /** The module this invoke skips at this step that `p` lies strictly inside. */
  skippedFor(inv: Mediator, p: ObservationPoint): string | undefined;
}

/** Whether `p` lies inside module `m` (not at its own points). */
export function strictlyInside(p: ObservationPoint, m: ModuleNode): boolean {
  return p.path !== m.path && isWithin(p.path, m.path);
}
