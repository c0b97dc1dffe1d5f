// A session's result split back into its traces: the result lists every invoke's value in order, and `meta.traces`
// says how many invokes each trace had; a trace of one prompt gives its value, a list of invokes the list.
import { isInvokeList } from './request-body.js';
import type { SessionTrace } from './request-body.js';

export function sessionValues(traces: SessionTrace[], values: unknown[], meta: Record<string, unknown>): unknown[] {
  const counts = ((meta.traces ?? []) as Array<{ invokes: number }>).map((t) => t.invokes);
  let at = 0;
  return traces.map((t, i) => {
    const own = values.slice(at, at + (counts[i] ?? 0));
    at += counts[i] ?? 0;
    return isInvokeList(t.input) ? own : own[0];
  });
}
