// The relay between the control plane and the GPU agents, and the wire format both sides speak.
export { Relay, type RelayOptions } from './relay.js';
export {
  AssignmentRelay,
  RELAY_CHECKPOINT,
  type AssignmentRelayOptions,
  type AssignmentRelayStatus,
} from './assignment-relay.js';
export {
  AgentEventIntake,
  type AgentEventIntakeOptions,
  type CommandExecutor,
  type IntakeStats,
} from './agent-events.js';
export { route, initialRelayState, type RelayState, type Draft } from './routing.js';
export * from './wire.js';
