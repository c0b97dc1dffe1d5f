// A scripted GPU agent for the recorded scenarios. It does what the real agent reports, through the same commands
// and with the same ids (`agent:<id>:<messageId>`, messages numbered per boot, reports naming the assignment as
// their cause and carrying its correlation id); the GPU work is a service time on the scenario's clock. It can
// fall silent (a crash or a network cut), restart with a new boot, and re-register after being declared lost.
import type { ControlPlaneCommand } from '../../domain/commands.js';
import { type AssignmentCause, reportAsAgent, settle as settleAll, simulatedGpus } from '../support/sim-agent.js';
import { GIB } from '../../domain/placement/size.js';
import type { GoldenHarness } from './harness.js';

interface Running {
  attempt: number;
  doneAtMs: number;
  cause: AssignmentCause;
}

export class ScriptedAgent {
  boot = 1;
  private messages = 0;
  /** A silent agent sends nothing: no heartbeats, no reports (its process is gone or cut off). */
  silent = false;
  readonly running = new Map<string, Running>();

  constructor(
    private readonly h: GoldenHarness,
    readonly agentId: string,
    readonly gpuGib: number[],
    readonly ramGib: number,
    public serviceMs: number,
  ) {}

  get bootId(): string {
    return `${this.agentId}-boot-${this.boot}`;
  }

  private msg(): string {
    return `${this.bootId}-m${++this.messages}`;
  }

  private report(command: ControlPlaneCommand, messageId: string, cause?: AssignmentCause) {
    return reportAsAgent(this.h.commands, this.agentId, messageId, this.h.iso(), command, cause);
  }

  register() {
    const gpus = simulatedGpus(this.gpuGib, 'sim-gpu');
    return this.report(
      { type: 'RegisterAgent', agentId: this.agentId, bootId: this.bootId, gpus, ramBytes: this.ramGib * GIB },
      this.msg(),
    );
  }

  /** A new process: holds nothing, numbers its messages from 1 again. */
  restart() {
    this.boot++;
    this.messages = 0;
    this.silent = false;
    this.running.clear();
    return this.register();
  }

  /** A heartbeat; refused because the agent was declared lost (or another boot is registered), it registers again. */
  async heartbeat(): Promise<void> {
    if (this.silent) return;
    try {
      await this.report({ type: 'ReportAgentHeartbeat', agentId: this.agentId, bootId: this.bootId }, this.msg());
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code !== 'CP_AGENT_LOST' && code !== 'CP_AGENT_BOOT_MISMATCH') throw e;
      await this.restart();
    }
  }

  /** Acts on the view: loads placed replicas, starts dispatched requests (printing one line), completes finished ones. */
  async sync(): Promise<number> {
    if (this.silent) return 0;
    await this.h.view.catchUp();
    const s = this.h.state();
    let acted = 0;
    for (const r of [...s.cluster.replicas.values()].sort((a, b) => (a.replicaId < b.replicaId ? -1 : 1))) {
      if (r.agentId !== this.agentId || r.bootId !== this.bootId) continue;
      if (r.state === 'PLACED') {
        const m = this.msg();
        await this.report(
          { type: 'ReportReplicaLoading', replicaId: r.replicaId, agentId: this.agentId, agentMessageId: m },
          m,
          r.lastEvent,
        );
        acted++;
      } else if (r.state === 'LOADING') {
        const m = this.msg();
        await this.report(
          { type: 'ReportReplicaHot', replicaId: r.replicaId, agentId: this.agentId, agentMessageId: m, loadMs: 1200 },
          m,
          r.lastEvent,
        );
        acted++;
      }
    }
    for (const [replicaId, ids] of [...s.requests.inFlightByReplica].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      const r = s.cluster.replicas.get(replicaId);
      if (r?.agentId !== this.agentId || r.bootId !== this.bootId) continue;
      for (const id of [...ids].sort()) {
        const v = s.requests.byId.get(id)!;
        const mine = this.running.get(id);
        if (mine !== undefined && mine.attempt === v.attempt) continue;
        const cause = { id: v.lastEvent.id, correlationId: v.correlationId };
        this.running.set(id, { attempt: v.attempt, doneAtMs: this.h.now + this.serviceMs, cause });
        const started = this.msg();
        await this.report(
          {
            type: 'ReportRequestStarted',
            requestId: id,
            attempt: v.attempt,
            agentId: this.agentId,
            agentMessageId: started,
          },
          started,
          cause,
        );
        const logged = this.msg();
        await this.report(
          {
            type: 'ReportRequestLog',
            requestId: id,
            attempt: v.attempt,
            agentId: this.agentId,
            agentMessageId: logged,
            lines: [{ stream: 'stdout', line: `layer 5 mean activation for ${id}` }],
          },
          logged,
          cause,
        );
        acted++;
      }
    }
    for (const [id, run] of [...this.running].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      if (run.doneAtMs > this.h.now) continue;
      this.running.delete(id);
      const m = this.msg();
      const sha = Buffer.from(`${id}:${run.attempt}`).toString('hex').padEnd(64, '0').slice(0, 64);
      await this.report(
        {
          type: 'ReportRequestCompleted',
          requestId: id,
          attempt: run.attempt,
          agentId: this.agentId,
          agentMessageId: m,
          resultRef: `blob_${sha.slice(0, 32)}`,
          bytes: 4096,
          sha256: sha,
        },
        m,
        run.cause,
      );
      acted++;
    }
    return acted;
  }
}

/** Scheduler steps and agent syncs until neither does anything more at the current time. */
export function settle(h: GoldenHarness, agents: ScriptedAgent[], maxLoops = 60): Promise<void> {
  return settleAll(h, agents, maxLoops, () => ` (scenario ${h.scenario} at ${h.iso()})`);
}

/** Moves the clock in steps of `stepMs`; every step the agents that are not silent beat, then everything settles. */
export async function runFor(h: GoldenHarness, agents: ScriptedAgent[], ms: number, stepMs = 5000): Promise<void> {
  for (let t = 0; t < ms; t += stepMs) {
    h.advance(Math.min(stepMs, ms - t));
    for (const a of agents) await a.heartbeat();
    await settle(h, agents);
  }
}
