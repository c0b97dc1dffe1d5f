// Errors a block sees. Each carries the protocol's error type, so a block that does not catch it fails the
// request with that type (OutOfOrder, UnknownModule, ShapeMismatch, …) rather than a generic BlockError.
import type { BlockError } from '../../../protocol/interleave.js';

export class InterleaveError extends Error {
  readonly type: string;

  constructor(type: string, message: string) {
    super(message);
    this.type = type;
    this.name = type;
  }

  static from(e: BlockError): InterleaveError {
    return new InterleaveError(e.type, e.message);
  }
}
