// The relay's lag in both directions: assignments not yet published (store head − the relay's published
// position), agent reports from publish to stored (their delay), and the transport's consumer lag on the
// agent-events topic (Kafka: high watermark − last fetched offset, per partition).
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { EventStore } from '../eventstore/port.js';
import type { Relay } from '../transport/relay/relay.js';
import { SECONDS_BUCKETS } from './registry.js';
import { consumerLagGauge } from './transport.js';

export function relayMetrics(
  registry: Registry,
  relay: Relay,
  store: EventStore,
  topics: { agentEvents: string; group: string },
): void {
  const registers = [registry];
  new Gauge({
    name: 'ndif_relay_assignment_lag_events',
    help: 'Events in the store the assignment relay has not published to the agents yet (head − published position)',
    registers,
    async collect() {
      const head = await store.headPosition();
      this.set(Math.max(0, head - relay.assignments.status().position));
    },
  });
  new Counter({
    name: 'ndif_relay_assignments_published_total',
    help: 'Assignment messages the relay published to the agents (since this process started)',
    registers,
    collect() {
      this.reset();
      this.inc(relay.assignments.status().published);
    },
  });
  new Counter({
    name: 'ndif_relay_agent_reports_total',
    help: 'Agent reports the relay took in, by result (stored, refused, malformed)',
    labelNames: ['result'],
    registers,
    collect() {
      this.reset();
      const st = relay.intake.stats;
      this.inc({ result: 'stored' }, st.executed);
      this.inc({ result: 'refused' }, st.refused);
      this.inc({ result: 'malformed' }, st.malformed);
    },
  });
  const delay = new Histogram({
    name: 'ndif_relay_agent_report_delay_seconds',
    help: 'From an agent publishing a report to the relay storing it as events, by command',
    labelNames: ['command'],
    buckets: SECONDS_BUCKETS,
    registers,
  });
  relay.intake.onStored = (command, ms) => delay.observe({ command }, Math.max(0, ms) / 1000);
  consumerLagGauge(registry, () => [
    { topic: topics.agentEvents, group: topics.group, partitions: relay.intake.lag() },
  ]);
}
