// A TRACE status as the SDK passes it on: the progress line (`trace k of n`, a loop's step and reported value), the
// `onTrace` callback and, for each value a loop reported that was not seen before, `onReport`. Shared by the remote
// and the local fabric.
import type { StatusMessage } from './wire.js';
import type { Progress } from './progress.js';
import type { ReportedProgress, TraceProgress } from './fabric.js';

export interface TraceCallbacks {
  onTrace?: (t: TraceProgress) => void;
  onReport?: (r: ReportedProgress) => void;
}

/** The iteration of the last value passed to onReport, per trace: a status carrying the same report is not repeated. */
export type ReportsSeen = Map<number, number>;

export function traceProgress(
  requestId: string,
  m: Pick<StatusMessage, 'trace' | 'traces' | 'traceStatus' | 'ms' | 'iterations' | 'done' | 'reported'>,
  cb: TraceCallbacks,
  progress: Progress | null | undefined,
  seen: ReportsSeen,
): void {
  const trace = m.trace!;
  const traces = m.traces!;
  const loop =
    typeof m.iterations === 'number'
      ? {
          done: m.done ?? 0,
          iterations: m.iterations,
          ...(m.reported === undefined ? {} : { reported: m.reported.value }),
        }
      : undefined;
  if (m.traceStatus === 'RUNNING' || loop !== undefined) progress?.trace(trace, traces, loop);
  cb.onTrace?.({
    requestId,
    trace,
    traces,
    status: m.traceStatus!,
    ms: typeof m.ms === 'number' ? m.ms : null,
    ...(loop === undefined ? {} : { iterations: loop.iterations, done: loop.done }),
    ...(m.reported === undefined ? {} : { reported: m.reported }),
  });
  if (m.reported !== undefined && seen.get(trace) !== m.reported.iteration) {
    seen.set(trace, m.reported.iteration);
    cb.onReport?.({ requestId, trace, iteration: m.reported.iteration, value: m.reported.value });
  }
}
