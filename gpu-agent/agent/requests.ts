// Runs the requests dispatched to this agent's replicas: decodes the payload (inline or from the blob store),
// reports STARTED, runs HostedModel.run (a session: HostedModel.runSession, reporting each trace's progress) with the blocks in this process (trusted) or in a sandbox runner
// (untrusted), reports LOG lines in batches (up to the attempt's log limits), and ends with COMPLETED (the SavedTrees encoded as one result container,
// put in the blob store: the event carries its ref, size and sha256) or FAILED (phase, type, message, the
// block's stack). An abort (cancelled, requeued, timed out by the control plane) stops the run through its
// AbortSignal and reports nothing: the control plane has already decided the attempt's fate; only an in-process run
// the control plane failed (its time limit) reports when its block has stopped (`RunStopped`: until then the agent
// gets no new work).
import { runMeta } from './run-meta.js';
import { RUN_STOPPED } from '../../domain/request/run-stop.js';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { BlobStore } from '../../blobstore/port.js';
import { createInProcessBlocks } from '../block/index.js';
import {
  InterventionError,
  type HostedModel,
  type InvokeSpec,
  type RunRequest,
  type RunResult,
  type SessionRequest,
} from '../runtime/index.js';
import type { OpenChannel } from '../runtime/index.js';
import { readInputTensors } from './input-tensors.js';
import { parseRequestPayload, type InvokePayload, type RequestPayload } from '../../protocol/request-payload.js';
import { encodeResultContainer } from '../../protocol/result-container.js';
import { FabricError } from '../../protocol/errors.js';
import type { Assignment } from '../../transport/relay/wire.js';
import { AgentErrorCode } from './errors.js';
import { failureReport, type FailureReport } from './failure.js';
import type { ReplicaHost } from './replicas.js';
import type { Cause, Reporter } from './reporter.js';
import { LogBatcher } from './log-batcher.js';
import { DEFAULT_START_HOLD_MS } from './config.js';
import { StartHold } from './start-hold.js';
import { LogQuota, type LogLimits } from '../../protocol/log-limits.js';

/** What one attempt may produce: log lines and bytes, and the size of its encoded result. */
export interface RunLimits {
  log: LogLimits;
  /** A request's log lines leave the agent at most this fast (NDIF_LOG_LINES_PER_S). */
  logLinesPerSecond: number;
  resultMaxBytes: number;
  /** Results this large are written piece by piece, readable meanwhile (NDIF_RESULT_STREAM_MIN_BYTES; 0: never). */
  resultStreamMinBytes?: number;
  /** Least time between two progress reports of a repeated trace (NDIF_PROGRESS_INTERVAL_MS; default 1000). */
  progressIntervalMs?: number;
  /** How long the start report waits to be folded into the run's end (NDIF_AGENT_START_HOLD_MS; 0: sent at once). */
  startHoldMs?: number;
}
import { TokenStream } from './token-stream.js';
import { BlockTurns } from './block-turns.js';
import type { WatchedRequest } from './watchdog.js';
import type { BlockError } from '../../protocol/interleave.js';
import { LogPace } from './log-pace.js';
import { DEFAULT_RESULT_STREAM_MIN_BYTES, storeResult } from './result-store.js';

type RunAssignment = Extract<Assignment, { kind: 'run' }>;
type AbortAssignment = Extract<Assignment, { kind: 'abort' }>;

/** Opens the untrusted side for one request (the sandbox); absent: untrusted requests fail. */
export type UntrustedOpener = (
  model: HostedModel,
  opts: { timeoutMs: number; signal: AbortSignal },
) => Promise<OpenChannel>;

interface Running {
  attempt: number;
  controller: AbortController;
  aborted: boolean;
  done: Promise<void>;
  /** Epoch ms at which its time limit ends (known once its payload is read). */
  deadline: number;
  /** Its blocks run in this process. */
  inProcess: boolean;
  /** Set when the agent stopped its block (the watchdog: memory, a stall): the failure it is reported with. */
  stopped?: BlockError;
}

export class RequestExecutor {
  private readonly running = new Map<string, Running>();
  completed = 0;
  failed = 0;
  /** Told the running requests whenever they change (the watchdog watches their deadlines; its last words name them). */
  onRunningChange: ((running: WatchedRequest[]) => void) | undefined;
  /** Which in-process request's blocks the host handed a message to last, and have not answered yet. */
  private readonly inBlocks = new BlockTurns();

  /** Told each time the host enters a request's in-process blocks. */
  set onBlockEntered(f: ((requestId: string) => void) | undefined) {
    this.inBlocks.onEnter = f;
  }

  constructor(
    private readonly agentId: string,
    private readonly replicas: ReplicaHost,
    private readonly reporter: Reporter,
    private readonly blobs: BlobStore,
    private readonly log: Logger,
    private readonly maxRunMs: number,
    private readonly untrusted: UntrustedOpener | undefined,
    private readonly limits: RunLimits,
  ) {}

