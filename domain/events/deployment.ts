// Events of the deployment aggregate, stream `deployment-<modelKey>`: the deployment's settings and every
// replica of it (replica ids are `<modelKey>#<n>`).
import { z } from 'zod';
import { agentReportIgnored, because, bytes, count, id, isoTime, sha256 } from './common.js';

export const autoscaleSettings = z.object({
  enabled: z.boolean(),
  /** Autoscale when the oldest queued request has waited longer than this. */
  thresholdMs: z.number().int().positive(),
  maxReplicas: z.number().int().positive().max(64),
  /** Least time between two autoscale steps of one deployment. */
  backoffMs: z.number().int().nonnegative(),
});

export const deploymentSettings = z.object({
  weightsBytes: bytes,
  paddingFactor: z.number().min(0).max(10),
  biasBytes: bytes,
  /** GPU memory the replica needs in all: weights × (1 + padding) + bias, unless the operator gave a size. */
  sizeBytes: z.number().int().positive(),
  gpus: z.number().int().min(1).max(16),
  dtype: z.string().min(1).max(32),
  /** Execution limit for requests that give none; null: none. */
  timeoutMs: z.number().int().positive().nullable(),
  /** Requests one replica runs at a time. */
  concurrency: z.number().int().min(1).max(64),
  /** A replica younger than this is not evicted to make room (unless forced). */
  minDeploymentMs: z.number().int().nonnegative(),
  autoscale: autoscaleSettings,
});
export type DeploymentSettings = z.infer<typeof deploymentSettings>;

export const replicaRequestReason = z.enum(['DEPLOY', 'ON_DEMAND', 'SCALE', 'AUTOSCALE', 'REPLACE']);
export const evictionReason = z.enum(['OPERATOR', 'MAKE_ROOM', 'SCALE_DOWN', 'AGENT_DRAINED', 'MODEL_EVICTED']);
export const removalReason = z.enum([
  'EVICTED',
  'MAKE_ROOM',
  'SCALE_DOWN',
  'AGENT_DRAINED',
  'MODEL_EVICTED',
  'AGENT_LOST',
  'AGENT_RESTARTED',
  'REFUSED',
  'WITHDRAWN',
  'RESTORED_INTO',
]);
export type RemovalReason = z.infer<typeof removalReason>;

export const candidateView = z.object({
  agentId: id,
  gpus: z.array(count),
  level: z.enum(['DEPLOYED', 'CACHED_AND_FREE', 'FREE', 'CACHED_AND_FULL', 'FULL', 'CANT_ACCOMMODATE']),
  freeBytes: bytes,
  evictableBytes: bytes,
  excluded: z.string().nullable(),
});

/**
 * Agents a placement decision does not list one by one (events list the chosen candidate and the best few
 * alternatives), counted by why: not-active, too-few-gpus, gpus-too-small, holds-model, no-room, worse-fit, and
 * not-ranked (not evaluated: the free-memory index ranked it below the ones evaluated). Absent: every agent is listed.
 */
export const candidatesOmitted = z.object({
  agents: z.number().int().nonnegative(),
  byReason: z.record(z.string().max(40), z.number().int().nonnegative()),
});

export const deploymentEventSchemas = {
  DeploymentRequested: z.object({
    modelKey: id,
    settings: deploymentSettings,
    replicas: z.number().int().positive(),
    onDemand: z.boolean(),
    pinned: z.boolean(),
    because: because.nullable(),
  }),
  ReplicaRequested: z.object({
    modelKey: id,
    replicaId: id,
    settings: deploymentSettings,
    reason: replicaRequestReason,
    /** The live replica whose settings were copied (scale, autoscale, replace). */
    copiedFrom: id.nullable(),
    /** Placement may evict pinned and young replicas for this one (an operator's forced deploy). */
    force: z.boolean(),
    requestedAt: isoTime,
  }),
  DeploymentScaled: z.object({
    modelKey: id,
    trigger: z.enum(['operator', 'autoscale']),
    fromReplicas: count,
    toReplicas: count,
    scaledAt: isoTime,
    because,
  }),
  ReplicaPlaced: z.object({
    modelKey: id,
    replicaId: id,
    agentId: id,
    /** The agent's boot the replica is placed on (a later boot must load it again). */
    bootId: id,
    gpus: z.array(count).min(1),
    bytesPerGpu: z.number().int().positive(),
    sizeBytes: z.number().int().positive(),
    placedAt: isoTime,
    level: candidateView.shape.level,
    candidates: z.array(candidateView),
    omitted: candidatesOmitted.optional(),
    because,
  }),
  /** A WARM replica goes back onto GPUs in place of a requested one (the requested one is closed). */
  ReplicaRestored: z.object({
    modelKey: id,
    replicaId: id,
    forReplicaId: id,
    agentId: id,
    bootId: id,
    gpus: z.array(count).min(1),
    bytesPerGpu: z.number().int().positive(),
    placedAt: isoTime,
    level: candidateView.shape.level,
    candidates: z.array(candidateView),
    omitted: candidatesOmitted.optional(),
    because,
  }),
  ReplicaLoading: z.object({ modelKey: id, replicaId: id, agentId: id }),
  ReplicaHot: z.object({
    modelKey: id,
    replicaId: id,
    agentId: id,
    hotAt: isoTime,
    loadMs: count.nullable(),
    /** sha256 fingerprint of the files the agent loaded (catalog/fingerprint.ts); absent in events from before it was reported. */
    weightsFingerprint: sha256.optional(),
  }),
  ReplicaFailed: z.object({
    modelKey: id,
    replicaId: id,
    agentId: id,
    phase: z.enum(['load', 'runtime']),
    message: z.string().max(20000),
    failedAt: isoTime,
  }),
  ReplicaDemotionRequested: z.object({ modelKey: id, replicaId: id, because }),
  ReplicaDemoted: z.object({ modelKey: id, replicaId: id, agentId: id, cpuBytes: bytes }),
  ReplicaEvictionRequested: z.object({
    modelKey: id,
    replicaId: id,
    reason: evictionReason,
    force: z.boolean(),
    because,
  }),
  ReplicaRemoved: z.object({ modelKey: id, replicaId: id, reason: removalReason, because }),
  ReplicaReloadRequired: z.object({ modelKey: id, replicaId: id, agentId: id, previousBootId: id, bootId: id }),
  DeploymentRefused: z.object({
    modelKey: id,
    replicaId: id,
    neededBytes: z.number().int().positive(),
    bytesPerGpu: z.number().int().positive(),
    gpus: z.number().int().positive(),
    bestGpuFreeBytes: bytes,
    evictableBytes: bytes,
    candidates: z.array(candidateView),
    omitted: candidatesOmitted.optional(),
    refusedAt: isoTime,
    because,
  }),
  DeploymentPinned: z.object({ modelKey: id, pinned: z.boolean(), by: id }),
  DeploymentEvicted: z.object({ modelKey: id, by: id, force: z.boolean() }),
  AgentReportIgnored: agentReportIgnored,
} as const;
