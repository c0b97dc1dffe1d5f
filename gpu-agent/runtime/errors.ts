// Errors of the model runtime. A request that fails in a block, or because the block asked for something the
// forward pass cannot give, fails with an InterventionError carrying the BlockError the agent reports; codes
// are listed in docs/errors.md ("Runtime and blocks").
import { FabricError } from '../../protocol/errors.js';
import type { BlockError } from '../../protocol/interleave.js';

/** The code and HTTP status of each BlockError type; a type not listed (a runner's own, say) reports BLOCK_ERROR. */
export const BLOCK_CODES = {
  OutOfOrder: { code: 'BLOCK_OUT_OF_ORDER', status: 400 },
  NotProvided: { code: 'BLOCK_NOT_PROVIDED', status: 400 },
  UnknownModule: { code: 'BLOCK_UNKNOWN_MODULE', status: 400 },
  OperationFused: { code: 'BLOCK_OPERATION_FUSED', status: 400 },
  NotObservable: { code: 'BLOCK_NOT_OBSERVABLE', status: 400 },
  NotSkippable: { code: 'BLOCK_NOT_SKIPPABLE', status: 400 },
  ShapeMismatch: { code: 'BLOCK_SHAPE_MISMATCH', status: 400 },
  DtypeMismatch: { code: 'BLOCK_DTYPE_MISMATCH', status: 400 },
  NonFinite: { code: 'BLOCK_NON_FINITE', status: 400 },
  SharedTensor: { code: 'BLOCK_SHARED_TENSOR', status: 400 },
  BlockSyntaxError: { code: 'BLOCK_SYNTAX_ERROR', status: 400 },
  BlockError: { code: 'BLOCK_ERROR', status: 400 },
  // Contained faults of a block (gpu-agent/block/containment/invoke-guard.ts, fault-errors.ts).
  UnawaitedRead: { code: 'BLOCK_UNAWAITED_READ', status: 400 },
  UnhandledRejection: { code: 'BLOCK_UNHANDLED_REJECTION', status: 400 },
  UncaughtException: { code: 'BLOCK_UNCAUGHT_EXCEPTION', status: 400 },
  InvalidResult: { code: 'BLOCK_INVALID_RESULT', status: 400 },
  // Gradients (gpu-agent/runtime/grad/; the block side: gpu-agent/block/api/tape.ts, gpu-agent/block/host/grad-session.ts).
  NotDifferentiable: { code: 'BLOCK_NOT_DIFFERENTIABLE', status: 400 },
  NoBackward: { code: 'BLOCK_NO_BACKWARD', status: 400 },
  BackwardError: { code: 'BLOCK_BACKWARD_ERROR', status: 400 },
  // Training (gpu-agent/block/api/tensor.ts trainable tensors, optim.ts).
  GradNotRequired: { code: 'BLOCK_GRAD_NOT_REQUIRED', status: 400 },
  GradPending: { code: 'BLOCK_GRAD_PENDING', status: 400 },
  OptimizerError: { code: 'BLOCK_OPTIMIZER_ERROR', status: 400 },
  TapeLimit: { code: 'BLOCK_TAPE_LIMIT', status: 400 },
  // Module calls, barriers and caches (gpu-agent/runtime/interleave/module-call.ts, barriers.ts, caches.ts).
  NotCallable: { code: 'BLOCK_NOT_CALLABLE', status: 400 },
  CallFailed: { code: 'BLOCK_CALL_FAILED', status: 400 },
  BarrierError: { code: 'BLOCK_BARRIER_ERROR', status: 400 },
  CacheError: { code: 'BLOCK_CACHE_ERROR', status: 400 },
  Timeout: { code: 'REQUEST_TIMEOUT', status: 408 },
  Cancelled: { code: 'REQUEST_CANCELLED', status: 499 },
  ProtocolError: { code: 'BLOCK_PROTOCOL_ERROR', status: 500 },
  // Set by the sandbox for a runner that died under the request (sandbox/session.ts crashError).
  OutOfMemory: { code: 'BLOCK_OUT_OF_MEMORY', status: 400 },
  CpuLimit: { code: 'BLOCK_CPU_LIMIT', status: 400 },
  SandboxCrashed: { code: 'BLOCK_SANDBOX_CRASHED', status: 500 },
} as const satisfies Record<string, { code: string; status: number }>;