  get inFlight(): number {
    return this.running.size;
  }

  runningIds(): string[] {
    return [...this.running.keys()];
  }

  private watched(): WatchedRequest[] {
    return [...this.running].map(([id, r]) => ({ id, deadline: r.deadline, inProcess: r.inProcess }));
  }

  /**
   * Stops the in-process block that ran last (the one the host handed a message to most recently and that has not
   * answered, else the one entered last): its request fails with `type`. The watchdog calls this when memory runs
   * out while trusted blocks run here. Returns the request id, if any.
   */
  stopInProcess(type: 'OutOfMemory', message: string): string | undefined {
    const live = [...this.running].filter(([, r]) => r.inProcess && !r.aborted && r.stopped === undefined);
    // One block at a time: the memory of the one stopped last is still being collected.
    if ([...this.running.values()].some((r) => r.stopped !== undefined)) return undefined;
    const id = this.inBlocks.last(live.map(([id]) => id));
    const r = id === undefined ? undefined : this.running.get(id);
    if (id === undefined || r === undefined) return undefined;
    r.stopped = { phase: 'execute', type, message };
    r.controller.abort(type);
    return id;
  }

  run(a: RunAssignment): void {
    const existing = this.running.get(a.requestId);
    if (existing !== undefined && existing.attempt >= a.attempt) return;
    existing?.controller.abort('a newer attempt was dispatched');
    const entry: Running = {
      attempt: a.attempt,
      controller: new AbortController(),
      aborted: false,
      done: Promise.resolve(),
      deadline: Date.now() + this.maxRunMs,
      inProcess: a.trusted && !(a.isolated === true && this.untrusted !== undefined),
    };
    this.running.set(a.requestId, entry);
    this.onRunningChange?.(this.watched());
    entry.done = this.execute(a, entry).finally(() => {
      if (this.running.get(a.requestId) === entry) this.running.delete(a.requestId);
      this.inBlocks.forget(a.requestId);
      this.onRunningChange?.(this.watched());
    });
  }

  abort(a: AbortAssignment): void {
    const r = this.running.get(a.requestId);
    if (r === undefined || r.attempt !== a.attempt) return;
    r.aborted = true;
    r.controller.abort(a.reason.toLowerCase());
    // The control plane failed it (its time limit) while its block ran here: this agent gets no new work until it
    // says the block has stopped (domain/request/run-stop.ts). A block that never stops ends with the process.
    if (a.reason === 'FAILED' && r.inProcess) void r.done.then(() => this.reportStopped(a));
  }

  private reportStopped(a: AbortAssignment): Promise<void> {
    const agentMessageId = this.reporter.nextMessageId();
    return this.reporter.send(
      agentMessageId,
      {
        type: 'ReportRequestFailed',
        requestId: a.requestId,
        attempt: a.attempt,
        agentId: this.agentId,
        agentMessageId,
        phase: 'execution',
        errorType: RUN_STOPPED,
        message: `the block of attempt ${a.attempt} stopped after the control plane had failed it`,
        stack: null,
      } as Parameters<Reporter['send']>[1],
      { correlationId: a.correlationId, causationId: a.eventId },
    );
  }

