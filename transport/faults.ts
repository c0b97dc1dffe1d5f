// Fault injection for tests of idempotent consumers: a Transport whose subscribers get every message
// (and every batch) twice in a row, as after a redelivery. Publishing is unchanged.
import type {
  BatchHandler,
  MessageHandler,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportMessage,
} from './port.js';

function copy(m: TransportMessage): TransportMessage {
  return { ...m, value: Buffer.from(m.value), headers: { ...m.headers } };
}

export function withDuplicateDelivery(inner: Transport): Transport {
  return {
    kind: inner.kind,
    publish: (topic, messages) => inner.publish(topic, messages),
    subscribe(
      topic: string,
      groupId: string,
      handler: MessageHandler,
      options?: SubscribeOptions,
    ): Promise<Subscription> {
      return inner.subscribe(
        topic,
        groupId,
        async (m) => {
          const second = copy(m);
          await handler(m);
          await handler(second);
        },
        options,
      );
    },
    subscribeBatch(
      topic: string,
      groupId: string,
      handler: BatchHandler,
      options?: SubscribeOptions,
    ): Promise<Subscription> {
      return inner.subscribeBatch(
        topic,
        groupId,
        async (ms) => {
          const second = ms.map(copy);
          await handler(ms);
          await handler(second);
        },
        options,
      );
    },
    close: () => inner.close(),
  };
}
