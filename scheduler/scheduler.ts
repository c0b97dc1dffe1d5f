// The scheduler (process manager): reacts to the control plane's read models and to a clock by issuing commands
// through the command handlers (system:scheduler), round after round until nothing more is decided. Each round is
// a pure plan (plan.ts) over one consistent view; the time comes from the injected clock, heartbeats from
// observeHeartbeat, so a test drives it step by step with no timers.
import type { ControlPlaneCommand } from '../domain/commands.js';
import { isFabricError } from '../protocol/errors.js';
import type { StoredEvent } from '../eventstore/port.js';
import type { ControlPlaneState } from '../projections/control-plane/state.js';
import { DEFAULT_SCHEDULER_CONFIG, SCHEDULER_ACTOR, type SchedulerConfig } from './config.js';
import { planRound } from './plan.js';

/**
 * Commands executed between two turns given to the event loop. They are issued together: commands on different
 * streams run concurrently (one stream's in order, StreamLocks) and their appends commit in one transaction of the
 * store (one command at a time was one transaction each).
 */
const COMMANDS_PER_TURN = 8;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export interface SchedulerView {
  readonly state: ControlPlaneState;
  /** Resolves once events up to `position` are in `state`. */
  waitForPosition(position: number, timeoutMs?: number): Promise<void>;
  /** Resolves once everything stored when called is in `state`. */
  catchUp(timeoutMs?: number): Promise<void>;
  onApplied?(listener: (event: StoredEvent, state: ControlPlaneState) => void): () => void;
}

/** The metadata the scheduler gives the commands it issues. */
export interface IssuedCommandMetadata {
  commandId: string;
  actor: string;
  at: string;
  correlationId?: string;
  causationId?: string;
}

/** What the scheduler reads of an issued command's outcome. */
export interface IssuedCommandOutcome {
  /** Global position of the command's last event; undefined when nothing was appended. */
  position: number | undefined;
  events: readonly unknown[];
  /** The command had been handled before (same command id): nothing new was appended. */
  alreadyStored: boolean;
}

/** Where the scheduler's commands go: the command API's service (command-api/handlers/service.ts) in every fabric. */
export interface CommandExecutor {
  execute(command: ControlPlaneCommand, meta: IssuedCommandMetadata): Promise<IssuedCommandOutcome>;
}

export interface ExecutedCommand {
  commandId: string;
  type: string;
  /** Events appended (0: nothing to do, or already stored). */
  appended: number;
  /** The refusal, when the command was refused (the view was stale; the next round decides again). */
  refused?: { code: string; message: string };
}

export interface StepReport {
  atMs: number;
  rounds: number;
  executed: ExecutedCommand[];
}

export interface SchedulerOptions {
  view: SchedulerView;
  commands: CommandExecutor;
  /** Epoch milliseconds. */
  clock: () => number;
  config: Partial<SchedulerConfig> & Pick<SchedulerConfig, 'onDemand'>;
  /** Called with every step that executed something. */
  onStep?(report: StepReport): void;
  /**
   * Called after each round is planned: how long planning took (ms, wall clock), the commands planned, whether it was
   * a tick, and the CPU time the process spent meanwhile (ms; on a loaded machine the wall clock also counts the time
   * the process was not running).
   */
  onRoundPlanned?(ms: number, commands: number, tick: boolean, cpuMs: number): void;
  /** Called when a step fails (the store is down, a bug); the scheduler keeps running. Default: console.error. */
  onError?(error: unknown): void;
}

export class Scheduler {
  readonly config: SchedulerConfig;
  private readonly heartbeats = new Map<string, { bootId: string; atMs: number }>();
  private startedAtMs: number;
  private lastTickAtMs = Number.NEGATIVE_INFINITY;
  private lastAutoscaleAtMs = Number.NEGATIVE_INFINITY;
  private running: Promise<StepReport> | undefined;
  private rerun = false;
  private timer: NodeJS.Timeout | undefined;
  private unlisten: (() => void) | undefined;
  private stopped = true;

  constructor(private readonly options: SchedulerOptions) {
    this.config = { ...DEFAULT_SCHEDULER_CONFIG, ...options.config };
    this.startedAtMs = options.clock();
  }

  /** Records a heartbeat (heartbeats are not stored; the agent health rule reads them from here). */
  observeHeartbeat(agentId: string, bootId: string, atMs: number): void {
    const prev = this.heartbeats.get(agentId);
    if (prev === undefined || prev.bootId !== bootId || prev.atMs < atMs)
      this.heartbeats.set(agentId, { bootId, atMs });
  }

