// What a forward pass keeps for a backward: each run (the piece of the pass that ran as one segment) with the
// tensors it read and produced, exactly as they were (onnxruntime tensors are never mutated; a swap puts a new one
// in the table), and every tensor a block replaced at a cut. Kept only in requests that record (uses-gradients.ts),
// for one step: the checkpoints of the pass are the cuts it made anyway.
import type { OrtTensor } from '../ort/session.js';
import type { InputAlias } from '../segments/segment-model.js';

export interface ForwardRun {
  start: number;
  end: number;
  aliases: InputAlias[];
  /** Inputs the run was fed and outputs it produced, by name. */
  values: Map<string, OrtTensor>;
  /** Every invoke skipped the module [start, end): only its shape arithmetic ran. */
  skipped: boolean;
}

export interface Replacement {
  /** The cut where the value was replaced (a module's output or input point). */
  cut: number;
  tensor: string;
  /** The invoke whose rows were replaced, or 'all' (a module every invoke skipped). */
  invoke: number | 'all';
}

export class ForwardRecord {
  readonly runs: ForwardRun[] = [];
  readonly replaced: Replacement[] = [];

  constructor(
    readonly step: number,
    readonly batch: number,
    readonly sequence: number,
  ) {}

  add(run: ForwardRun): void {
    this.runs.push(run);
  }

  replace(cut: number, tensor: string, invoke: number | 'all'): void {
    this.replaced.push({ cut, tensor, invoke });
  }

  /** The run that computed [lo, hi) (every backward segment lies inside one). */
  runCovering(lo: number, hi: number): ForwardRun | undefined {
    return this.runs.find((r) => r.start <= lo && hi <= r.end);
  }

  /** Every cut where a run started or ended, or a value was replaced, ascending. */
  boundaries(): number[] {
    const cuts = new Set<number>();
    for (const r of this.runs) {
      cuts.add(r.start);
      cuts.add(r.end);
    }
    for (const r of this.replaced) cuts.add(r.cut);
    return [...cuts].sort((a, b) => a - b);
  }
}
