// The replicas this agent holds, as a desired state and the work that reaches it. Each assignment sets a
// replica's target (HOT after load, WARM after demote, gone after unload); one chain of steps per replica moves
// the actual state to the target: load the model with the runtime (reporting LOADING, then HOT with the load
// time, or FAILED with the reason), release its sessions when demoted (WARM: nothing on the GPU, the files stay
// in the page cache, a restore loads again), close it when unloaded. An unload or demote waits for the requests
// running on the model (HostedModel.close waits for its queue); the control plane only sends one when none is
// in flight there. After a restart the agent holds nothing: the control plane sends the new boot a RELOAD for
// every replica the old boot had, and the desired state is rebuilt from those.
import type { Logger } from 'pino';
import { loadModel, type HostedModel } from '../runtime/index.js';
import type { ModelEntry } from '../../catalog/port.js';
import type { WeightsFingerprint } from '../../catalog/fingerprint.js';
import type { Assignment } from '../../transport/relay/wire.js';
import type { ProviderChoice } from './config.js';
import type { Cause, Reporter } from './reporter.js';

type Target = 'HOT' | 'WARM' | 'ABSENT';

/** The model folders on this machine (NDIF_MODELS) and their files' fingerprints (catalog/catalog.ts). */
export interface LocalModels {
  get(key: string): ModelEntry | undefined;
  weights(key: string, dir: string): WeightsFingerprint;
}
export type ReplicaPhase = 'PENDING' | 'LOADING' | 'HOT' | 'WARM' | 'FAILED';

interface Slot {
  replicaId: string;
  modelKey: string;
  gpus: number[];
  /** Bytes the control plane placed on each of its GPUs (its load assignment's). */
  bytesPerGpu: number;
  target: Target;
  phase: ReplicaPhase;
  model: HostedModel | undefined;
  /** sha256 fingerprint of the files the model was loaded from. */
  weights: string | undefined;
  cause: Cause;
  chain: Promise<void>;
}

export interface ReplicaView {
  replicaId: string;
  modelKey: string;
  gpus: number[];
  bytesPerGpu: number;
  target: Target;
  phase: ReplicaPhase;
}

type LoadAssignment = Extract<Assignment, { kind: 'load' }>;
type ReplicaAssignment = Extract<Assignment, { kind: 'load' | 'demote' | 'unload' }>;

export class ReplicaHost {
  private readonly slots = new Map<string, Slot>();
  /** Called with each model once it is HOT (the sandbox registers it for untrusted requests). */
  onHot: ((model: HostedModel) => void) | undefined;

  constructor(
    private readonly agentId: string,
    private readonly catalog: LocalModels,
    private readonly reporter: Reporter,
    private readonly log: Logger,
    private readonly provider: ProviderChoice,
    /** NDIF_AGENT_BATCH_ROWS: most rows a batch of requests stacks (1: no batching). */
    private readonly batchRows?: number,
    /** NDIF_AGENT_PREFIX_CACHE: bytes of pass prefixes one session keeps (0: no reuse). */
    private readonly prefixCacheBytes?: number,
  ) {}

  /** The desired and actual state of every replica here. */
  view(): ReplicaView[] {
    return [...this.slots.values()].map((s) => ({
      replicaId: s.replicaId,
      modelKey: s.modelKey,
      gpus: s.gpus,
      bytesPerGpu: s.bytesPerGpu,
      target: s.target,
      phase: s.phase,
    }));
  }

  /** The fingerprint of the files a HOT replica's model was loaded from. */
  weightsOf(replicaId: string): string | undefined {
    return this.slots.get(replicaId)?.weights;
  }

  /** The replica's model when it is HOT. */
  hot(replicaId: string): HostedModel | undefined {
    const s = this.slots.get(replicaId);
    return s?.phase === 'HOT' && s.target === 'HOT' ? s.model : undefined;
  }

  apply(a: ReplicaAssignment): void {
    const cause = { correlationId: a.correlationId, causationId: a.eventId };
    let slot = this.slots.get(a.replicaId);
    if (a.kind === 'load') {
      if (slot === undefined) {
        slot = {
          replicaId: a.replicaId,
          modelKey: a.modelKey,
          gpus: a.gpus,
          bytesPerGpu: a.bytesPerGpu,
          target: 'HOT',
          phase: 'PENDING',
          model: undefined,
          weights: undefined,
          cause,
          chain: Promise.resolve(),
        };
        this.slots.set(a.replicaId, slot);
      }
      slot.target = 'HOT';
      slot.cause = cause;
      if (a.gpus.length > 0) slot.gpus = a.gpus;
      slot.bytesPerGpu = a.bytesPerGpu;
      this.step(slot, () => this.load(slot!, a));
      return;
    }
    if (slot === undefined) return;
    slot.target = a.kind === 'demote' ? 'WARM' : 'ABSENT';
    slot.cause = cause;
    const s = slot;
    this.step(s, () => this.release(s));
  }

