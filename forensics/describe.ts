// One event as forensics shows it: who decided it, a sentence, the rule and the numbers the decision recorded.
// Pure: reads only the event (numbers derived from the rest of the log are added by why.ts).
import type { AgentExit, Because, DomainEvent } from '../domain/events/index.js';
import { describeCrash } from '../domain/request/poison.js';
import { fmtBytes, fmtMs } from '../domain/shared/format.js';
import type { StoredEvent } from '../eventstore/port.js';
import { decode } from '../projections/decode.js';
import { describeEvaluationText } from '../projections/cluster/describe.js';

export type Fact = number | string | boolean | null;

export interface EventExplanation {
  /** A sentence about what happened, with the numbers in it. */
  summary: string;
  /** The scheduler rule that fired (`because.rule`), when the event records one. */
  rule: string | null;
  /** The decision's own sentence (`because.text`), as recorded. */
  decision: string | null;
  /** The numbers the decision compared (`because.numbers`) and the event's own numeric facts. */
  numbers: Record<string, Fact>;
  /** Ids the decision looked at (`because.refs`). */
  refs: Record<string, string>;
}

/** What kind of actor decided: `system:scheduler`, an agent (`agent:<id>`), another system component, or an API key. */
export function actorKind(actor: string): 'scheduler' | 'agent' | 'system' | 'api-key' {
  if (actor === 'system:scheduler') return 'scheduler';
  if (actor.startsWith('agent:')) return 'agent';
  if (actor.startsWith('system:')) return 'system';
  return 'api-key';
}

const RANK = ['priority, requeued', 'priority', 'normal, requeued', 'normal'];
export const rankName = (rank: number): string => RANK[rank] ?? `rank ${rank}`;

const REQUEUE: Record<string, string> = {
  PREEMPTED: 'its replica was evicted or demoted',
  AGENT_LOST: 'its agent was lost',
  AGENT_RESTARTED: 'its agent restarted',
  REPLICA_FAILED: 'its replica failed',
};

const CAUSE_VERB: Record<string, string> = {
  ReplicaDemotionRequested: 'was being demoted to the CPU cache',
  ReplicaEvictionRequested: 'was being evicted',
  ReplicaFailed: 'failed',
  ReplicaRemoved: 'was removed',
  ReplicaReloadRequired: 'had to load again',
  AgentLost: 'was on a lost agent',
  AgentRegistered: 'was on an agent that restarted',
};

/** `; it ended with signal SIGABRT; its last words: …` for a restart whose previous boot reported how it ended. */
function previousExitText(x: AgentExit | null | undefined): string {
  if (x === null || x === undefined) return '';
  const how = x.signal ? `signal ${x.signal}` : x.code !== null ? `exit code ${x.code}` : 'an unobserved exit';
  const tail = x.stderrTail.filter((l) => l.trim() !== '').slice(-2);
  return `; it ended with ${how}${x.cause ? `; its last words: ${clip(x.cause, 300)}` : ''}${x.running.length ? `; it was running ${x.running.join(', ')}` : ''}${tail.length ? `; last stderr: ${clip(tail.join(' | '), 300)}` : ''}`;
}

/** "replica gpt2#1 was being demoted to the CPU cache", from the requeue decision's refs. */
function interruptedBy(reason: string, refs: Record<string, string>): string {
  const replica = refs.replicaId;
  if (replica === undefined || replica === '') return REQUEUE[reason] ?? reason;
  if (reason === 'AGENT_LOST') return `replica ${replica} was on agent ${refs.agentId ?? '?'}, which was lost`;
  if (reason === 'AGENT_RESTARTED') return `replica ${replica} was on agent ${refs.agentId ?? '?'}, which restarted`;
  return `replica ${replica} ${CAUSE_VERB[refs.causeEvent ?? ''] ?? (reason === 'REPLICA_FAILED' ? 'failed' : 'was taken out of service')}`;
}

function because(b: Because | null | undefined): Pick<EventExplanation, 'rule' | 'decision' | 'numbers' | 'refs'> {
  if (b === null || b === undefined) return { rule: null, decision: null, numbers: {}, refs: {} };
  return { rule: b.rule, decision: b.text, numbers: { ...(b.numbers ?? {}) }, refs: { ...(b.refs ?? {}) } };
}