  /** Plans and executes rounds until a round changes nothing. Steps never overlap: a second call waits for the first. */
  step(): Promise<StepReport> {
    const prev = this.running ?? Promise.resolve(undefined);
    const next = prev.then(
      () => this.runStep(),
      () => this.runStep(),
    );
    this.running = next;
    void next
      .finally(() => {
        if (this.running !== next) return;
        this.running = undefined;
        if (this.rerun && !this.stopped) {
          this.rerun = false;
          this.schedule();
        }
      })
      .catch(() => undefined);
    return next;
  }

  private async runStep(): Promise<StepReport> {
    const { view, commands, clock } = this.options;
    await view.catchUp();
    const now = clock();
    const tick = now - this.lastTickAtMs >= this.config.tickMs;
    if (tick) this.lastTickAtMs = now;
    const autoscale = now - this.lastAutoscaleAtMs >= this.config.autoscaleCheckMs;
    if (autoscale) this.lastAutoscaleAtMs = now;
    const report: StepReport = { atMs: now, rounds: 0, executed: [] };
    const at = new Date(now).toISOString();
    for (let round = 0; round < this.config.maxRoundsPerStep; round++) {
      const planStart = performance.now();
      const cpuStart = this.options.onRoundPlanned === undefined ? undefined : process.cpuUsage();
      const planned = planRound({
        state: view.state,
        nowMs: now,
        tick,
        autoscale,
        heartbeats: this.heartbeats,
        startedAtMs: this.startedAtMs,
        config: this.config,
      });
      if (cpuStart !== undefined) {
        const cpu = process.cpuUsage(cpuStart);
        this.options.onRoundPlanned?.(
          performance.now() - planStart,
          planned.length,
          tick,
          (cpu.user + cpu.system) / 1000,
        );
      }
      if (planned.length === 0) break;
      report.rounds++;
      let progressed = false;
      let head = 0;
      const run = async (p: (typeof planned)[number], entry: ExecutedCommand): Promise<void> => {
        try {
          const r = await commands.execute(p.command, {
            commandId: p.commandId,
            actor: SCHEDULER_ACTOR,
            at,
            correlationId: p.correlationId,
            causationId: p.causationId,
          });
          if (r.position !== undefined) head = Math.max(head, r.position);
          if (r.events.length > 0 && !r.alreadyStored) {
            entry.appended = r.events.length;
            progressed = true;
          }
        } catch (e) {
          if (!isFabricError(e) || e.httpStatus >= 500) throw e;
          entry.refused = { code: e.code, message: e.message };
        }
      };
      for (let i = 0; i < planned.length; i += COMMANDS_PER_TURN) {
        // Commands on an embedded store complete without a turn of the event loop: give HTTP and the
        // transport a turn between groups, so a round of hundreds of decisions does not hold the process.
        if (i > 0) await nextTurn();
        const group: Promise<void>[] = [];
        for (const p of planned.slice(i, i + COMMANDS_PER_TURN)) {
          const entry: ExecutedCommand = { commandId: p.commandId, type: p.command.type, appended: 0 };
          report.executed.push(entry);
          group.push(run(p, entry));
        }
        // Every command of the group has ended before an error of one is thrown.
        const ended = await Promise.allSettled(group);
        for (const x of ended) if (x.status === 'rejected') throw x.reason;
      }
      if (!progressed) break;
      await view.waitForPosition(head);
      await nextTurn();
    }
    if (report.executed.length > 0) this.options.onStep?.(report);
    return report;
  }

  /** Runs a step on every change of the view and at least every tickMs. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    // Heartbeats are watched from here on: a standby that starts leading gives every agent a full timeout.
    this.startedAtMs = Math.max(this.startedAtMs, this.options.clock());
    this.unlisten = this.options.view.onApplied?.(() => this.schedule());
    this.timer = setInterval(() => this.schedule(), this.config.tickMs);
    this.timer.unref();
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.rerun = true;
      return;
    }
    // A microtask, not setImmediate: the step starts as soon as the code that appended (and applied) the event is
    // done, instead of after the event loop's next poll (the submission's reply, websocket writes: 1–2 ms of a
    // request's latency on a loaded host). Events applied in one run of code still share one step.
    queueMicrotask(() => {
      if (this.stopped) return;
      this.step().catch((e) =>
        (this.options.onError ?? ((err: unknown) => console.error('scheduler step failed:', err)))(e),
      );
    });
  }

  /** Stops reacting; resolves once the step in progress (if any) has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unlisten?.();
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }
}
