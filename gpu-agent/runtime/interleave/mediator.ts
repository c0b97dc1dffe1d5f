// One invoke as the interleaver sees it (nnsight's mediator): a state machine — running (the host reads its
// messages), waiting (parked until the pass reaches what it waits for), ended — and what the invoke asked of the
// pass: swaps and skips ahead, caches, its generated tokens and how it finished.
import type { SavedTree, TensorPayload } from '../../../protocol/interleave.js';
import { formatAddr, stepAddr } from '../../../protocol/interleave.js';
import { positionAddr } from '../../../protocol/extra-addrs.js';
import type { ObservationPoint } from '../graph/addresses.js';
import type { Finish } from '../generation/stopping.js';
import type { HostCache } from './caches.js';

/** What a waiting invoke waits for. */
export type Wait =
  /** A module point of step `step`. */
  | { kind: 'point'; step: number; point: ObservationPoint; position?: number }
  /** The start of step `step` (`step.<i>`, m.iter): before every point of the step. */
  | { kind: 'step'; step: number }
  /** Cache `id`: answered where the pass serves its last point. */
  | { kind: 'cache'; step: number; point: ObservationPoint; id: number; addr: string }
  /** A barrier (no point of the pass: the pass goes on without the invoke). */
  | { kind: 'barrier'; barrier: string; addr: string };

/** Waits answered at a point of the pass. */
export type PointWait = Extract<Wait, { kind: 'point' | 'cache' }>;

export type MediatorState = { status: 'running' } | { status: 'waiting'; wait: Wait } | { status: 'ended' };

/** The address a wait answers at. */
export function waitAddr(w: Wait): string {
  switch (w.kind) {
    case 'point': {
      const addr = formatAddr({ path: w.point.path, point: w.point.point, step: w.step });
      return w.position === undefined ? addr : positionAddr(w.position, addr);
    }
    case 'step':
      return stepAddr(w.step);
    case 'cache':
    case 'barrier':
      return w.addr;
  }
}

/** Why a wait the pass left unanswered has no value (`finished`: the invoke's row finished before its step). */
export function neverReached(
  w: Exclude<Wait, { kind: 'barrier' }>,
  stoppedEarly: boolean,
  steps: number,
  finished: string | undefined,
): string {
  const a =
    w.kind === 'step'
      ? `the start of step ${w.step}`
      : formatAddr({ path: w.point.path, point: w.point.point, step: w.step });
  if (stoppedEarly) return `the request stopped early (m.stop()) before the forward pass reached ${a}`;
  return (
    finished ??
    `the forward pass never reached ${a} (${steps} step${steps === 1 ? '' : 's'}${w.step >= steps ? `; steps are numbered from 0` : ''})`
  );
}

/** A map keyed by (step, key): swaps by point key, skips by module path. */
export class StepKeyed<T> {
  private readonly byStep = new Map<number, Map<string, T>>();

  get(step: number, key: string): T | undefined {
    return this.byStep.get(step)?.get(key);
  }

  has(step: number, key: string): boolean {
    return this.byStep.get(step)?.has(key) ?? false;
  }

  set(step: number, key: string, value: T): void {
    let m = this.byStep.get(step);
    if (!m) {
      m = new Map();
      this.byStep.set(step, m);
    }
    m.set(key, value);
  }

  delete(step: number, key: string): void {
    this.byStep.get(step)?.delete(key);
  }

  /** The keys set for `step`, in the order they were set. */
  keysAt(step: number): readonly string[] {
    const m = this.byStep.get(step);
    return m === undefined || m.size === 0 ? NONE : [...m.keys()];
  }
}

/** The keys of a step with nothing set (shared: callers only read it). */
const NONE: readonly string[] = [];

export class Mediator {
  private state: MediatorState = { status: 'running' };
  readonly caches = new Map<number, HostCache>();
  /** Swaps ahead of the pass, by step and point key. */
  readonly swaps = new StepKeyed<TensorPayload[]>();
  /** Skips, by step and module path: the module's output values. */
  readonly skips = new StepKeyed<TensorPayload[]>();
  stopped = false;
  result: SavedTree | undefined;
  readonly generated: number[] = [];
  finish: Finish | undefined;

  constructor(
    readonly index: number,
    /** First batch row and number of rows of the invoke. */
    readonly row: number,
    readonly rows: number,
  ) {}

  get status(): MediatorState['status'] {
    return this.state.status;
  }

  /** What the invoke waits for; undefined unless it is waiting. */
  get wait(): Wait | undefined {
    return this.state.status === 'waiting' ? this.state.wait : undefined;
  }

  /** The wait, when it is answered at a point of `step`. */
  pointWaitAt(step: number): PointWait | undefined {
    const w = this.wait;
    return w && (w.kind === 'point' || w.kind === 'cache') && w.step === step ? w : undefined;
  }

  park(wait: Wait): void {
    this.state = { status: 'waiting', wait };
  }

  /** Back to running: the host has answered (or is about to answer) its wait. */
  resume(): void {
    this.state = { status: 'running' };
  }

  end(result: SavedTree): void {
    this.result = result;
    this.state = { status: 'ended' };
  }
}
