// `.grad` on a read: `await m.transformer.h[3].output.grad` reads the gradient at that point, and
// `m.transformer.h[3].output.grad = g` swaps it. The read the expression made first (`m.…output`) only leads to its
// gradient, so it is cancelled (untracked, its WAIT withdrawn) as soon as `.grad` is reached.
import type { Point } from '../../../protocol/interleave.js';
import type { InvokeSession } from '../host/invoke-session.js';
import type { PendingRead } from './pending-read.js';
import type { Tensor } from './tensor.js';
import type { GradSession } from '../host/grad-session.js';

export function withGrad<T>(
  read: PendingRead<T>,
  at: { session: InvokeSession; grads: GradSession; path: string; point: Point; step: number },
  map: (v: Tensor[]) => T,
  assign: (value: unknown) => Tensor[],
): PendingRead<T> {
  const { session, grads, path, point, step } = at;
  Object.defineProperty(read, 'grad', {
    configurable: true,
    get() {
      session.cancelRead(read as PendingRead<unknown>);
      return grads.read(path, point, step, map);
    },
    set(value: unknown) {
      session.cancelRead(read as PendingRead<unknown>);
      grads.swap(path, point, step, assign(value));
    },
  });
  return read;
}
