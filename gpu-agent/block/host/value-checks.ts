// The checks a block's swap or skip values pass on the block side, so a mistake throws at the user's own line: the
// number of tensors, each a Tensor of the expected dtype and shape (-1: any), float values finite.
import { firstNonFinite, isFloatDtype, sameShape } from '../../../protocol/tensor-payload.js';
import { InterleaveError } from '../api/block-errors.js';
import { Tensor } from '../api/tensor.js';

export function checkValues(what: string, given: Tensor[], want: Array<{ dtype: string; shape: number[] }>): void {
  if (given.length !== want.length) {
    throw new InterleaveError(
      'ShapeMismatch',
      `${what} takes ${want.length} tensor${want.length === 1 ? '' : 's'}, got ${given.length}`,
    );
  }
  given.forEach((t, i) => {
    if (!(t instanceof Tensor))
      throw new InterleaveError(
        'ShapeMismatch',
        `${what}: value ${i} is not a Tensor (build one with ctx.Tensor.from or a tensor method)`,
      );
    const w = want[i]!;
    if (t.dtype !== w.dtype)
      throw new InterleaveError(
        'DtypeMismatch',
        `${what}: expected ${w.dtype}, got ${t.dtype} (convert with .to('${w.dtype}'))`,
      );
    if (!w.shape.includes(-1) && !sameShape(t.shape, w.shape)) {
      throw new InterleaveError(
        'ShapeMismatch',
        `${what}: expected shape [${w.shape.join(', ')}], got [${t.shape.join(', ')}]`,
      );
    }
    if (isFloatDtype(t.dtype)) {
      const bad = firstNonFinite(t.toPayload());
      if (bad >= 0)
        throw new InterleaveError(
          'NonFinite',
          `${what}: element ${bad} is ${t.flat(bad)}; swapped values must be finite`,
        );
    }
  });
}
