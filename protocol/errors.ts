// Every error the fabric reports has a stable code, an HTTP status and a message that says what was
// wrong and how to fix it. Codes are listed in docs/errors.md.

export interface ErrorBody {
  code: string;
  message: string;
  /** What to do about it, when the message alone does not say. */
  hint?: string;
  /** Structured facts behind the error (numbers a refusal used, nearest valid names…). */
  details?: Record<string, unknown>;
}

export class FabricError extends Error {
  readonly code: string;
  readonly httpStatus: number;
  readonly hint: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(
    code: string,
    httpStatus: number,
    message: string,
    opts: { hint?: string; details?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'FabricError';
    this.code = code;
    this.httpStatus = httpStatus;
    this.hint = opts.hint;
    this.details = opts.details;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message };
    if (this.hint !== undefined) body.hint = this.hint;
    if (this.details !== undefined) body.details = this.details;
    return body;
  }
}

export function isFabricError(e: unknown): e is FabricError {
  return e instanceof FabricError;
}