  private step(slot: Slot, work: () => Promise<void>): void {
    slot.chain = slot.chain
      .then(work)
      .catch((err: unknown) => this.log.error({ err, replicaId: slot.replicaId }, 'replica step failed'));
  }

  private async load(slot: Slot, a: LoadAssignment): Promise<void> {
    if (slot.target !== 'HOT') return;
    const cause = slot.cause;
    if (slot.phase === 'HOT' && slot.model !== undefined) {
      // Already serving (a repeated or restoring assignment): say so; the decider ignores what it already knows.
      await this.report('ReportReplicaHot', slot, cause, {
        loadMs: 0,
        ...(slot.weights === undefined ? {} : { weightsFingerprint: slot.weights }),
      });
      return;
    }
    const failLoad = async (message: string) => {
      slot.phase = 'FAILED';
      await this.report('ReportReplicaFailed', slot, cause, { phase: 'load', message: message.slice(0, 20000) });
    };
    // The agent's own folder for the key (NDIF_MODELS on this machine), else the folder the model was registered from.
    const dir = this.catalog.get(slot.modelKey)?.dir ?? a.model?.dir;
    if (dir === undefined) {
      await failLoad(
        `model ${slot.modelKey} is not in agent ${this.agentId}'s catalog (NDIF_MODELS) and is not registered; the agent cannot load it`,
      );
      return;
    }
    let weights: WeightsFingerprint;
    try {
      weights = this.catalog.weights(slot.modelKey, dir);
    } catch (err) {
      await failLoad(
        `model ${slot.modelKey}: the files in ${dir} cannot be read on agent ${this.agentId}: ${(err as Error).message}`,
      );
      return;
    }
    if (a.model !== undefined && a.model.fingerprint !== weights.fingerprint) {
      await failLoad(
        `model ${slot.modelKey}: the files in ${dir} on agent ${this.agentId} (sha256 ${weights.fingerprint.slice(0, 12)}…) are not the registered ones (${a.model.fingerprint.slice(0, 12)}… from ${a.model.dir}); copy the registered files there, or register these (ndif models add ${slot.modelKey} <dir> --replace)`,
      );
      return;
    }
    slot.phase = 'LOADING';
    void this.report('ReportReplicaLoading', slot, cause, {});
    const started = Date.now();
    let model: HostedModel;
    try {
      model = await loadModel(dir, {
        key: slot.modelKey,
        provider: this.provider,
        ...(this.batchRows === undefined ? {} : { batchRows: this.batchRows }),
        ...(this.prefixCacheBytes === undefined ? {} : { prefixCacheBytes: this.prefixCacheBytes }),
        ...(a.quantize === undefined ? {} : { quantize: a.quantize }),
      });
      // Built while loading, as a replica's sessions are, so that no request waits for it.
      try {
        model.tokenizer?.build();
      } catch (e) {
        await model.close();
        throw e;
      }
    } catch (err) {
      slot.phase = 'FAILED';
      this.log.error({ err, replicaId: slot.replicaId, reason: a.reason }, 'replica load failed');
      await this.report('ReportReplicaFailed', slot, cause, {
        phase: 'load',
        message: (err as Error).message.slice(0, 20000),
      });
      return;
    }
    if (slot.target !== 'HOT') {
      await model.close();
      slot.phase = slot.target === 'WARM' ? 'WARM' : 'PENDING';
      if (slot.target === 'ABSENT') this.slots.delete(slot.replicaId);
      return;
    }
    slot.model = model;
    slot.weights = weights.fingerprint;
    slot.phase = 'HOT';
    this.onHot?.(model);
    await this.report('ReportReplicaHot', slot, cause, {
      loadMs: Date.now() - started,
      weightsFingerprint: weights.fingerprint,
    });
  }

  private async release(slot: Slot): Promise<void> {
    if (slot.target === 'HOT') return;
    const model = slot.model;
    slot.model = undefined;
    await model?.close();
    if (slot.target === 'WARM') slot.phase = 'WARM';
    else if (this.slots.get(slot.replicaId) === slot) this.slots.delete(slot.replicaId);
  }

  private report(
    type: 'ReportReplicaLoading' | 'ReportReplicaHot' | 'ReportReplicaFailed',
    slot: Slot,
    cause: Cause,
    extra: Record<string, unknown>,
  ): Promise<void> {
    const agentMessageId = this.reporter.nextMessageId();
    const command = { type, replicaId: slot.replicaId, agentId: this.agentId, agentMessageId, ...extra } as Parameters<
      Reporter['send']
    >[1];
    return this.reporter.send(agentMessageId, command, cause);
  }

  /** Closes every model (the agent is stopping). */
  async close(): Promise<void> {
    for (const s of this.slots.values()) s.target = 'ABSENT';
    await Promise.all([...this.slots.values()].map((s) => s.chain));
    await Promise.all([...this.slots.values()].map((s) => s.model?.close()));
    this.slots.clear();
  }
}
