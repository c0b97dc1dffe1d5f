// Commands of the agent (node) aggregate, stream `agent-<agentId>`.
import type { AgentExit, GpuSpec } from '../events/index.js';

export interface RegisterAgent {
  type: 'RegisterAgent';
  agentId: string;
  /** Unique per process start of the agent: a new boot id means its GPUs hold nothing any more. */
  bootId: string;
  gpus: GpuSpec[];
  ramBytes: number;
  /** Default: 90 % of ramBytes. */
  cpuCacheBudgetBytes?: number;
  /** How the previous boot of this agent ended, as this boot learned it (its supervisor, its own last words). */
  previousExit?: AgentExit;
  at: string;
}

export interface ReportAgentHeartbeat {
  type: 'ReportAgentHeartbeat';
  agentId: string;
  bootId: string;
  at: string;
}

/** Scheduler: no heartbeat for `timeoutMs`; the agent is waited for until `at + graceMs`. */
export interface MarkAgentUnresponsive {
  type: 'MarkAgentUnresponsive';
  agentId: string;
  bootId: string;
  lastSeenAt: string;
  timeoutMs: number;
  graceMs: number;
  at: string;
}

/** Scheduler: the grace period passed without a heartbeat or a new registration. */
export interface MarkAgentLost {
  type: 'MarkAgentLost';
  agentId: string;
  bootId: string;
  at: string;
}

export interface DrainAgent {
  type: 'DrainAgent';
  agentId: string;
  actor: string;
  at: string;
}

export interface CompleteAgentDrain {
  type: 'CompleteAgentDrain';
  agentId: string;
  at: string;
}

export type AgentCommand =
  | RegisterAgent
  | ReportAgentHeartbeat
  | MarkAgentUnresponsive
  | MarkAgentLost
  | DrainAgent
  | CompleteAgentDrain;
