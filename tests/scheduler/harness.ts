// A control plane on a real SQLite event store (in memory) with the live projections, the command handlers and
// the scheduler on a clock the test moves; and a simulated GPU agent that answers assignments the way the real
// agent does, through the same commands (the GPU work itself is a service time on that clock).
import { RUN_STOPPED } from '../../domain/request/run-stop.js';
import { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';
import { GIB } from '../../domain/placement/size.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import type { ControlPlaneState } from '../../projections/control-plane/state.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import type { OnDemandModel } from '../../scheduler/config.js';
import { Scheduler, type SchedulerOptions } from '../../scheduler/scheduler.js';
import { type AssignmentCause, reportAsAgent, settle as settleAll, simulatedGpus } from '../support/sim-agent.js';

export const START_MS = Date.parse('2025-03-01T10:00:00.000Z');

export interface Harness {
  store: SqliteEventStore;
  view: ControlPlaneView;
  commands: ControlPlaneCommands;
  scheduler: Scheduler;
  clock: { now: number };
  advance(ms: number): void;
  iso(): string;
  /** Runs a command as `actor` at the clock's time. */
  run(command: ControlPlaneCommand, actor?: string, commandId?: string): ReturnType<ControlPlaneCommands['execute']>;
  state(): ControlPlaneState;
  close(): Promise<void>;
}

let seq = 0;

export async function startHarness(
  options: {
    onDemand?: Record<string, OnDemandModel>;
    config?: Partial<SchedulerOptions['config']>;
    path?: string;
  } = {},
): Promise<Harness> {
  const store = new SqliteEventStore({ path: options.path ?? ':memory:' });
  const view = new ControlPlaneView(store, new SqliteCheckpoints(store.db));
  await view.start();
  const clock = { now: START_MS };
  let scheduler: Scheduler | undefined;
  const commands = new ControlPlaneCommands(store, {
    onHeartbeat: (a, b, at) => scheduler?.observeHeartbeat(a, b, Date.parse(at)),
  });
  const onDemand = options.onDemand ?? {};
  scheduler = new Scheduler({
    view,
    commands,
    clock: () => clock.now,
    config: { onDemand: (k) => onDemand[k], ...options.config },
    onError: (e) => {
      throw e;
    },
  });
  const h: Harness = {
    store,
    view,
    commands,
    scheduler,
    clock,
    advance: (ms) => {
      clock.now += ms;
    },
    iso: () => new Date(clock.now).toISOString(),
    run: (command, actor = 'key:test', commandId = `test-${++seq}`) =>
      commands.execute(command, { commandId, actor, at: new Date(clock.now).toISOString() }),
    state: () => view.state,
    close: async () => {
      await scheduler!.stop();
      await view.stop();
      await store.close();
    },
  };
  return h;
}

/** A simulated agent: registers, loads what is placed on it, runs what is dispatched to it for `serviceMs`. */
export class SimAgent {
  bootId = 'boot-1';
  private messages = 0;
  /** Requests running here: request id → attempt and the clock time it finishes. */
  readonly running = new Map<
    string,
    { attempt: number; doneAtMs: number; cause: { id: string; correlationId: string } }
  >();
  completed = 0;
  /** Off: a run the control plane failed for its time limit goes on to its end here (its end then says it stopped). */
  abortsTimedOut = true;

  constructor(
    private readonly h: Harness,
    readonly agentId: string,
    readonly gpuGib: number[] = [24],
    readonly ramGib = 64,
    public serviceMs = 100,
  ) {}

  private msg(): string {
    return `${this.agentId}-${this.bootId}-m${++this.messages}`;
  }

  /** Reports carry the assignment's correlation id and name the assignment event as their cause (as the relay does). */
  private report(command: ControlPlaneCommand, cause?: AssignmentCause) {
    const agentMessageId = (command as { agentMessageId?: string }).agentMessageId ?? this.msg();
    return reportAsAgent(this.h.commands, this.agentId, agentMessageId, this.h.iso(), command, cause);
  }

  register() {
    return this.report({
      type: 'RegisterAgent',
      agentId: this.agentId,
      bootId: this.bootId,
      gpus: simulatedGpus(this.gpuGib, 'virtual'),
      ramBytes: this.ramGib * GIB,
    });
  }

  heartbeat() {
    return this.report({ type: 'ReportAgentHeartbeat', agentId: this.agentId, bootId: this.bootId });
  }

  /** A restart: a new process (boot) holding nothing; `died` says how the old one ended (reported with the registration). */
  restart(died?: { signal?: string; code?: number; cause?: string }) {
    const previous = this.bootId;
    this.bootId = `boot-${Number(this.bootId.split('-')[1]) + 1}`;
    const running = [...this.running.keys()];
    this.running.clear();
    if (died === undefined) return this.register();
    const previousExit = {
      bootId: previous,
      code: died.code ?? null,
      signal: died.signal ?? null,
      cause: died.cause ?? null,
      stderrTail: [],
      running: died.cause ? running : [],
    };
    return this.report({
      type: 'RegisterAgent',
      agentId: this.agentId,
      bootId: this.bootId,
      gpus: simulatedGpus(this.gpuGib, 'virtual'),
      ramBytes: this.ramGib * GIB,
      previousExit,
    });
  }

  /** Acts on the current view: loads placed replicas (HOT at once), starts dispatched requests, completes finished ones. */
  async sync(): Promise<number> {
    await this.h.view.catchUp();
    const s = this.h.state();
    let acted = 0;
    for (const r of s.cluster.replicas.values()) {
      if (r.agentId !== this.agentId || r.bootId !== this.bootId) continue;
      if (r.state === 'PLACED' || r.state === 'LOADING') {
        await this.report(
          {
            type: 'ReportReplicaHot',
            replicaId: r.replicaId,
            agentId: this.agentId,
            agentMessageId: this.msg(),
            loadMs: 5,
          },
          r.lastEvent,
        );
        acted++;
      }
    }
    for (const [replicaId, ids] of s.requests.inFlightByReplica) {
      const r = s.cluster.replicas.get(replicaId);
      if (r?.agentId !== this.agentId) continue;
      for (const id of ids) {
        const v = s.requests.byId.get(id)!;
        const mine = this.running.get(id);
        if (mine === undefined || mine.attempt !== v.attempt) {
          const cause = { id: v.lastEvent.id, correlationId: v.correlationId };
          this.running.set(id, { attempt: v.attempt, doneAtMs: this.h.clock.now + this.serviceMs, cause });
          await this.report(
            {
              type: 'ReportRequestStarted',
              requestId: id,
              attempt: v.attempt,
              agentId: this.agentId,
              agentMessageId: this.msg(),
            },
            cause,
          );
          acted++;
        }
      }
    }
    // A run the control plane failed for its time limit (a trusted block in this process) is aborted, as the real
    // agent does, and the agent says it has stopped (until then it gets no new work: domain/request/run-stop.ts).
    const held = this.abortsTimedOut ? s.requests.blockRunningByAgent.get(this.agentId) : undefined;
    for (const [id, run] of [...this.running]) {
      if (!held?.has(id) || s.requests.byId.get(id)?.attempt !== run.attempt) continue;
      this.running.delete(id);
      await this.report(
        {
          type: 'ReportRequestFailed',
          requestId: id,
          attempt: run.attempt,
          agentId: this.agentId,
          agentMessageId: this.msg(),
          phase: 'execution',
          errorType: RUN_STOPPED,
          message: `the block of attempt ${run.attempt} stopped after the control plane had failed it`,
          stack: null,
        },
        run.cause,
      );
      acted++;
    }
    for (const [id, run] of [...this.running]) {
      if (run.doneAtMs > this.h.clock.now) continue;
      this.running.delete(id);
      await this.report(
        {
          type: 'ReportRequestCompleted',
          requestId: id,
          attempt: run.attempt,
          agentId: this.agentId,
          agentMessageId: this.msg(),
          resultRef: `blob:${id}:${run.attempt}`,
          bytes: 16,
          sha256: 'ab'.repeat(32),
        },
        run.cause,
      );
      this.completed++;
      acted++;
    }
    return acted;
  }

  /** The earliest time one of its running requests finishes. */
  nextDoneAt(): number | undefined {
    let t: number | undefined;
    for (const r of this.running.values()) if (t === undefined || r.doneAtMs < t) t = r.doneAtMs;
    return t;
  }
}

/** Scheduler steps and agent syncs until neither does anything more (at the current clock time). */
export function settle(h: Harness, agents: SimAgent[], maxLoops = 50): Promise<void> {
  return settleAll(h, agents, maxLoops);
}

export function submit(
  h: Harness,
  requestId: string,
  modelKey: string,
  opts: { priority?: boolean; submitter?: string; options?: Record<string, unknown> } = {},
) {
  return h.run(
    {
      type: 'SubmitRequest',
      requestId,
      modelKey,
      submitter: opts.submitter ?? 'key:test',
      priority: opts.priority ?? false,
      trusted: true,
      payload: { prompt: 'The Eiffel Tower is in' },
      options: opts.options,
    },
    opts.submitter ?? 'key:test',
  );
}