/** A BlockError type the runtime reports: one of BLOCK_CODES. */
export type BlockErrorType = keyof typeof BLOCK_CODES;

/** Codes of a request refused before anything ran (RequestError); generation options use GenerationErrorCode. */
export const RequestErrorCode = {
  noInvokes: 'REQUEST_NO_INVOKES',
  badNewTokens: 'REQUEST_BAD_NEW_TOKENS',
  notGenerative: 'MODEL_NOT_GENERATIVE',
  noTokenizer: 'MODEL_NO_TOKENIZER',
  tokenizerInvalid: 'MODEL_TOKENIZER_INVALID',
  badInput: 'INVOKE_BAD_INPUT',
  tokenOutOfRange: 'INVOKE_TOKEN_OUT_OF_RANGE',
  emptyPrompt: 'INVOKE_EMPTY_PROMPT',
  promptTooLong: 'PROMPT_TOO_LONG',
  paddingUnsupported: 'BATCH_PADDING_UNSUPPORTED',
  noTraces: 'SESSION_NO_TRACES',
  badRepeat: 'SESSION_BAD_REPEAT',
  modelClosed: 'MODEL_CLOSED',
} as const;

/** The error code a BlockError of this type is reported under. */
export function blockErrorCode(type: string): { code: string; status: number } {
  return Object.hasOwn(BLOCK_CODES, type) ? BLOCK_CODES[type as BlockErrorType] : { code: 'BLOCK_ERROR', status: 400 };
}

/** The request failed because of what a block did (or did not do). */
export class InterventionError extends FabricError {
  readonly blockError: BlockError;
  readonly invoke: number | undefined;
  /** The trace of a session it failed in (absent for a request of one trace). */
  readonly trace: number | undefined;

  /** The iteration of a repeated trace it failed in. */
  readonly iteration: number | undefined;

  constructor(blockError: BlockError, invoke?: number, trace?: number, iteration?: number) {
    const c = blockErrorCode(blockError.type);
    const where = invoke === undefined ? '' : ` (invoke ${invoke})`;
    super(c.code, c.status, `${blockError.type}${where}: ${blockError.message}`, {
      details: {
        phase: blockError.phase,
        type: blockError.type,
        ...(trace === undefined ? {} : { trace }),
        ...(iteration === undefined ? {} : { iteration }),
        ...(invoke === undefined ? {} : { invoke }),
        ...(blockError.stack ? { stack: blockError.stack } : {}),
      },
    });
    this.name = 'InterventionError';
    this.blockError = blockError;
    this.invoke = invoke;
    this.trace = trace;
    this.iteration = iteration;
  }

  /**
   * The same failure, said to be in trace `t` of a session — and iteration `it` of its `of` when the trace repeats —
   * (its message starts with it, so the report names it).
   */
  inTrace(t: number, iteration?: { it: number; of: number }): InterventionError {
    const where = iteration === undefined ? `trace ${t}` : `trace ${t} iteration ${iteration.it} of ${iteration.of}`;
    const e = new InterventionError(
      { ...this.blockError, message: `${where}: ${this.blockError.message}` },
      this.invoke,
      t,
      iteration?.it,
    );
    e.stack = this.stack;
    return e;
  }
}

export function blockError(type: BlockErrorType, message: string, phase: BlockError['phase'] = 'execute'): BlockError {
  return { phase, type, message };
}

/** A request the runtime refuses before running anything (bad prompt, too long, no invokes). */
export class RequestError extends FabricError {
  constructor(code: string, message: string, details?: Record<string, unknown>, httpStatus = 400) {
    super(code, httpStatus, message, details ? { details } : {});
    this.name = 'RequestError';
  }
}

/** The model directory cannot be served. */
export class ModelLoadError extends FabricError {
  constructor(code: string, message: string, opts: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super(code, 422, message, opts);
    this.name = 'ModelLoadError';
  }
}
