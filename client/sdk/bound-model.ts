// `ndif.model<typeof M>(key)` at run time: the entry points of a Fabric or LocalFabric with the model key bound
// (the types are BoundModel's, client/sdk/typed-calls.ts). The calls are the ordinary ones: errors name the caller's
// line as they do (these frames are the SDK's, skipped when the call site is found).
import type { BoundModel } from './typed-calls.js';

/** What binding needs of a client: its entry points, untyped. */
interface EntryPoints {
  trace(model: string, input: unknown, block?: unknown, opts?: unknown): Promise<unknown>;
  execute(model: string, input: unknown, block?: unknown, opts?: unknown): Promise<unknown>;
  session(model: string, traces: unknown, opts?: unknown): Promise<unknown>;
  executeSession(model: string, traces: unknown, opts?: unknown): Promise<unknown>;
  stream(model: string, input: unknown, block?: unknown, opts?: unknown): unknown;
}

export function bindModel<M>(client: unknown, key: string): BoundModel<M> {
  const c = client as EntryPoints;
  return {
    key,
    trace: (input, block, opts) => c.trace(key, input, block, opts),
    execute: (input, block, opts) => c.execute(key, input, block, opts),
    session: (traces, opts) => c.session(key, traces, opts),
    executeSession: (traces, opts) => c.executeSession(key, traces, opts),
    stream: (input, block, opts) => c.stream(key, input, block, opts),
  } as BoundModel<M>;
}