  private async execute(a: RunAssignment, entry: Running): Promise<void> {
    const cause: Cause = { correlationId: a.correlationId, causationId: a.eventId };
    const send = (type: string, extra: Record<string, unknown>, notBefore?: number) => {
      const agentMessageId = this.reporter.nextMessageId();
      const command = {
        type,
        requestId: a.requestId,
        attempt: a.attempt,
        agentId: this.agentId,
        agentMessageId,
        ...extra,
      } as Parameters<Reporter['send']>[1];
      return this.reporter.send(agentMessageId, command, cause, notBefore);
    };
    const startReport = new StartHold(
      this.limits.startHoldMs ?? DEFAULT_START_HOLD_MS,
      (heldMs) => void send('ReportRequestStarted', heldMs > 0 ? { startedMsBefore: heldMs } : {}),
      () => performance.now(),
    );
    const report = (type: string, extra: Record<string, unknown>, notBefore?: number) => {
      if (type === 'ReportRequestCompleted' || type === 'ReportRequestFailed') {
        const ms = startReport.fold();
        return send(type, ms === undefined ? extra : { ...extra, startedMsBefore: ms }, notBefore);
      }
      startReport.flush();
      return send(type, extra, notBefore);
    };
    const pace = new LogPace(this.limits.logLinesPerSecond, this.reporter.clock);
    const logs = new LogBatcher({
      limits: this.limits.log,
      send: (b) =>
        void report(
          'ReportRequestLog',
          b.truncated ? { lines: b.lines, truncated: true } : { lines: b.lines },
          pace.slot(b.lines.length),
        ),
    });
    const fail = (f: FailureReport) => {
      this.failed++;
      logs.close();
      const weights = this.replicas.weightsOf(a.replicaId);
      return report('ReportRequestFailed', {
        phase: f.phase,
        errorType: f.errorType,
        message: f.message,
        stack: f.stack,
        ...(weights === undefined ? {} : { weightsFingerprint: weights }),
      });
    };
    const model = this.replicas.hot(a.replicaId);
    if (model === undefined) {
      await fail(
        failureReport(
          new FabricError(
            AgentErrorCode.ReplicaNotLoaded,
            503,
            `replica ${a.replicaId} is not loaded on agent ${this.agentId}`,
          ),
          'load',
        ),
      );
      return;
    }
    let stage: FailureReport['phase'] | undefined;
    const t0 = performance.now();
    const tokens = new TokenStream(
      (t) => void report('ReportRequestTokens', { tokens: t }),
      model.tokenizer ? (ids) => model.tokenizer!.decode(ids) : undefined,
    );
    try {
      const payload = await this.payload(a);
      const inputs = await readInputTensors(this.blobs, payload.tensors);
      const timeoutMs = a.options.timeoutMs ?? payload.timeoutMs ?? this.maxRunMs;
      entry.deadline = Date.now() + timeoutMs;
      this.onRunningChange?.(this.watched());
      const common = {
        requestId: a.requestId,
        timeoutMs,
        signal: entry.controller.signal,
        onLog: (l: { stream: 'stdout' | 'stderr'; line: string }) => logs.push(l.stream, l.line),
        // A model variant's persistent edit (filled in by the command API from its registration).
        ...(payload.edit === undefined ? {} : { edit: payload.edit }),
        ...(inputs.length === 0 ? {} : { inputs }),
      };
      const req: RunRequest = {
        ...common,
        invokes: invokeSpecs(payload.invokes, payload.block),
        newTokens:
          payload.newTokens ??
          (payload.generation?.maxNewTokens === undefined ? Math.max(0, a.options.steps - 1) : undefined),
        ...(payload.generation === undefined ? {} : { generation: payload.generation }),
        onToken: (t) => {
          if (!entry.aborted) tokens.add(t);
        },
      };
      const opener = await this.opener(a, model, timeoutMs, entry.controller.signal);
      // RUNNING is reported when the runtime opens the channel to the blocks (requests on a model run at once and
      // take its forward work in turn).
      let t1 = t0;
      const open: OpenChannel = (start) => {
        t1 = performance.now();
        startReport.started();
        return opener(start);
      };
      let container: Parameters<typeof encodeResultContainer>[0];
      if (payload.traces !== undefined) {
        // A session: each trace's progress is a TRACE status of the request; the result holds every trace's invokes.
        const session: SessionRequest = {
          ...common,
          traces: payload.traces.map((t) => ({
            invokes: invokeSpecs(t.invokes, t.block),
            ...(t.newTokens === undefined ? {} : { newTokens: t.newTokens }),
            ...(t.generation === undefined ? {} : { generation: t.generation }),
            ...(t.repeat === undefined ? {} : { repeat: t.repeat }),
          })),
          ...(this.limits.progressIntervalMs === undefined
            ? {}
            : { progressIntervalMs: this.limits.progressIntervalMs }),
          onTrace: (e) => {
            if (!entry.aborted)
              void report('ReportRequestTrace', {
                trace: e.trace,
                traces: e.traces,
                status: e.status,
                ...(e.ms === undefined ? {} : { ms: Math.round(e.ms * 10) / 10 }),
                ...(e.iterations === undefined ? {} : { iterations: e.iterations, done: e.done ?? 0 }),
                ...(e.reported === undefined ? {} : { reported: e.reported }),
              });
          },
        };
        const result = await model.runSession(session, open);
        if (entry.aborted) return logs.discard();
        tokens.close();
        stage = 'result';
        container = {
          meta: {
            ...this.meta(a, result.traces[0]!),
            traces: result.traces.map((r) => ({ invokes: r.invokes.length, ...runMeta(r) })),
          },
          invokes: result.traces.flatMap((r) => r.invokes.map((i) => i.result)),
        };
      } else {
        const result = await model.run(req, open);
        if (entry.aborted) return logs.discard();
        tokens.close();
        stage = 'result';
        container = { meta: this.meta(a, result), invokes: result.invokes.map((i) => i.result) };
      }
      const t2 = performance.now();
      const bytes = encodeResultContainer(container);
      if (bytes.byteLength > this.limits.resultMaxBytes) {
        throw new FabricError(
          AgentErrorCode.ResultTooLarge,
          413,
          `the result is ${bytes.byteLength} bytes; a request's result may be at most ${this.limits.resultMaxBytes} bytes`,
          {
            hint: 'save less (a slice, a mean, the top-k) in the block, or ask the operator to raise NDIF_RESULT_MAX_BYTES',
          },
        );
      }
      const blob = await storeResult(this.blobs, bytes, {
        streamMinBytes: this.limits.resultStreamMinBytes ?? DEFAULT_RESULT_STREAM_MIN_BYTES,
        announce: (ref) => void report('ReportRequestResultWriting', { resultRef: ref, bytes: bytes.byteLength }),
        aborted: () => entry.aborted,
      });
      if (blob === undefined || entry.aborted) return logs.discard();
      this.completed++;
      const t3 = performance.now();
      this.log.debug(
        { requestId: a.requestId, waitMs: t1 - t0, runMs: t2 - t1, resultMs: t3 - t2, bytes: blob.size },
        'request completed',
      );
      logs.close();
      const weights = this.replicas.weightsOf(a.replicaId);
      await report('ReportRequestCompleted', {
        resultRef: blob.ref,
        bytes: blob.size,
        sha256: blob.sha256,
        ...(weights === undefined ? {} : { weightsFingerprint: weights }),
      });
    } catch (err) {
      if (entry.aborted) return logs.discard();
      tokens.close();
      this.log.debug({ err, requestId: a.requestId }, 'request failed');
      await fail(failureReport(entry.stopped ? new InterventionError(entry.stopped) : err, stage));
    } finally {
      startReport.drop();
    }
  }

