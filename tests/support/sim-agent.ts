// What the simulated GPU agents of the control-plane tests share (tests/scheduler/harness.ts SimAgent,
// tests/golden/scripted-agent.ts ScriptedAgent, tests/command-api/harness.ts ReportingAgent): reports sent through
// the agent's own commands with the ids the relay gives a real agent's (`agent:<id>:<messageId>`, actor
// `agent:<id>`, the assignment as cause), and `settle`, which steps the scheduler and lets the agents act until
// nothing more happens. They differ in what they do on a sync (the golden agent also reports LOADING and a log
// line, in a sorted order its recordings depend on; the API tests' agent only loads, and runs what the test says).
import type { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import type { ControlPlaneCommand } from '../../domain/commands.js';
import { GIB } from '../../domain/placement/size.js';

export interface AssignmentCause {
  id: string;
  correlationId: string;
}

/** Executes `command` as agent `agentId`'s message `messageId`, at `at`, caused by an assignment event. */
export function reportAsAgent(
  commands: ControlPlaneCommands,
  agentId: string,
  messageId: string,
  at: string,
  command: ControlPlaneCommand,
  cause?: AssignmentCause,
) {
  return commands.execute(command, {
    commandId: `agent:${agentId}:${messageId}`,
    actor: `agent:${agentId}`,
    at,
    correlationId: cause?.correlationId,
    causationId: cause?.id,
  });
}

/** The GPUs an agent registers: `gpuGib[i]` GiB each. */
export function simulatedGpus(gpuGib: number[], name: string) {
  return gpuGib.map((g, index) => ({ index, memoryBytes: g * GIB, name }));
}

/** A simulated agent as `settle` sees it: acts on the current view and says how many things it did. */
export interface SyncingAgent {
  sync(): Promise<number>;
}

interface Stepping {
  scheduler: { step(): Promise<{ executed: Array<{ appended: number }> }> };
}

/** Scheduler steps and agent syncs until neither does anything more (at the current clock time). */
export async function settle(
  h: Stepping,
  agents: SyncingAgent[],
  maxLoops = 50,
  where: () => string = () => '',
): Promise<void> {
  for (let i = 0; i < maxLoops; i++) {
    const report = await h.scheduler.step();
    let acted = report.executed.filter((e) => e.appended > 0).length;
    for (const a of agents) acted += await a.sync();
    if (acted === 0) return;
  }
  throw new Error(`the control plane did not settle in ${maxLoops} loops${where()}`);
}
