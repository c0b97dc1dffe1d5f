import { InProcessBroker, InProcessTransport } from '../../transport/index.js';
import { transportContract } from './contract.js';

transportContract('in-process', async () => {
  const broker = new InProcessBroker({ partitions: 4 });
  return { partitions: 4, open: async () => new InProcessTransport({ broker }) };
});
