// Zod schemas of every control-plane command as it arrives (from the HTTP API, the agent relay or the
// scheduler), without `at`: the time comes from the command's metadata. Unknown fields are refused.
import { z } from 'zod';
import { candidatesOmitted } from '../../domain/events/deployment.js';
import {
  agentExit,
  because,
  crashEvidence,
  EDIT_SOURCE_MAX,
  editVisibility,
  gpuSpec,
  modelDisabledReason,
  modelFacts,
  requeueReason,
  requestEdit,
  sha256,
  streamedToken,
  loopProgress,
} from '../../domain/events/index.js';
import { ENTITY_ID, MODEL_KEY, REQUEST_ID } from '../../domain/shared/ids.js';

const modelKey = z
  .string()
  .regex(MODEL_KEY, 'a model key: letters, digits and . _ / - (up to 128), starting with a letter or digit');
const entityId = z
  .string()
  .regex(ENTITY_ID, 'an id: letters, digits and . _ : - (up to 128), starting with a letter or digit');
const requestId = z
  .string()
  .regex(REQUEST_ID, 'a request id: letters, digits and . _ : - (up to 160), starting with a letter or digit');
const replicaId = z
  .string()
  .min(3)
  .max(140)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._/-]*#[1-9][0-9]*$/, 'a replica id <modelKey>#<n>');
const actor = z.string().min(1).max(200);
const attempt = z.number().int().positive();
const count = z.number().int().nonnegative();
const level = z.enum(['DEPLOYED', 'CACHED_AND_FREE', 'FREE', 'CACHED_AND_FULL', 'FULL', 'CANT_ACCOMMODATE']);
const candidate = z.strictObject({
  agentId: entityId,
  gpus: z.array(count),
  level,
  freeBytes: count,
  evictableBytes: count,
  excluded: z.string().max(2000).nullable(),
});

const settingsInput = z.strictObject({
  weightsBytes: count,
  paddingFactor: z.number().optional(),
  biasBytes: z.number().optional(),
  sizeBytes: z.number().optional(),
  gpus: z.number().optional(),
  dtype: z.string().optional(),
  timeoutMs: z.number().nullable().optional(),
  concurrency: z.number().optional(),
  minDeploymentMs: z.number().optional(),
  autoscale: z
    .strictObject({
      enabled: z.boolean().optional(),
      thresholdMs: z.number().optional(),
      maxReplicas: z.number().optional(),
      backoffMs: z.number().optional(),
    })
    .optional(),
});

const agentReport = { attempt, agentId: entityId, agentMessageId: z.string().min(1).max(200), requestId };
// How long before a report its run started (domain/request/commands.ts StartedBefore): the agent's start hold, or the
// run's length when its start came with its end; a day bounds it whatever the setting.
const startedMsBefore = z.number().int().nonnegative().max(86_400_000).optional();
const replicaReport = { replicaId, agentId: entityId, agentMessageId: z.string().min(1).max(200) };

