// Scheduler settings (all overridable) and what it needs to know about models it may deploy on demand.
import type { DeploymentSettingsInput } from '../domain/deployment/settings.js';

export interface OnDemandModel {
  /** Settings for a deployment created on demand (weightsBytes from the model's ONNX file). */
  settings: DeploymentSettingsInput;
}

export interface SchedulerConfig {
  /** An ACTIVE agent without a heartbeat for this long is marked UNRESPONSIVE. Default 6000 ms. */
  heartbeatTimeoutMs: number;
  /** An UNRESPONSIVE agent is waited for this long (a restart) before it is LOST. Default 30000 ms. */
  agentGraceMs: number;
  /** How often autoscale is considered. Default 5000 ms (NDIF). */
  autoscaleCheckMs: number;
  /** Time-based rules (heartbeats, timeouts, autoscale) run on ticks at least this far apart. Default 1000 ms. */
  tickMs: number;
  /** Results are deleted (ResultExpired) this long after their request completed; null: kept. Default 24 h. */
  resultRetentionMs: number | null;
  /** Upper bound on plan → execute rounds in one step (each round waits for the view to catch up). Default 50. */
  maxRoundsPerStep: number;
  /** Requested replicas evaluated for placement per round (the rest wait for the next round, in order). Default 32. */
  maxPlacementsPerRound: number;
  /** Requests dispatched per round, over all models (a round's decisions stay bounded). Default 128. */
  maxDispatchesPerRound: number;
  /**
   * Models a queued request may deploy on demand: settings for the deployment, or undefined when the model key
   * is not allowed (its queued requests then fail with ModelNotDeployable).
   */
  onDemand(modelKey: string): OnDemandModel | undefined;
}

export const DEFAULT_SCHEDULER_CONFIG: Omit<SchedulerConfig, 'onDemand'> = {
  heartbeatTimeoutMs: 6000,
  agentGraceMs: 30_000,
  autoscaleCheckMs: 5000,
  tickMs: 1000,
  maxRoundsPerStep: 50,
  maxPlacementsPerRound: 32,
  maxDispatchesPerRound: 128,
  resultRetentionMs: 24 * 3_600_000,
};

export const SCHEDULER_ACTOR = 'system:scheduler';