  /**
   * Trusted blocks run in this process; untrusted ones in a sandbox runner, and so does an isolated attempt (a
   * request that was running when this agent died before) even when trusted, where the agent has a sandbox: if it
   * kills a process again, it is the runner's.
   */
  private async opener(
    a: RunAssignment,
    model: HostedModel,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<OpenChannel> {
    if (a.trusted && a.isolated === true && this.untrusted !== undefined) {
      this.log.warn(
        { requestId: a.requestId, attempt: a.attempt },
        'running a trusted request isolated in a sandbox runner: it was in flight when an agent died',
      );
      return this.sandboxed(model, timeoutMs, signal);
    }
    return a.trusted ? this.inProcess(model, a.requestId) : this.sandboxed(model, timeoutMs, signal);
  }

  private inProcess(model: HostedModel, requestId: string): OpenChannel {
    return () =>
      this.inBlocks.watch(
        requestId,
        createInProcessBlocks({
          manifest: model.manifest(),
          tokenizer: model.tokenizer,
          logQuota: new LogQuota(this.limits.log),
        }),
      );
  }

  private async sandboxed(model: HostedModel, timeoutMs: number, signal: AbortSignal): Promise<OpenChannel> {
    if (this.untrusted === undefined) {
      throw new FabricError(
        AgentErrorCode.SandboxUnavailable,
        503,
        `agent ${this.agentId} runs no sandbox; untrusted blocks cannot run here`,
      );
    }
    return this.untrusted(model, { timeoutMs, signal });
  }

  private async payload(a: RunAssignment): Promise<RequestPayload> {
    let raw = a.payload;
    if (a.payloadBlob !== undefined) {
      try {
        raw = JSON.parse((await this.blobs.get(a.payloadBlob.ref)).bytes.toString('utf8'));
      } catch (err) {
        throw new FabricError(
          AgentErrorCode.PayloadUnavailable,
          503,
          `the payload of request ${a.requestId} (blob ${a.payloadBlob.ref}) cannot be read: ${(err as Error).message}`,
        );
      }
    }
    return parseRequestPayload(raw);
  }

  private meta(a: RunAssignment, r: RunResult): Record<string, unknown> {
    return {
      requestId: a.requestId,
      model: a.modelKey,
      replicaId: a.replicaId,
      agentId: this.agentId,
      attempt: a.attempt,
      weightsFingerprint: this.replicas.weightsOf(a.replicaId) ?? null,
      ...runMeta(r),
    };
  }

  /** Aborts every run without reporting (the agent stops; its next boot gets them requeued). */
  async close(): Promise<void> {
    for (const r of this.running.values()) {
      r.aborted = true;
      r.controller.abort('agent stopping');
    }
    await Promise.all([...this.running.values()].map((r) => r.done));
  }
}

/** A trace's invokes as the runtime takes them, each with its own block or else the trace's shared one. */
function invokeSpecs(invokes: InvokePayload[], shared: string | undefined): InvokeSpec[] {
  return invokes.map((inv) => {
    const block = inv.block ?? shared;
    const input = inv.prompt !== undefined ? { prompt: inv.prompt } : { tokens: inv.tokens! };
    return {
      ...input,
      ...(block === undefined ? {} : { block }),
      ...(inv.generation === undefined ? {} : { generation: inv.generation }),
    };
  });
}
