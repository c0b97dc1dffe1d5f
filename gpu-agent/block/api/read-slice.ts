// `.slice(…)` on a read of a module's output, before it is awaited: `await m.output.slice(0, -1)` is
// `(await m.output).slice(0, -1)`, but the host sends only that position of the sequence (dim 1) — and, when every
// invoke asks the model's output for the same one position, computes the model's last module (the LM head) for it
// alone (gpu-agent/runtime/interleave/head-positions.ts). The read the expression made first is cancelled (untracked,
// its WAIT withdrawn) in favour of the position's.
import type { InvokeSession } from '../host/invoke-session.js';
import { InterleaveError } from './block-errors.js';
import type { PendingRead } from './pending-read.js';
import type { Tensor } from './tensor.js';

export function withSlice<T>(
  read: PendingRead<T>,
  at: { session: InvokeSession; path: string; step: number; label: string },
): PendingRead<T> {
  const { session, path, step, label } = at;
  Object.defineProperty(read, 'slice', {
    configurable: true,
    value: (...specs: unknown[]) => {
      const position = specs[1];
      if (typeof position !== 'number' || !Number.isInteger(position))
        throw new InterleaveError(
          'ShapeMismatch',
          `${label}.output.slice(…) before await takes an integer position for dim 1 (the sequence) as its second index; await ${label}.output and slice the tensor for anything else`,
        );
      session.cancelRead(read as PendingRead<unknown>);
      return session.readAt(path, 'output', step, position, (v: Tensor[]) => {
        if (v.length !== 1)
          throw new InterleaveError(
            'ShapeMismatch',
            `${label}.output.slice(…) before await needs a module with one output; ${label} has ${v.length}`,
          );
        return v[0]!.slice(...([specs[0], 0, ...specs.slice(2)] as Parameters<Tensor['slice']>));
      });
    },
  });
  return read;
}
