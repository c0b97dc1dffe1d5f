// One planning round: the view it reads, the time, and the commands it plans, each with the ids that chain it to
// the event that caused it (causation) and the operation it belongs to (correlation).
import type { ControlPlaneCommand } from '../domain/commands.js';
import type { EventRef } from '../projections/decode.js';
import type { ControlPlaneState } from '../projections/control-plane/state.js';
import type { SchedulerConfig } from './config.js';

export interface PlannedCommand {
  /** Deterministic from the decision, so a restarted scheduler repeating it is a no-op. */
  commandId: string;
  command: ControlPlaneCommand;
  causationId: string;
  correlationId: string;
}

export interface PlanInput {
  state: ControlPlaneState;
  nowMs: number;
  /** Run the time-based rules (agent health, timeouts) in this round. */
  tick: boolean;
  /** Run autoscale in this round. */
  autoscale: boolean;
  /** Last heartbeat per agent and boot, as observed by this scheduler. */
  heartbeats: ReadonlyMap<string, { bootId: string; atMs: number }>;
  /** When this scheduler started: an agent is given a full heartbeat timeout from then. */
  startedAtMs: number;
  config: SchedulerConfig;
}

export class PlanContext {
  readonly planned: PlannedCommand[] = [];
  /** Requests already given a command this round (a later rule leaves them alone). */
  readonly touchedRequests = new Set<string>();
  readonly touchedReplicas = new Set<string>();
  /** Requests in flight per submitter, counting the dispatches planned this round (computed when first needed). */
  running: Map<string, number> | undefined;

  constructor(readonly input: PlanInput) {}

  get state(): ControlPlaneState {
    return this.input.state;
  }

  get now(): number {
    return this.input.nowMs;
  }

  get nowIso(): string {
    return new Date(this.input.nowMs).toISOString();
  }

  emit(commandId: string, command: ControlPlaneCommand, cause: EventRef): void {
    this.planned.push({ commandId, command, causationId: cause.id, correlationId: cause.correlationId });
  }
}
