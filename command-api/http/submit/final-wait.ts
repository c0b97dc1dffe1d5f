// A submission that waits (`POST /requests?waitMs=N`): its answer is held until the request reaches its final
// status, until something streams from it (a log line, generated tokens, a trace's progress, a result being written:
// those are followed on the status websocket) or until N ms pass. A quick request is then submitted and read in one
// exchange, without a websocket subscription.
import type { RouteDeps } from '../../../http/deps.js';
import type { StoredEvent } from '../../../eventstore/port.js';
import type { ControlPlaneView } from '../../../projections/control-plane/live.js';
import { decode } from '../../../projections/decode.js';
import { finalStatusOf } from '../../../projections/requests/final-status.js';
import { requestStream } from '../../../domain/shared/ids.js';

/** The longest wait a submission may ask for (ms). */
export const SUBMIT_WAIT_MAX_MS = 10_000;
/**
 * The largest result a waited-for COMPLETED carries inline (base64); a larger one is read by the client on the status
 * websocket (a binary frame). With 64 KiB a 96 KiB result (GPT-2-small's layer read at 32 tokens) took the websocket's
 * extra round trip and replay: the overhead bench's 8 clients at once over one after the other 0.92–1.25 in four runs
 * (1.23–1.32 before submissions waited), 1.58 in one run with 256 KiB.
 */
export const SUBMIT_WAIT_INLINE_MAX_BYTES = 256 * 1024;

const FINAL = new Set(['RequestCompleted', 'RequestFailed', 'RequestCancelled']);
/** Events followed on the status websocket instead: output as it comes, and a result that can be read while written. */
const STREAMED = new Set([
  'RequestLogged',
  'RequestLogTruncated',
  'RequestTokensGenerated',
  'RequestTraceProgressed',
  'RequestResultWriting',
]);

/** The final status message of a waited-for request (as the status websocket sends it). */
export type FinalMessage = Record<string, unknown> & { type: 'status'; requestId: string; status: string };

type Waiter = (e: StoredEvent | null) => void;

/** The waiting submissions of one view, told of the events that end their wait as the view applies them. */
class FinalWaits {
  private readonly byRequest = new Map<string, Set<Waiter>>();

  constructor(view: ControlPlaneView) {
    view.onApplied((e) => {
      if (this.byRequest.size === 0 || !(FINAL.has(e.type) || STREAMED.has(e.type))) return;
      const waiters = this.byRequest.get((e.data as { requestId?: string }).requestId ?? '');
      if (waiters === undefined) return;
      for (const w of [...waiters]) w(e);
    });
  }

  /** Until an event of `requestId` ends the wait (that event), `ms` pass or `cancel` (null). */
  wait(requestId: string, ms: number): { ended: Promise<StoredEvent | null>; cancel(): void } {
    let waiter!: Waiter;
    const ended = new Promise<StoredEvent | null>((resolve) => {
      const timer = setTimeout(() => waiter(null), ms);
      waiter = (e) => {
        clearTimeout(timer);
        const set = this.byRequest.get(requestId);
        set?.delete(waiter);
        if (set?.size === 0) this.byRequest.delete(requestId);
        resolve(e);
      };
    });
    let set = this.byRequest.get(requestId);
    if (set === undefined) {
      set = new Set();
      this.byRequest.set(requestId, set);
    }
    set.add(waiter);
    return { ended, cancel: () => waiter(null) };
  }
}

const waitsByView = new WeakMap<ControlPlaneView, FinalWaits>();

function waitsOf(view: ControlPlaneView): FinalWaits {
  let w = waitsByView.get(view);
  if (w === undefined) {
    w = new FinalWaits(view);
    waitsByView.set(view, w);
  }
  return w;
}

/**
 * Waits up to `ms` for the submitted request `recordedId` (shown to its caller as `shownId`) to finish: its final
 * status message, or null when it did not finish, something streamed from it first, or `aborted` fired (the caller
 * went away). `existing`: the request was submitted before, so its history may hold the end already.
 */
export async function waitForFinal(
  deps: RouteDeps,
  recordedId: string,
  shownId: string,
  existing: boolean,
  ms: number,
  aborted: (cancel: () => void) => void,
): Promise<FinalMessage | null> {
  // Registered before anything is looked up, so no event is missed. A new request cannot have finished or streamed
  // yet: that takes its agent's reports, which arrive after this turn of the event loop.
  const w = waitsOf(deps.ctx.view).wait(recordedId, ms);
  aborted(w.cancel);
  if (existing) {
    const events = await deps.ctx.store.readStream(requestStream(recordedId));
    const last = events.findLast((e) => FINAL.has(e.type));
    if (last !== undefined) {
      w.cancel();
      return finalMessage(deps, last, shownId, true);
    }
    if (events.some((e) => STREAMED.has(e.type))) w.cancel();
  }
  const e = await w.ended;
  return e === null || !FINAL.has(e.type) ? null : finalMessage(deps, e, shownId, false);
}

async function finalMessage(deps: RouteDeps, e: StoredEvent, shownId: string, replay: boolean): Promise<FinalMessage> {
  const d = decode(e);
  const f = d === undefined ? undefined : finalStatusOf(d);
  if (f === undefined) throw new Error(`event ${e.type} at ${e.position} does not end a request`);
  // A final status's cursor is its event's position (docs/http-api.md, "Ordering and cursors").
  const msg: FinalMessage = {
    type: 'status',
    requestId: shownId,
    status: f.status,
    cursor: String(e.position),
    at: e.metadata.at,
    replay,
    ...f.fields,
  };
  const r = f.result;
  if (r === undefined || r.bytes > Math.min(SUBMIT_WAIT_INLINE_MAX_BYTES, deps.config.inlineResultMaxBytes)) return msg;
  try {
    // The client checks the bytes against the message's sha256.
    const blob = await deps.ctx.blobs.get(r.ref, { sha256: false });
    msg.inline = blob.bytes.toString('base64');
  } catch (err) {
    // Not inline: the client reads it from GET /requests/:id/result, which answers the blob store's error.
    deps.ctx.log.warn({ err, requestId: e.streamId, ref: r.ref }, 'a waited-for result could not be read for inlining');
  }
  return msg;
}
