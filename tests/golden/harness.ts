// The real control plane for recorded scenarios: a SQLite event store, the live composite projection, the command
// handlers and the scheduler on an injected clock, with every command id chosen by the script — so a scenario run
// twice writes the same log, event for event (ids, positions, times, metadata).
import { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import type { ControlPlaneState } from '../../projections/control-plane/state.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import type { OnDemandModel, SchedulerConfig } from '../../scheduler/config.js';
import { Scheduler } from '../../scheduler/scheduler.js';

export const GOLDEN_START_MS = Date.parse('2025-03-03T08:00:00.000Z');

export class GoldenHarness {
  readonly store: SqliteEventStore;
  readonly view: ControlPlaneView;
  readonly commands: ControlPlaneCommands;
  readonly scheduler: Scheduler;
  now = GOLDEN_START_MS;
  private commandSeq = 0;

  private constructor(
    readonly scenario: string,
    path: string,
    onDemand: Record<string, OnDemandModel>,
    config: Partial<SchedulerConfig>,
  ) {
    this.store = new SqliteEventStore({ path });
    this.view = new ControlPlaneView(this.store, new SqliteCheckpoints(this.store.db));
    let scheduler: Scheduler | undefined;
    this.commands = new ControlPlaneCommands(this.store, {
      onHeartbeat: (a, b, at) => scheduler?.observeHeartbeat(a, b, Date.parse(at)),
    });
    scheduler = new Scheduler({
      view: this.view,
      commands: this.commands,
      clock: () => this.now,
      config: { ...config, onDemand: (k) => onDemand[k] },
      onError: (e) => {
        throw e;
      },
    });
    this.scheduler = scheduler;
  }

  static async start(
    scenario: string,
    options: { onDemand?: Record<string, OnDemandModel>; config?: Partial<SchedulerConfig>; path?: string } = {},
  ): Promise<GoldenHarness> {
    const h = new GoldenHarness(scenario, options.path ?? ':memory:', options.onDemand ?? {}, options.config ?? {});
    await h.view.start();
    return h;
  }

  iso(): string {
    return new Date(this.now).toISOString();
  }

  advance(ms: number): void {
    this.now += ms;
  }

  state(): ControlPlaneState {
    return this.view.state;
  }

  /** A user's or operator's command, with the next command id of this scenario. */
  run(command: ControlPlaneCommand, actor: string) {
    return this.commands.execute(command, {
      commandId: `${this.scenario}:cmd-${++this.commandSeq}`,
      actor,
      at: this.iso(),
    });
  }

  /** Like run, but a refusal is part of the script (it appends nothing); returns its code. */
  async attempt(command: ControlPlaneCommand, actor: string): Promise<string | undefined> {
    try {
      await this.run(command, actor);
      return undefined;
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (typeof code !== 'string') throw e;
      return code;
    }
  }

  async events(): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    for (let after = 0; ; ) {
      const page = await this.store.readAll({ afterPosition: after, limit: 10_000 });
      if (page.length === 0) return out;
      out.push(...page);
      after = page[page.length - 1].position;
    }
  }

  async close(): Promise<void> {
    await this.scheduler.stop();
    await this.view.stop();
    await this.store.close();
  }
}
