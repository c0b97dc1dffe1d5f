// The transport port and its adapters; see docs/transport.md.
export type {
  BatchHandler,
  Headers,
  MessageHandler,
  OutgoingMessage,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportMessage,
} from './port.js';
export { TransportErrorCode } from './errors.js';
export { encodeJson, jsonMessage, readJson } from './json.js';
export { partitionFor } from './partitioner.js';
export { withDuplicateDelivery } from './faults.js';
export { InProcessBroker, type InProcessBrokerOptions } from './inprocess/broker.js';
export { InProcessTransport, type InProcessTransportOptions } from './inprocess/transport.js';
export { KafkaTransport } from './kafka/transport.js';
export type { KafkaConsumerTuning, KafkaLog, KafkaLogLevel, KafkaTransportOptions } from './kafka/options.js';
export { IpcTransport, IpcTransportServer, type IpcTransportOptions, type IpcServerOptions } from './ipc/index.js';
export { openTransport, transportConfigFromEnv, type TransportConfig } from './config.js';
export { DEFAULT_MAX_MESSAGE_BYTES } from './validate.js';
