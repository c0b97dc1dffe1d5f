// Events of the agent (node) aggregate, stream `agent-<agentId>`. Heartbeats are not stored; only the state
// changes they cause (unresponsive, returned, lost).
import { z } from 'zod';
import { agentExit, bytes, id, isoTime } from './common.js';

export const gpuSpec = z.object({
  index: z.number().int().min(0).max(63),
  memoryBytes: z.number().int().positive(),
  name: z.string().max(100),
});
export type GpuSpec = z.infer<typeof gpuSpec>;

export const agentEventSchemas = {
  AgentRegistered: z.object({
    agentId: id,
    bootId: id,
    gpus: z.array(gpuSpec).min(1),
    ramBytes: bytes,
    /** CPU memory for WARM replicas: 90 % of node RAM unless the agent declares otherwise. */
    cpuCacheBudgetBytes: bytes,
    registeredAt: isoTime,
    /** The boot it replaces (a restart), null on first registration. */
    previousBootId: id.nullable(),
    previousState: z.enum(['ACTIVE', 'UNRESPONSIVE', 'LOST', 'DRAINING', 'DRAINED']).nullable(),
    /** How the boot it replaces ended, as the new boot learned it (absent in events recorded before it existed). */
    previousExit: agentExit.nullable().optional(),
  }),
  AgentUnresponsive: z.object({
    agentId: id,
    bootId: id,
    lastSeenAt: isoTime,
    timeoutMs: z.number().int().positive(),
    graceUntil: isoTime,
  }),
  AgentReturned: z.object({ agentId: id, bootId: id, downMs: z.number().int().nonnegative() }),
  AgentLost: z.object({ agentId: id, bootId: id, lastSeenAt: isoTime, graceUntil: isoTime, lostAt: isoTime }),
  AgentDrainRequested: z.object({ agentId: id, by: id }),
  AgentDrained: z.object({ agentId: id }),
} as const;
