import { KafkaTransport } from '../../transport/index.js';
import { requireService } from '../services/require.js';
import { transportContract } from './contract.js';

const brokers = requireService('KAFKA_BROKERS', 'NDIF_ALLOW_SKIP_KAFKA');
if (brokers) {
  transportContract('Kafka', async () => ({
    partitions: 4,
    open: () => KafkaTransport.connect({ brokers: brokers.split(','), clientId: 'ndif-contract-test', partitions: 4 }),
  }));
}