/** ` on weights 3fa2c1…` when the event records the model files' fingerprint. */
const onWeights = (fp: string | undefined) => (fp === undefined ? '' : ` on weights ${fp.slice(0, 12)}…`);

const clip = (s: string, n = 160) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

export function explainEvent(e: StoredEvent): EventExplanation {
  const d = decode(e);
  if (d === undefined)
    return { summary: `${e.type} (not a control-plane event)`, rule: null, decision: null, numbers: {}, refs: {} };
  return explainDomainEvent(d);
}

export function explainDomainEvent(d: DomainEvent): EventExplanation {
  const plain = (summary: string, numbers: Record<string, Fact> = {}): EventExplanation => ({
    summary,
    rule: null,
    decision: null,
    numbers,
    refs: {},
  });
  const decided = (summary: string, b: Because | null, numbers: Record<string, Fact> = {}): EventExplanation => {
    const x = because(b);
    return { summary, ...x, numbers: { ...numbers, ...x.numbers } };
  };
  switch (d.type) {
    case 'RequestReceived': {
      const o = d.data.options;
      return plain(
        `submitted for ${d.data.edit ? `${d.data.edit.variant} (edit ${d.data.edit.name}, source sha256 ${d.data.edit.fingerprint.slice(0, 12)}…, by ${d.data.edit.author})` : d.data.modelKey} by ${d.data.submitter} (${d.data.priority ? 'priority' : 'normal'}, ${d.data.trusted ? 'trusted' : 'untrusted'}; ` +
          `timeout ${o.timeoutMs === null ? 'the deployment’s' : fmtMs(o.timeoutMs)}, queue timeout ${o.queueTimeoutMs === null ? 'none' : fmtMs(o.queueTimeoutMs)}, at most ${o.maxAttempts} attempt(s))`,
        { maxAttempts: o.maxAttempts, timeoutMs: o.timeoutMs, queueTimeoutMs: o.queueTimeoutMs },
      );
    }
    case 'RequestQueued':
      return plain(`queued for ${d.data.modelKey} at rank ${d.data.rank} (${rankName(d.data.rank)})`, {
        rank: d.data.rank,
      });
    case 'RequestDispatched':
      return decided(
        `attempt ${d.data.attempt} dispatched ${d.data.isolated === true ? 'isolated (alone on its agent, in a sandbox runner where it has one: a poison suspect) ' : ''}to ${d.data.replicaId} on agent ${d.data.agentId}`,
        d.data.because,
        { attempt: d.data.attempt, ...(d.data.isolated === true ? { isolated: true } : {}) },
      );
    case 'RequestStarted':
      return plain(`agent ${d.data.agentId} started attempt ${d.data.attempt}`, { attempt: d.data.attempt });
    case 'RequestLogged': {
      const [first] = d.data.lines;
      const more = d.data.lines.length - 1;
      return plain(
        `attempt ${d.data.attempt} ${first!.stream}: ${clip(first!.line)}${more > 0 ? ` (+${more} more line${more === 1 ? '' : 's'})` : ''}`,
        { attempt: d.data.attempt, lines: d.data.lines.length },
      );
    }
    case 'RequestLogTruncated':
      return plain(
        `attempt ${d.data.attempt} reached its log limit (${d.data.maxLines} lines or ${d.data.maxBytes} bytes) after ${d.data.keptLines} lines; later output is dropped`,
        { attempt: d.data.attempt, keptLines: d.data.keptLines, keptBytes: d.data.keptBytes },
      );
    case 'ResultExpired':
      return d.data.because === null
        ? plain(`result ${d.data.resultRef} (${d.data.bytes} B) deleted by ${d.data.actor}`, { bytes: d.data.bytes })
        : decided(`result ${d.data.resultRef} (${d.data.bytes} B) expired (${d.data.reason})`, d.data.because, {
            bytes: d.data.bytes,
          });
    case 'RequestTokensGenerated': {
      const t = d.data.tokens;
      const steps =
        t[0]!.step === t[t.length - 1]!.step ? `step ${t[0]!.step}` : `steps ${t[0]!.step}–${t[t.length - 1]!.step}`;
      return plain(
        `attempt ${d.data.attempt} generated ${t.length} token${t.length === 1 ? '' : 's'} (${steps}): ${clip(JSON.stringify(t.map((x) => x.text ?? x.token)))}`,
        { attempt: d.data.attempt, tokens: t.length },
      );
    }
    case 'RequestTraceProgressed':
      return plain(
        `attempt ${d.data.attempt}: trace ${d.data.trace + 1} of ${d.data.traces} ${d.data.status === 'RUNNING' ? (d.data.done ? 'running' : 'started') : d.data.status === 'COMPLETED' ? 'completed' : 'failed'}${d.data.iterations === undefined ? '' : ` (${d.data.done ?? 0} of ${d.data.iterations} iterations done${d.data.reported === undefined ? '' : `, reported ${JSON.stringify(d.data.reported.value)} at iteration ${d.data.reported.iteration}`})`}${d.data.ms === undefined ? '' : ` after ${Math.round(d.data.ms)} ms`}`,
        { attempt: d.data.attempt, trace: d.data.trace },
      );
    case 'RequestResultWriting':
      return plain(
        `attempt ${d.data.attempt} on agent ${d.data.agentId} began writing its result ${d.data.resultRef} (${d.data.bytes} B): it can be read while it is written`,
        { attempt: d.data.attempt, bytes: d.data.bytes },
      );
    case 'RequestCompleted':
      return plain(
        `attempt ${d.data.attempt} completed on agent ${d.data.agentId}${onWeights(d.data.weightsFingerprint)}: result ${d.data.resultRef} (${d.data.bytes} B, sha256 ${d.data.sha256.slice(0, 12)}…)`,
        {
          attempt: d.data.attempt,
          bytes: d.data.bytes,
          ...(d.data.weightsFingerprint === undefined ? {} : { weights: d.data.weightsFingerprint }),
        },
      );
    case 'RequestFailed':
      return decided(
        `failed in phase ${d.data.phase} (${d.data.errorType}, reported by the ${d.data.reportedBy}${d.data.attempt > 0 ? `, attempt ${d.data.attempt}` : ', never ran'}${onWeights(d.data.weightsFingerprint)}): ${clip(d.data.message, 400)}`,
        d.data.because,
        { attempt: d.data.attempt },
      );
    case 'RequestRunStopped':
      return plain(
        `agent ${d.data.agentId} stopped the block of attempt ${d.data.attempt}, which the control plane had already failed for its time limit: the agent takes new work again`,
        { attempt: d.data.attempt },
      );
    case 'RequestRequeued':
      return decided(
        `requeued because ${interruptedBy(d.data.reason, d.data.because.refs ?? {})} (${d.data.reason}); attempt ${d.data.attempt} was interrupted, the next is attempt ${d.data.attempt + 1}; ` +
          `back at rank ${d.data.rank} (${rankName(d.data.rank)}) keeping its enqueue time ${d.data.enqueuedAt}` +
          (d.data.crash === undefined
            ? ''
            : d.data.crash.suspect === false
              ? `; ${describeCrash(d.data.crash)}`
              : `; ${describeCrash(d.data.crash)}: the request is a poison suspect, its next attempt runs isolated and a second such death fails it`),
        d.data.because,
        { attempt: d.data.attempt, nextAttempt: d.data.attempt + 1, rank: d.data.rank },
      );
    case 'RequestCancelled':
      return plain(
        `cancelled by the ${d.data.by} ${d.data.actor} while ${d.data.previousStatus}${d.data.attempt > 0 ? ` (attempt ${d.data.attempt})` : ''}`,
        { attempt: d.data.attempt },
      );
    case 'AgentReportIgnored':
      return plain(
        `agent ${d.data.agentId}'s ${d.data.report} report (message ${d.data.agentMessageId}) ignored, ${d.data.reason}: ${d.data.text}`,
        d.data.attempt === undefined ? {} : { attempt: d.data.attempt },
      );
    case 'DeploymentRequested': {
      const s = d.data.settings;
      return decided(
        `${d.data.onDemand ? 'on-demand ' : ''}deployment of ${d.data.modelKey}: ${d.data.replicas} replica(s) of ${fmtBytes(s.sizeBytes)} on ${s.gpus} GPU(s) each` +
          `${d.data.pinned ? ', pinned' : ''} (weights ${fmtBytes(s.weightsBytes)}, minimum deployment time ${fmtMs(s.minDeploymentMs)})`,
        d.data.because,
        { replicas: d.data.replicas, sizeBytes: s.sizeBytes, gpus: s.gpus, minDeploymentMs: s.minDeploymentMs },
      );
    }
    case 'ReplicaRequested':
      return plain(
        `replica ${d.data.replicaId} requested (${d.data.reason}${d.data.copiedFrom === null ? '' : `, settings copied from ${d.data.copiedFrom}`}${d.data.force ? ', forced' : ''}): ` +
          `needs ${fmtBytes(d.data.settings.sizeBytes)} on ${d.data.settings.gpus} GPU(s)`,
        {
          sizeBytes: d.data.settings.sizeBytes,
          gpus: d.data.settings.gpus,
          minDeploymentMs: d.data.settings.minDeploymentMs,
        },
      );
    case 'DeploymentScaled':
      return decided(
        `${d.data.trigger} scaled ${d.data.modelKey} from ${d.data.fromReplicas} to ${d.data.toReplicas} live replica(s)`,
        d.data.because,
        { fromReplicas: d.data.fromReplicas, toReplicas: d.data.toReplicas },
      );
    case 'ReplicaPlaced':
      return decided(
        `${d.data.replicaId} placed on agent ${d.data.agentId} GPU ${d.data.gpus.join('+')} (boot ${d.data.bootId}) at level ${d.data.level}, ${fmtBytes(d.data.bytesPerGpu)} per GPU`,
        d.data.because,
        { bytesPerGpu: d.data.bytesPerGpu, sizeBytes: d.data.sizeBytes },
      );
    case 'ReplicaRestored':
      return decided(
        `${d.data.replicaId} restored from the CPU cache onto agent ${d.data.agentId} GPU ${d.data.gpus.join('+')} in place of ${d.data.forReplicaId} (level ${d.data.level})`,
        d.data.because,
        { bytesPerGpu: d.data.bytesPerGpu },
      );
    case 'ReplicaLoading':
      return plain(`agent ${d.data.agentId} is loading ${d.data.replicaId}`);
    case 'ReplicaHot':
      return plain(
        `${d.data.replicaId} is HOT on agent ${d.data.agentId}${onWeights(d.data.weightsFingerprint)}${d.data.loadMs === null ? '' : ` (loaded in ${fmtMs(d.data.loadMs)})`}`,
        {
          ...(d.data.loadMs === null ? {} : { loadMs: d.data.loadMs }),
          ...(d.data.weightsFingerprint === undefined ? {} : { weights: d.data.weightsFingerprint }),
        },
      );
    case 'ReplicaFailed':
      return plain(
        `${d.data.replicaId} failed on agent ${d.data.agentId} (${d.data.phase}): ${clip(d.data.message, 400)}`,
      );
    case 'ReplicaDemotionRequested':
      return decided(`demotion of ${d.data.replicaId} to the CPU cache requested`, d.data.because);
    case 'ReplicaDemoted':
      return plain(
        `${d.data.replicaId} moved to the CPU cache of agent ${d.data.agentId} (${fmtBytes(d.data.cpuBytes)}, WARM)`,
        { cpuBytes: d.data.cpuBytes },
      );
    case 'ReplicaEvictionRequested':
      return decided(
        `eviction of ${d.data.replicaId} requested (${d.data.reason}${d.data.force ? ', forced' : ''})`,
        d.data.because,
      );
    case 'ReplicaRemoved':
      return decided(`${d.data.replicaId} removed (${d.data.reason})`, d.data.because);
    case 'ReplicaReloadRequired':
      return plain(
        `${d.data.replicaId} loads again on agent ${d.data.agentId}: boot ${d.data.previousBootId} → ${d.data.bootId}`,
      );
    case 'DeploymentRefused':
      return decided(`placement of ${d.data.replicaId} refused: ${describeEvaluationText(d.data)}`, d.data.because, {
        neededBytes: d.data.neededBytes,
        bytesPerGpu: d.data.bytesPerGpu,
        gpus: d.data.gpus,
        bestGpuFreeBytes: d.data.bestGpuFreeBytes,
        evictableBytes: d.data.evictableBytes,
      });
    case 'DeploymentPinned':
      return plain(`${d.data.modelKey} ${d.data.pinned ? 'pinned' : 'unpinned'} by ${d.data.by}`);
    case 'DeploymentEvicted':
      return plain(`every replica of ${d.data.modelKey} evicted by ${d.data.by}`);
    case 'AgentRegistered': {
      const gpus = d.data.gpus.map((g) => `${g.index}: ${fmtBytes(g.memoryBytes)}`).join(', ');
      return plain(
        `agent ${d.data.agentId} registered boot ${d.data.bootId} with GPU(s) ${gpus}, RAM ${fmtBytes(d.data.ramBytes)}, CPU cache budget ${fmtBytes(d.data.cpuCacheBudgetBytes)}` +
          (d.data.previousBootId === null
            ? ''
            : ` (a restart: previous boot ${d.data.previousBootId}, ${d.data.previousState}${previousExitText(d.data.previousExit)})`),
        { gpus: d.data.gpus.length, ramBytes: d.data.ramBytes, cpuCacheBudgetBytes: d.data.cpuCacheBudgetBytes },
      );
    }
    case 'AgentUnresponsive': {
      const silent = Date.parse(d.data.graceUntil) - Date.parse(d.data.lastSeenAt);
      return plain(
        `agent ${d.data.agentId} (boot ${d.data.bootId}) unresponsive: no heartbeat since ${d.data.lastSeenAt} (timeout ${fmtMs(d.data.timeoutMs)}); waited for until ${d.data.graceUntil}`,
        {
          timeoutMs: d.data.timeoutMs,
          lastSeenToGraceEndMs: silent,
        },
      );
    }
    case 'AgentReturned':
      return plain(`agent ${d.data.agentId} returned on boot ${d.data.bootId} after ${fmtMs(d.data.downMs)}`, {
        downMs: d.data.downMs,
      });
    case 'AgentLost':
      return plain(
        `agent ${d.data.agentId} (boot ${d.data.bootId}) lost: last seen ${d.data.lastSeenAt}, grace expired ${d.data.graceUntil}`,
        {
          silentMs: Date.parse(d.data.lostAt) - Date.parse(d.data.lastSeenAt),
        },
      );
    case 'AgentDrainRequested':
      return plain(`drain of agent ${d.data.agentId} requested by ${d.data.by}`);
    case 'AgentDrained':
      return plain(`agent ${d.data.agentId} drained`);
    case 'ModelRegistered':
      return plain(
        `model ${d.data.modelKey} registered by ${d.data.registeredBy}: ${d.data.architecture ?? d.data.family} from ${d.data.dir}, weights sha256 ${d.data.fingerprint.slice(0, 12)}… ` +
          `(${d.data.files.length} file(s), ${fmtBytes(d.data.weightsBytes)} ${d.data.dtype}, ${d.data.moduleCount} modules, inputs ${d.data.inputs.join(', ')}` +
          `${d.data.previousFingerprint === null ? '' : `; replaces ${d.data.previousFingerprint.slice(0, 12)}…`})`,
        { weightsBytes: d.data.weightsBytes, moduleCount: d.data.moduleCount, weights: d.data.fingerprint },
      );
    case 'ModelRemoved':
      return plain(
        `model ${d.data.modelKey} (weights sha256 ${d.data.fingerprint.slice(0, 12)}…) removed by ${d.data.removedBy}`,
        { weights: d.data.fingerprint },
      );
    case 'ModelDisabled':
      return plain(`model ${d.data.modelKey} disabled by ${d.data.disabledBy}: ${d.data.reason}`);
    case 'ModelEnabled':
      return plain(`model ${d.data.modelKey} enabled by ${d.data.enabledBy}`);
    case 'ModelEditRegistered':
      return plain(
        `edit ${d.data.variant} (${d.data.visibility}, source sha256 ${d.data.fingerprint.slice(0, 12)}…) registered by ${d.data.author}`,
        { edit: d.data.fingerprint },
      );
    case 'ModelEditRemoved':
      return plain(
        `edit ${d.data.variant} (source sha256 ${d.data.fingerprint.slice(0, 12)}…) removed by ${d.data.removedBy}`,
        { edit: d.data.fingerprint },
      );
  }
}
