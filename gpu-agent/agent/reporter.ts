// The agent's outbox: every report is one numbered message (`<bootId>.<n>`) on the agent-events topic, keyed by
// its request, replica or the agent. Messages of one key are published one after the other (a request's
// STARTED, LOG lines and COMPLETED stay in order), each retried with the same message id until the transport
// accepts it, so a retry is a redelivery the relay stores once. Keys do not wait for each other.
import type { Logger } from 'pino';
import { setTimeout as sleep } from 'node:timers/promises';
import { jsonMessage } from '../../transport/json.js';
import type { Transport } from '../../transport/port.js';
import { agentEventKey, WIRE_VERSION, type AgentCommand, type AgentEnvelope } from '../../transport/relay/wire.js';

export interface Cause {
  correlationId: string;
  causationId: string;
}

export class Reporter {
  private seq = 0;
  private readonly chains = new Map<string, Promise<void>>();
  private stopped = false;

  constructor(
    private readonly transport: Transport,
    private readonly topic: string,
    private readonly agentId: string,
    private readonly bootId: string,
    private readonly log: Logger,
    /** The time reports are stamped and held back (`notBefore`) by. */
    readonly clock: () => number = Date.now,
  ) {}

  /** A fresh message id; pass it in the command (reports carry it) and to send(). */
  nextMessageId(): string {
    return `${this.bootId}.${++this.seq}`;
  }

  /** Queues the command behind the earlier ones of its key; resolves once the transport accepted it (or the agent stops). */
  send(agentMessageId: string, command: AgentCommand, cause?: Cause, notBefore?: number): Promise<void> {
    const envelope: AgentEnvelope = {
      v: WIRE_VERSION,
      agentId: this.agentId,
      bootId: this.bootId,
      agentMessageId,
      sentAt: new Date(this.clock()).toISOString(),
      command,
    };
    if (cause !== undefined) {
      envelope.correlationId = cause.correlationId;
      envelope.causationId = cause.causationId;
    }
    const key = agentEventKey(command);
    const message = jsonMessage(key, envelope);
    const prev = this.chains.get(key) ?? Promise.resolve();
    const next = prev.then(async () => {
      const wait = notBefore === undefined ? 0 : notBefore - this.clock();
      if (wait > 0) await sleep(wait);
      return this.publish(message, command.type);
    });
    this.chains.set(key, next);
    void next.finally(() => {
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
    return next;
  }

  private async publish(message: ReturnType<typeof jsonMessage>, type: string): Promise<void> {
    let delay = 100;
    for (;;) {
      if (this.stopped) return;
      try {
        await this.transport.publish(this.topic, message);
        return;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (
          code === 'TRANSPORT_MESSAGE_INVALID' ||
          code === 'TRANSPORT_MESSAGE_TOO_LARGE' ||
          code === 'TRANSPORT_CLOSED'
        ) {
          this.log.error({ err, type }, 'agent report cannot be sent; dropped');
          return;
        }
        this.log.warn({ err, type }, 'agent report not accepted yet; retrying');
        await sleep(delay);
        delay = Math.min(delay * 2, 5000);
      }
    }
  }

  /** Resolves when every queued report was sent (or given up). */
  async flush(): Promise<void> {
    await Promise.all([...this.chains.values()]);
  }

  stop(): void {
    this.stopped = true;
  }
}