export const commandSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('SubmitRequest'),
    requestId,
    modelKey,
    submitter: actor,
    priority: z.boolean(),
    trusted: z.boolean(),
    payload: z.unknown(),
    edit: requestEdit.strict().optional(),
    options: z
      .strictObject({
        timeoutMs: z.number().int().positive().nullable().optional(),
        queueTimeoutMs: z.number().int().positive().nullable().optional(),
        steps: z.number().int().positive().max(4096).optional(),
        maxAttempts: z.number().int().positive().max(100).optional(),
        maxTimeoutMs: z.number().int().positive().nullable().optional(),
        maxRunning: z.number().int().positive().nullable().optional(),
      })
      .optional(),
  }),
  z.strictObject({ type: z.literal('CancelRequest'), requestId, actor, operator: z.boolean() }),
  z.strictObject({
    type: z.literal('ExpireResult'),
    requestId,
    reason: z.enum(['RETENTION', 'DELETED']),
    actor,
    operator: z.boolean(),
    because: because.nullable(),
  }),
  z.strictObject({ type: z.literal('DispatchRequest'), requestId, attempt, replicaId, agentId: entityId, because }),
  z.strictObject({
    type: z.literal('RequeueRequest'),
    requestId,
    attempt,
    reason: requeueReason,
    because,
    crash: crashEvidence.omit({ attempt: true, suspect: true }).optional(),
  }),
  z.strictObject({
    type: z.literal('FailRequest'),
    requestId,
    when: z.enum(['QUEUED', 'IN_FLIGHT']),
    attempt: count,
    phase: z.enum(['queue', 'placement', 'deployment', 'execution', 'scheduling']),
    errorType: z.string().min(1).max(200),
    message: z.string().max(20000),
    because,
  }),
  z.strictObject({ type: z.literal('ReportRequestStarted'), ...agentReport, startedMsBefore }),
  z
    .strictObject({
      type: z.literal('ReportRequestLog'),
      ...agentReport,
      lines: z
        .array(z.strictObject({ stream: z.enum(['stdout', 'stderr']), line: z.string().max(65536) }))
        .max(10_000, 'at most 10000 lines per log report'),
      truncated: z.boolean().optional(),
    })
    .refine((c) => c.lines.length > 0 || c.truncated === true, {
      message: 'a log report carries at least one line (or says truncated)',
      path: ['lines'],
    }),
  z.strictObject({
    type: z.literal('ReportRequestTokens'),
    ...agentReport,
    tokens: z.array(streamedToken).min(1).max(4096),
  }),
  z.strictObject({
    type: z.literal('ReportRequestTrace'),
    ...agentReport,
    trace: z.number().int().nonnegative(),
    traces: z.number().int().positive(),
    status: z.enum(['RUNNING', 'COMPLETED', 'ERROR']),
    ms: z.number().nonnegative().optional(),
    ...loopProgress,
  }),
  z.strictObject({
    type: z.literal('ReportRequestResultWriting'),
    ...agentReport,
    resultRef: z.string().min(1).max(1000),
    bytes: count,
  }),
  z.strictObject({
    type: z.literal('ReportRequestCompleted'),
    ...agentReport,
    resultRef: z.string().min(1).max(1000),
    bytes: count,
    sha256,
    weightsFingerprint: sha256.optional(),
    startedMsBefore,
  }),
  z.strictObject({
    type: z.literal('ReportRequestFailed'),
    ...agentReport,
    phase: z.enum(['validation', 'load', 'execution', 'result']),
    errorType: z.string().min(1).max(200),
    message: z.string().max(20000),
    stack: z.string().max(65536).nullable(),
    weightsFingerprint: sha256.optional(),
    startedMsBefore,
  }),
  z.strictObject({
    type: z.literal('RequestDeployment'),
    modelKey,
    settings: settingsInput,
    replicas: z.number().int(),
    onDemand: z.boolean(),
    pinned: z.boolean().optional(),
    force: z.boolean().optional(),
    because: because.optional(),
  }),
  z.strictObject({ type: z.literal('ScaleDeployment'), modelKey, replicas: z.number().int() }),
  z.strictObject({ type: z.literal('AutoscaleDeployment'), modelKey, oldestWaitMs: count, queued: count, because }),
  z.strictObject({
    type: z.literal('PlaceReplica'),
    replicaId,
    agentId: entityId,
    bootId: entityId,
    gpus: z.array(count).min(1),
    bytesPerGpu: z.number().int().positive(),
    level,
    candidates: z.array(candidate).max(64),
    omitted: candidatesOmitted.optional(),
    cachedReplicaId: replicaId.nullable(),
    because,
  }),
  z.strictObject({
    type: z.literal('RefuseReplica'),
    replicaId,
    bytesPerGpu: z.number().int().positive(),
    bestGpuFreeBytes: count,
    evictableBytes: count,
    candidates: z.array(candidate).max(64),
    omitted: candidatesOmitted.optional(),
    because,
  }),
  z.strictObject({ type: z.literal('DemoteReplica'), replicaId, force: z.boolean(), because }),
  z.strictObject({
    type: z.literal('EvictReplica'),
    replicaId,
    reason: z.enum(['OPERATOR', 'MAKE_ROOM', 'SCALE_DOWN', 'AGENT_DRAINED']),
    force: z.boolean(),
    replace: z.boolean(),
    because,
  }),
  z.strictObject({ type: z.literal('EvictDeployment'), modelKey, actor }),
  z.strictObject({ type: z.literal('CompleteReplicaEviction'), replicaId, because }),
  z.strictObject({ type: z.literal('CompleteReplicaDemotion'), replicaId, because }),
  z.strictObject({
    type: z.literal('ReleaseAgentReplicas'),
    modelKey,
    agentId: entityId,
    reason: z.enum(['AGENT_LOST', 'AGENT_RESTARTED']),
    previousBootId: entityId,
    bootId: entityId,
    because,
  }),
  z.strictObject({ type: z.literal('PinDeployment'), modelKey, pinned: z.boolean(), actor }),
  z.strictObject({ type: z.literal('ReportReplicaLoading'), ...replicaReport }),
  z.strictObject({
    type: z.literal('ReportReplicaHot'),
    ...replicaReport,
    loadMs: count.nullable(),
    weightsFingerprint: sha256.optional(),
  }),
  z.strictObject({
    type: z.literal('ReportReplicaFailed'),
    ...replicaReport,
    phase: z.enum(['load', 'runtime']),
    message: z.string().max(20000),
  }),
  z.strictObject({
    type: z.literal('RegisterAgent'),
    agentId: entityId,
    bootId: entityId,
    gpus: z.array(gpuSpec).min(1).max(64),
    ramBytes: count,
    cpuCacheBudgetBytes: count.optional(),
    previousExit: agentExit.optional(),
  }),
  z.strictObject({ type: z.literal('ReportAgentHeartbeat'), agentId: entityId, bootId: entityId }),
  z.strictObject({
    type: z.literal('MarkAgentUnresponsive'),
    agentId: entityId,
    bootId: entityId,
    lastSeenAt: z.string(),
    timeoutMs: z.number().int().positive(),
    graceMs: z.number().int().nonnegative(),
  }),
  z.strictObject({ type: z.literal('MarkAgentLost'), agentId: entityId, bootId: entityId }),
  z.strictObject({ type: z.literal('DrainAgent'), agentId: entityId, actor }),
  z.strictObject({ type: z.literal('CompleteAgentDrain'), agentId: entityId }),
  z.strictObject({
    type: z.literal('RegisterModel'),
    modelKey,
    actor,
    replace: z.boolean(),
    deployedReplicas: count,
    model: modelFacts.strict(),
  }),
  z.strictObject({ type: z.literal('RemoveModel'), modelKey, actor, deployedReplicas: count }),
  z.strictObject({ type: z.literal('DisableModel'), modelKey, actor, reason: modelDisabledReason }),
  z.strictObject({ type: z.literal('EnableModel'), modelKey, actor }),
  z.strictObject({
    type: z.literal('RegisterModelEdit'),
    modelKey,
    name: z.string().max(100),
    source: z.string().max(EDIT_SOURCE_MAX),
    fingerprint: sha256,
    visibility: editVisibility,
    actor,
    operator: z.boolean(),
  }),
  z.strictObject({
    type: z.literal('RemoveModelEdit'),
    modelKey,
    name: z.string().max(100),
    actor,
    operator: z.boolean(),
  }),
]);
