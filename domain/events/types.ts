// TypeScript shapes of the events, inferred from their schemas: `{ type, data }`.
import type { z } from 'zod';
import type { agentEventSchemas } from './agent.js';
import type { deploymentEventSchemas } from './deployment.js';
import type { modelEventSchemas } from './model.js';
import type { requestEventSchemas } from './request.js';

type EventsOf<S extends Record<string, z.ZodType>> = {
  [K in keyof S & string]: { type: K; data: z.infer<S[K]> };
}[keyof S & string];

export type RequestEvent = EventsOf<typeof requestEventSchemas>;
export type DeploymentEvent = EventsOf<typeof deploymentEventSchemas>;
export type AgentEvent = EventsOf<typeof agentEventSchemas>;
export type ModelEvent = EventsOf<typeof modelEventSchemas>;
export type DomainEvent = RequestEvent | DeploymentEvent | AgentEvent | ModelEvent;
export type DomainEventType = DomainEvent['type'];

/** The data of the event named `T`. */
export type EventData<T extends DomainEventType> = Extract<DomainEvent, { type: T }>['data'];
