// Transport → store: consumes the agent-events topic and executes each agent's command through the control
// plane's command handlers, with command id `agent:<agentId>:<agentMessageId>` (a redelivered message decides the
// same events with the same ids: nothing new is stored), actor `agent:<agentId>`, and the correlation and
// causation of the assignment the report is about. Messages of one key are executed in order, keys of a batch
// concurrently. A refused command (the agent's report no longer applies, e.g. a heartbeat after the agent was
// declared lost) is logged, the agent is told with a `refused` notice, and the message is done; a store failure
// fails the batch, which the transport delivers again.
import type { Logger } from 'pino';
import type { CommandMetadata } from '../../command-api/handlers/codec.js';
import type { CommandOutcome } from '../../command-api/handlers/service.js';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';
import { isFabricError } from '../../protocol/errors.js';
import { jsonMessage, readJson } from '../json.js';
import type { Subscription, Transport, TransportMessage } from '../port.js';
import {
  agentAssignmentsTopic,
  agentEnvelopeSchema,
  DEFAULT_TOPICS,
  WIRE_VERSION,
  type AgentEnvelope,
  type RefusedNotice,
  type RelayTopics,
} from './wire.js';

export interface CommandExecutor {
  execute(command: ControlPlaneCommand, meta: CommandMetadata): Promise<CommandOutcome>;
}

export interface AgentEventIntakeOptions {
  transport: Transport;
  commands: CommandExecutor;
  log: Logger;
  topics?: RelayTopics;
  /** Consumer group of the relay. Default `ndif-relay`. */
  groupId?: string;
  /** Epoch ms; the time recorded for each executed command. */
  clock?: () => number;
}

export interface IntakeStats {
  executed: number;
  refused: number;
  malformed: number;
}

export class AgentEventIntake {
  private subscription: Subscription | undefined;
  private readonly topics: RelayTopics;
  private readonly clock: () => number;
  readonly stats: IntakeStats = { executed: 0, refused: 0, malformed: 0 };
  /** Told of each stored agent report: its command type and ms from the agent's publish to stored (metrics). */
  onStored: ((commandType: string, delayMs: number) => void) | undefined;

  constructor(private readonly options: AgentEventIntakeOptions) {
    this.topics = options.topics ?? DEFAULT_TOPICS;
    this.clock = options.clock ?? Date.now;
  }

  async start(): Promise<void> {
    if (this.subscription !== undefined) return;
    this.subscription = await this.options.transport.subscribeBatch(
      this.topics.agentEvents,
      this.options.groupId ?? 'ndif-relay',
      (ms) => this.onBatch(ms),
      {
        fromBeginning: true,
        onError: (err, ms) =>
          this.options.log.warn(
            { err, messages: ms.length, first: ms[0]?.offset },
            'agent events not stored yet; delivered again',
          ),
      },
    );
  }

  private async onBatch(messages: readonly TransportMessage[]): Promise<void> {
    const byKey = new Map<string, TransportMessage[]>();
    for (const m of messages) {
      const list = byKey.get(m.key);
      if (list === undefined) byKey.set(m.key, [m]);
      else list.push(m);
    }
    await Promise.all(
      [...byKey.values()].map(async (list) => {
        for (const m of list) await this.onMessage(m);
      }),
    );
  }

  private parse(m: TransportMessage): AgentEnvelope | undefined {
    let raw: unknown;
    try {
      raw = readJson(m);
    } catch {
      return undefined;
    }
    const r = agentEnvelopeSchema.safeParse(raw);
    if (!r.success) return undefined;
    const env = r.data as unknown as AgentEnvelope;
    const c = env.command as { agentId: string; agentMessageId?: string };
    // An agent publishes only its own events: the envelope, the command and the message id must agree.
    if (c.agentId !== env.agentId) return undefined;
    if (c.agentMessageId !== undefined && c.agentMessageId !== env.agentMessageId) return undefined;
    return env;
  }

  private async onMessage(m: TransportMessage): Promise<void> {
    const env = this.parse(m);
    if (env === undefined) {
      this.stats.malformed++;
      this.options.log.warn(
        { topic: m.topic, partition: m.partition, offset: m.offset, key: m.key },
        'agent event is not a valid agent envelope; skipped',
      );
      return;
    }
    const meta: CommandMetadata = {
      commandId: `agent:${env.agentId}:${env.agentMessageId}`,
      actor: `agent:${env.agentId}`,
      at: new Date(this.clock()).toISOString(),
    };
    if (env.correlationId !== undefined) meta.correlationId = env.correlationId;
    if (env.causationId !== undefined) meta.causationId = env.causationId;
    try {
      await this.options.commands.execute(env.command, meta);
      this.stats.executed++;
      this.onStored?.(env.command.type, this.clock() - m.timestamp);
    } catch (e) {
      if (!isFabricError(e) || e.httpStatus >= 500) throw e;
      this.stats.refused++;
      this.options.log.warn(
        { code: e.code, agentId: env.agentId, command: env.command.type, agentMessageId: env.agentMessageId },
        `agent command refused: ${e.message}`,
      );
      const notice: RefusedNotice = {
        v: WIRE_VERSION,
        kind: 'refused',
        agentId: env.agentId,
        bootId: env.bootId,
        agentMessageId: env.agentMessageId,
        commandType: env.command.type,
        code: e.code,
        message: e.message,
      };
      await this.options.transport.publish(
        agentAssignmentsTopic(this.topics.assignments, env.agentId),
        jsonMessage(env.agentId, notice),
      );
    }
  }

  /** The transport's consumer lag of the agent-events subscription (empty where delivery is immediate). */
  lag(): { partition: number; messages: number }[] {
    return this.subscription?.lag?.() ?? [];
  }

  async stop(): Promise<void> {
    const s = this.subscription;
    this.subscription = undefined;
    await s?.close();
  }
}
