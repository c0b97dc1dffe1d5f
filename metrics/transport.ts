// ndif_transport_consumer_lag_messages{topic,group,partition}: messages published but not yet fetched by this
// process's subscriptions (Kafka); nothing for transports that deliver at once.
import { Gauge, type Registry } from 'prom-client';

export interface ConsumerLagSource {
  topic: string;
  group: string;
  partitions: { partition: number; messages: number }[];
}

export function consumerLagGauge(registry: Registry, sources: () => ConsumerLagSource[]): void {
  new Gauge({
    name: 'ndif_transport_consumer_lag_messages',
    help: 'Messages on a topic partition this process consumes that it has not fetched yet (Kafka consumer lag)',
    labelNames: ['topic', 'group', 'partition'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of sources())
        for (const p of s.partitions)
          this.set({ topic: s.topic, group: s.group, partition: String(p.partition) }, p.messages);
    },
  });
}
