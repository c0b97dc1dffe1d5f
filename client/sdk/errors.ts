// The errors the SDK raises. Each says what failed and what to do, in words a researcher can act on; the
// fabric's own code, hint and details travel along untouched.
import type { ErrorBody } from '../../protocol/errors.js';
import { placeMessage, placeRemoteStack, type BlockOrigins, type Place } from './user-frames.js';

/** Base class: every SDK error is a FabricClientError, so `catch (e) { if (e instanceof FabricClientError) … }` works. */
export class FabricClientError extends Error {
  constructor(message: string, opts?: { cause?: unknown }) {
    super(message, opts);
    this.name = new.target.name;
  }
}

/** The fabric answered an HTTP call with an error body (`{ code, message, hint?, details? }`). */
export class FabricHttpError extends FabricClientError {
  readonly status: number;
  readonly code: string;
  readonly hint: string | undefined;
  readonly details: Record<string, unknown> | undefined;
  /** The message as the fabric sent it (without code and hint). */
  readonly remoteMessage: string;
  /** Method and path of the call, e.g. `POST /requests`. */
  readonly call: string;

  constructor(status: number, body: ErrorBody, call: string) {
    super(`${body.code}: ${body.message}${body.hint ? ` (${body.hint})` : ''}`);
    this.status = status;
    this.remoteMessage = body.message;
    this.code = body.code;
    this.hint = body.hint;
    this.details = body.details;
    this.call = call;
  }
}

/** The request failed on the fabric: the block threw, did not compile, timed out, could not be placed… */
export class RemoteError extends FabricClientError {
  readonly requestId: string;
  /** Where it failed: `execution` (the block ran), `validation`, `load`, `result` (on the agent); `queue`, `placement`, `deployment`, `scheduling` (control plane). */
  readonly phase: string;
  /** `BlockError`, `BlockSyntaxError`, `OutOfOrder`, `Timeout`, `DeploymentRefused`, … */
  readonly type: string;
  /** The error's message as the fabric reported it. */
  readonly remoteMessage: string;
  /** The block's own frames (`block-<invoke>.js:line:col`), when the block threw. */
  readonly remoteStack: string | null;
  /** Where in the caller's files the block failed (its first frame there), when the block was a function here. */
  readonly userPlace: Place | null;
  /** The caller's frame that started the request (`at main (/home/me/study.ts:12:3)`). */
  readonly callSite: string | null;

  constructor(
    requestId: string,
    error: { phase: string; type: string; message: string; stack?: string | null },
    origin?: { callSite: string | null; blocks: BlockOrigins },
  ) {
    const stack = error.stack ?? null;
    const invoke = Number(/block-(\d+)\.js/.exec(stack ?? '')?.[1] ?? 0);
    const placed = origin && stack ? placeRemoteStack(stack, error.message, origin.blocks) : null;
    const message = origin ? placeMessage(error.message, origin.blocks, invoke) : error.message;
    const where = placed?.first ? ` (${placed.first.file}:${placed.first.line}:${placed.first.column})` : '';
    super(`request ${requestId} failed (${error.phase}, ${error.type}): ${message}${where}`);
    this.requestId = requestId;
    this.phase = error.phase;
    this.type = error.type;
    this.remoteMessage = error.message;
    this.remoteStack = stack;
    this.userPlace = placed?.first ?? null;
    this.callSite = origin?.callSite ?? null;
    // The user's code first: the block's frames on the fabric (placed in the caller's files where they can be), then
    // the call that sent the request; the SDK's own frames are left out.
    const parts = [`${this.name}: ${this.message}`];
    if (stack) parts.push('--- on the fabric ---', placed?.stack ?? stack);
    if (this.callSite) parts.push('--- called from ---', this.callSite);
    else parts.push('--- here ---', (this.stack ?? '').split('\n').slice(1).join('\n'));
    if (stack || this.callSite) this.stack = parts.join('\n');
  }
}

/** The fabric speaks another protocol version than this SDK. */
export class ProtocolMismatchError extends FabricClientError {
  constructor(
    readonly url: string,
    readonly clientVersion: string,
    readonly serverVersion: string | null,
    detail?: string,
  ) {
    super(
      `the fabric at ${url} speaks protocol ${serverVersion ?? '(unknown)'}, this client speaks protocol ${clientVersion}; ` +
        `they are compatible only with the same major version${detail ? ` (${detail})` : ''}. Use a client built for protocol ` +
        `${serverVersion ? `${serverVersion.split('.')[0]}.x` : "the fabric's version"}, or run a fabric that speaks ${clientVersion.split('.')[0]}.x`,
    );
  }
}

/** Nothing answered at the fabric's URL (refused, DNS, timeout, TLS…). */
export class UnreachableError extends FabricClientError {
  constructor(
    readonly url: string,
    readonly what: string,
    cause: unknown,
  ) {
    const reason = describeNetworkCause(cause);
    super(
      `cannot reach the fabric at ${url} (${what}: ${reason}). Is it running? Start one on this machine with \`npm start\` ` +
        `(serves http://127.0.0.1:8080), or point the client elsewhere with NDIF_URL / --url`,
      { cause },
    );
  }
}

/** The request was cancelled: by this client's AbortSignal, by its user elsewhere, or killed by an operator. */
export class CancelledError extends FabricClientError {
  constructor(
    readonly requestId: string,
    readonly by: string,
  ) {
    super(`request ${requestId} was cancelled (by ${by})`);
  }
}

/** The client gave up waiting (the `waitMs` of `result()` or of a trace ran out); the request may still run. */
export class ClientTimeoutError extends FabricClientError {
  constructor(
    readonly requestId: string,
    readonly waitedMs: number,
  ) {
    super(
      `gave up waiting for request ${requestId} after ${waitedMs} ms; it may still finish: check it with handle.status()`,
    );
  }
}

/** The fabric sent something this SDK cannot read (a broken result container, an unknown message). */
export class ProtocolError extends FabricClientError {}

/** Node's fetch wraps the socket error in `cause`; dig out its code (ECONNREFUSED, ENOTFOUND, …). */
export function describeNetworkCause(e: unknown): string {
  let cur: unknown = e;
  for (let depth = 0; cur && depth < 4; depth++) {
    const o = cur as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
    if (typeof o.code === 'string' && /^E[A-Z_]+$/.test(o.code))
      return o.code === 'ECONNREFUSED' ? 'connection refused' : o.code;
    if (Array.isArray(o.errors) && o.errors.length > 0) cur = o.errors[0];
    else cur = o.cause;
  }
  if (e instanceof Error && e.name === 'TimeoutError') return 'timed out';
  return e instanceof Error ? e.message : String(e);
}
