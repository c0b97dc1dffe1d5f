// The embedded transport: a client of an InProcessBroker with the same contract as the Kafka adapter.
import { transportClosed } from '../errors.js';
import { checkGroup, checkMessages, checkTopic, DEFAULT_MAX_MESSAGE_BYTES } from '../validate.js';
import { InProcessBroker } from './broker.js';
import type { MemberSpec } from './group.js';
import type {
  BatchHandler,
  MessageHandler,
  OutgoingMessage,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportMessage,
} from '../port.js';

export interface InProcessTransportOptions {
  /** Share one broker between the transports that should see each other's messages. */
  broker?: InProcessBroker;
  maxMessageBytes?: number;
}

export class InProcessTransport implements Transport {
  readonly kind = 'inprocess' as const;
  readonly broker: InProcessBroker;
  private readonly maxMessageBytes: number;
  private readonly subscriptions = new Set<Subscription>();
  private closed = false;

  constructor(options: InProcessTransportOptions = {}) {
    this.broker = options.broker ?? new InProcessBroker();
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  async publish(topic: string, messages: OutgoingMessage | readonly OutgoingMessage[]): Promise<void> {
    if (this.closed) throw transportClosed('publish');
    checkTopic(topic);
    this.broker.append(topic, checkMessages(messages, this.maxMessageBytes));
  }

  subscribe(
    topic: string,
    groupId: string,
    handler: MessageHandler,
    options: SubscribeOptions = {},
  ): Promise<Subscription> {
    return this.join(topic, groupId, {
      batch: false,
      options,
      deliver: (m: readonly TransportMessage[]) => handler(m[0]),
    });
  }

  subscribeBatch(
    topic: string,
    groupId: string,
    handler: BatchHandler,
    options: SubscribeOptions = {},
  ): Promise<Subscription> {
    return this.join(topic, groupId, { batch: true, options, deliver: handler });
  }

  private async join(topic: string, groupId: string, member: MemberSpec): Promise<Subscription> {
    if (this.closed) throw transportClosed('subscribe');
    checkTopic(topic);
    checkGroup(groupId);
    const group = this.broker.group(groupId, topic);
    await group.join(member);
    let closing: Promise<void> | undefined;
    const subscription: Subscription = {
      topic,
      groupId,
      close: () =>
        (closing ??= group.leave(member).finally(() => {
          this.subscriptions.delete(subscription);
        })),
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
  }
}
