// How a failed run is reported: the phase, type, message and stack of ReportRequestFailed, from what was thrown.
// A block's own error keeps its type (BlockError, OutOfOrder, Timeout…) and the block's stack; the runtime's
// refusals (bad prompt, too long) are validation failures with their code.
import { isFabricError } from '../../protocol/errors.js';
import { InterventionError, RequestError } from '../runtime/index.js';

export interface FailureReport {
  phase: 'validation' | 'load' | 'execution' | 'result';
  errorType: string;
  message: string;
  stack: string | null;
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

export function failureReport(e: unknown, phase?: FailureReport['phase']): FailureReport {
  let r: FailureReport;
  if (e instanceof InterventionError) {
    const b = e.blockError;
    r = {
      phase: phase ?? (b.phase === 'deserialize' ? 'validation' : 'execution'),
      errorType: String(b.type),
      message: b.message,
      stack: b.stack ?? null,
    };
  } else if (e instanceof RequestError) {
    r = { phase: phase ?? 'validation', errorType: e.code, message: e.message, stack: null };
  } else if (isFabricError(e)) {
    r = {
      phase: phase ?? 'execution',
      errorType: e.code,
      message: e.hint ? `${e.message} (${e.hint})` : e.message,
      stack: null,
    };
  } else {
    const err = e instanceof Error ? e : new Error(String(e));
    r = { phase: phase ?? 'execution', errorType: err.name || 'Error', message: err.message, stack: null };
  }
  return {
    phase: r.phase,
    errorType: clip(r.errorType || 'Error', 200),
    message: clip(r.message, 20000),
    stack: r.stack === null ? null : clip(r.stack, 65536),
  };
}
