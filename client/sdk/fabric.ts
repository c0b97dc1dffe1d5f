// The researcher's client: `new Fabric({ url, apiKey })`, then `trace(model, input, block)` runs a block on a
// hosted model and returns what it returned, with tensors as Tensor. See docs/sdk.md.
import { randomUUID } from 'node:crypto';
import type { Manifest } from '../../protocol/manifest.js';
import type { BlockFn } from './block-source.js';

import type { TypedModel } from './model-types.js';
import { resolveClientConfig } from './config.js';
import { CancelledError, ClientTimeoutError, FabricHttpError, RemoteError, UnreachableError } from './errors.js';
import { versionChecker } from './version-check.js';
import { downloadEarly, type EarlyResult, earlyFor, fetchResult } from './fetch-result.js';
import { FabricHttp } from './http.js';
import { defaultLog, progressFor } from './progress.js';
import type { Progress, ProgressOutput } from './progress.js';
import { RequestHandle } from './request-handle.js';
import { buildSessionBody, buildSubmitBody, isInvokeList } from './request-body.js';
import type { Invoke, RequestOptions, SessionTrace, SubmitBody } from './request-body.js';
import { type ReportsSeen, traceProgress } from './trace-progress.js';
import { StatusSocket, SubscriptionEndedError, type SubscribeOptions } from './status-socket.js';
import { BlockOrigins, callerFrame } from './user-frames.js';
import { sessionValues } from './session-values.js';
import type {
  InvokeValues,
  ModelOf,
  ResultOnly,
  SessionValues,
  TraceValue,
  TypedBlock,
  TypedInvoke,
  TypedSessionTrace,
  BoundModel,
} from './typed-calls.js';
import { bindModel } from './bound-model.js';
import { invokeLengths, scanManifest, type ScanResult } from './scan.js';
import { fetchTokenizer, type ModelTokenizer } from './tokenizer.js';
import { defaultCacheDir, TokenizerCache } from './tokenizer-cache.js';
import { updateFromMessage } from './status.js';
import type { LogLine, StatusUpdate } from './status.js';
import type {
  EditRegisteredReply,
  EditReply,
  StatusMessage,
  StreamedToken,
  SubmitReply,
  VersionReply,
} from './wire.js';
import { blockSource } from './block-source.js';
import { GenerationStream } from './token-stream.js';
import { TensorUploads } from './tensor-uploads.js';

export interface FabricOptions {
  /** The fabric's API (default: $NDIF_URL, else http://127.0.0.1:8080). */
  url?: string;
  /** API key (default: $NDIF_API_KEY; none is needed when the fabric runs with auth off). */
  apiKey?: string;
  /** Progress of each trace on stderr: one live line on a TTY shared by the traces in flight, plain lines elsewhere; `false` for none (default true). */
  progress?: boolean | ProgressOutput;
  /** Where the blocks' console lines go (default: printed, tagged with their request, stdout lines to stdout, stderr lines to stderr); null drops them. */
  onLog?: ((l: LogLine) => void) | null;
  /** Limit of one HTTP exchange, ms (default 30 000). */
  httpTimeoutMs?: number;
  /** Protocol version to announce (default: this SDK's; tests use it to act as another client). */
  protocolVersion?: string;
  /** Read /version before the first call and refuse an incompatible fabric (default true). */
  checkVersion?: boolean;
  /** Reconnects of the status websocket after a drop (default 6); past them a trace polls GET /requests/:id. */
  reconnectAttempts?: number;
  /** Where model tokenizers are cached (default: $NDIF_CACHE_DIR, else ~/.cache/ndif); `false` keeps them in memory only. */
  cacheDir?: string | false;
  /**
   * Download a large result while the agent still writes it (RESULT_WRITING), where the fabric offers it (capability
   * `ws-result-stream`); `false` waits for COMPLETED (default true).
   */
  resultStream?: boolean;
  /**
   * How long a trace's submission waits for its final status (ms, 0–10000, default 1000, at most half of
   * `httpTimeoutMs`) when nothing reads its progress as it comes; a request not finished by then is followed on the
   * status websocket. 0 follows every request there from the start.
   */
  submitWaitMs?: number;
}

export interface TraceOptions extends RequestOptions {
  /** Cancels the request on the fabric; the trace then rejects with CancelledError. */
  signal?: AbortSignal;
  /** Overrides the client's `progress` for this trace. */
  progress?: boolean | ProgressOutput;
  /** Overrides the client's `onLog` for this trace. */
  onLog?: ((l: LogLine) => void) | null;
  /** Every status (LOG excluded), as it arrives. */
  onStatus?: (u: StatusUpdate) => void;
  /** Every status websocket message of the request, LOG included, as the fabric sent it. */
  onMessage?: (m: StatusMessage) => void;
  /** The tokens of each STREAM message, as they are generated (see also `stream`). */
  onTokens?: (tokens: StreamedToken[]) => void;
  /** Each trace of a session as it starts, completes or fails (its TRACE statuses); a loop also as it goes. */
  onTrace?: (t: TraceProgress) => void;
  /** Each new value a loop's blocks reported (`ctx.report`), as its progress brings it: at most about one a second. */
  onReport?: (r: ReportedProgress) => void;
  /** Stop waiting after this long (ms) with ClientTimeoutError; the request goes on (default: no limit). */
  waitMs?: number;
}

/** A TRACE status: trace `trace` (0-based) of a session of `traces` started, completed or failed. */
export interface TraceProgress {
  requestId: string;
  trace: number;
  traces: number;
  status: 'RUNNING' | 'COMPLETED' | 'ERROR';
  /** How long it ran (COMPLETED, ERROR; a loop's RUNNING: so far). */
  ms: number | null;
  /** A loop (a trace with `repeat`): its iterations and how many are done. */
  iterations?: number;
  done?: number;
  /** The latest value its blocks reported (`ctx.report`) and the iteration that reported it. */
  reported?: { iteration: number; value: number | Record<string, number> };
}

/** A value a loop's blocks reported (`ctx.report`): trace `trace`, iteration `iteration` (0-based). */
export interface ReportedProgress {
  requestId: string;
  trace: number;
  iteration: number;
  value: number | Record<string, number>;
}

/** A finished session: per trace, what `trace` would have returned for it. */
export interface SessionResult<V extends readonly unknown[] = unknown[]> {
  requestId: string;
  /** Per trace: its value for one prompt, the list of values for a list of invokes. */
  traces: V;
  meta: Record<string, unknown>;
}

/** Everything about one finished request. */
export interface TraceResult<V extends readonly unknown[] = unknown[]> {
  requestId: string;
  /** One value per invoke: what its block returned (tensors as Tensor). */
  values: V;
  /** The result container's metadata. */
  meta: Record<string, unknown>;
}

export class Fabric {
  readonly url: string;
  readonly http: FabricHttp;
  private readonly socket: StatusSocket;
  private readonly opts: FabricOptions;
  private readonly checkVersion: () => Promise<VersionReply>;
  private readonly tokenizers = new Map<string, Promise<ModelTokenizer>>();
  private readonly tokenizerCache: TokenizerCache | null;
  private readonly scanManifests = new Map<string, Promise<Manifest>>();
  /** Uploaded tensors: `upload(name, tensor)`, `list()`, `remove(name)`; a request names them with `tensors: [...]`. */
  readonly tensors: TensorUploads;

  constructor(opts: FabricOptions = {}) {
    const cfg = resolveClientConfig({ url: opts.url ?? null, apiKey: opts.apiKey ?? null });
    const wait = opts.submitWaitMs;
    if (wait !== undefined && !(Number.isInteger(wait) && wait >= 0 && wait <= 10_000))
      throw new TypeError(`submitWaitMs ${wait} is not a number of milliseconds from 0 to 10000 (the fabric's limit)`);
    this.opts = opts;
    this.http = new FabricHttp({
      url: cfg.url,
      apiKey: cfg.apiKey,
      timeoutMs: opts.httpTimeoutMs,
      protocolVersion: opts.protocolVersion,
    });
    this.url = this.http.url;
    this.socket = new StatusSocket(
      this.http,
      opts.reconnectAttempts !== undefined ? { reconnectAttempts: opts.reconnectAttempts } : {},
    );
    this.checkVersion = versionChecker(this.http);
    this.tensors = new TensorUploads(this.http, () => this.ready());
    this.tokenizerCache = opts.cacheDir === false ? null : new TokenizerCache(opts.cacheDir ?? defaultCacheDir());
  }

  /** The fabric's `/version`; rejects with ProtocolMismatchError when its protocol major is not this client's. */
  version(): Promise<VersionReply> {
    return this.checkVersion();
  }

  private async ready(): Promise<void> {
    if (this.opts.checkVersion !== false) await this.version();
  }

  /**
   * How to follow a request: with nothing reading its progress as it comes, the submission waits for the final
   * status (`submitWaitMs`, POST /requests?waitMs) and the websocket is needed only when it does not come in time;
   * subscriptions ask for binary results and, with nobody reading progress, only the final statuses.
   */
  private async following(
    opts: TraceOptions,
    progress: unknown,
  ): Promise<{ subscribe: SubscribeOptions; submitWaitMs: number | null }> {
    if (this.opts.checkVersion === false) return { subscribe: {}, submitWaitMs: null };
    const capabilities = new Set((await this.version()).capabilities ?? []);
    const quiet = progress == null && opts.onStatus === undefined && opts.onMessage === undefined;
    const stream = this.opts.resultStream !== false && capabilities.has('ws-result-stream');
    // A cancel signal or a client-side limit acts on a submitted request: those follow the websocket from the start.
    const waits =
      quiet &&
      this.opts.submitWaitMs !== 0 &&
      capabilities.has('submit-wait') &&
      opts.onTokens === undefined &&
      opts.onTrace === undefined &&
      opts.onReport === undefined &&
      opts.signal === undefined &&
      opts.waitMs === undefined;
    return {
      subscribe: {
        ...(stream
          ? { results: 'stream' as const }
          : capabilities.has('ws-binary-results')
            ? { results: 'binary' as const }
            : {}),
        ...(quiet && capabilities.has('ws-final-statuses') ? { statuses: 'final' as const } : {}),
      },
      submitWaitMs: waits ? Math.min(this.opts.submitWaitMs ?? 1000, Math.floor(this.http.timeoutMs / 2)) : null,
    };
  }

  /**
   * The entry points bound to one model: `ndif.model<typeof Gpt2Tiny>('gpt2-tiny').trace(prompt, async (m) => …)` types
   * `m` from the model's declaration and the value from the block, for trace, execute, session, executeSession and
   * stream (a registered key does the same without the type argument).
   */
  model<T extends TypedModel>(key: T['key']): BoundModel<T['m']> {
    return bindModel<T['m']>(this, key);
  }

  /**
   * Runs `block` on `model` for `input` and returns what the block returned: for one prompt (a string, or a token
   * list) its value; for a list of invokes the list of values. The value is typed from the block; with a model key
   * that `ndif types` registered, the block's `m` (and `ctx`) are typed from the key alone, so a misspelt module fails
   * to compile. `trace<typeof Gpt2>('gpt2', …)` types `m` (the value is then `unknown`); `trace<T>` with another `T`
   * says what the block returns.
   */
  trace<
    K extends string,
    R,
    const I extends string | number[] | TypedInvoke<ModelOf<K>> | readonly TypedInvoke<ModelOf<K>>[],
  >(model: K, input: I, block: TypedBlock<ModelOf<K>, R>, opts?: TraceOptions): Promise<TraceValue<I, R>>;
  trace<T = any>(
    model: ResultOnly<T>,
    input: Invoke | Invoke[],
    block?: BlockFn | string,
    opts?: TraceOptions,
  ): Promise<T>;
  trace<T extends TypedModel>(
    model: T['key'],
    input: TypedInvoke<T['m']> | TypedInvoke<T['m']>[],
    block?: TypedBlock<T['m'], unknown> | string,
    opts?: TraceOptions,
  ): Promise<unknown>;
  async trace(
    model: string,
    input: Invoke | Invoke[],
    block?: BlockFn | string,
    opts: TraceOptions = {},
  ): Promise<unknown> {
    const r = await this.executeFrom(callerFrame(), model, input, block, opts);
    return isInvokeList(input) ? r.values : r.values[0];
  }

  /** As `trace`, with the request id and the result's metadata; `values` has one value per invoke. */
  execute<
    K extends string,
    R,
    const I extends string | number[] | TypedInvoke<ModelOf<K>> | readonly TypedInvoke<ModelOf<K>>[],
  >(
    model: K,
    input: I,
    block: TypedBlock<ModelOf<K>, R>,
    opts?: TraceOptions,
  ): Promise<TraceResult<InvokeValues<I, R>>>;
  execute(model: string, input: Invoke | Invoke[], block?: BlockFn | string, opts?: TraceOptions): Promise<TraceResult>;
  async execute(
    model: string,
    input: Invoke | Invoke[],
    block?: BlockFn | string,
    opts: TraceOptions = {},
  ): Promise<TraceResult> {
    return this.executeFrom(callerFrame(), model, input, block, opts);
  }

  private async executeFrom(
    callSite: string | null,
    model: string,
    input: Invoke | Invoke[],
    block: BlockFn | string | undefined,
    opts: TraceOptions,
  ): Promise<TraceResult> {
    const requestId = opts.requestId ?? randomUUID();
    const origin = { callSite, blocks: new BlockOrigins() };
    return this.runBody(buildSubmitBody(model, input, block, opts, requestId, true, origin.blocks), opts, origin);
  }

  /**
   * Runs a session (nnsight's `model.session()`): the traces one after the other in one request — one queue wait, one
   * result — where a block's `ctx.shared` (and `ctx.traces`, what earlier traces returned) carries values from trace to
   * trace without a round trip. Returns, per trace, what `trace` would have returned for it.
   */
  session<K extends string, const S extends readonly TypedSessionTrace<ModelOf<K>>[]>(
    model: K,
    traces: S,
    opts?: TraceOptions,
  ): Promise<SessionValues<S>>;
  session<T extends unknown[] = any[]>(model: string, traces: SessionTrace[], opts?: TraceOptions): Promise<T>;
  async session(model: string, traces: SessionTrace[], opts: TraceOptions = {}): Promise<unknown[]> {
    return (await this.sessionFrom(callerFrame(), model, traces, opts)).traces;
  }

  /** As `session`, with the request id and the result's metadata. */
  executeSession<K extends string, const S extends readonly TypedSessionTrace<ModelOf<K>>[]>(
    model: K,
    traces: S,
    opts?: TraceOptions,
  ): Promise<SessionResult<SessionValues<S>>>;
  executeSession(model: string, traces: SessionTrace[], opts?: TraceOptions): Promise<SessionResult>;
  executeSession(model: string, traces: SessionTrace[], opts: TraceOptions = {}): Promise<SessionResult> {
    return this.sessionFrom(callerFrame(), model, traces, opts);
  }

  private async sessionFrom(
    callSite: string | null,
    model: string,
    traces: SessionTrace[],
    opts: TraceOptions,
  ): Promise<SessionResult> {
    const requestId = opts.requestId ?? randomUUID();
    const origin = { callSite, blocks: new BlockOrigins() };
    const r = await this.runBody(buildSessionBody(model, traces, opts, requestId, true, origin.blocks), opts, origin);
    return { requestId: r.requestId, traces: sessionValues(traces, r.values, r.meta), meta: r.meta };
  }

  private async runBody(
    body: SubmitBody,
    opts: TraceOptions,
    origin?: { callSite: string | null; blocks: BlockOrigins },
  ): Promise<TraceResult> {
    const requestId = body.requestId;
    await this.ready();
    if (opts.signal?.aborted) throw new CancelledError(requestId, 'this client, before submitting');

    const progress = this.progressFor(opts, requestId);
    const reports: ReportsSeen = new Map();
    const onLog =
      opts.onLog !== undefined
        ? opts.onLog
        : this.opts.onLog !== undefined
          ? this.opts.onLog
          : defaultLog(progress, requestId);
    let settle!: { resolve: (r: TraceResult) => void; reject: (e: unknown) => void };
    const outcome = new Promise<TraceResult>((resolve, reject) => (settle = { resolve, reject }));
    outcome.catch(() => undefined); // may settle while the submission is still in flight; awaited below
    let early: EarlyResult | undefined;
    let finished = false;
    const finish = (f: () => void) => {
      if (finished) return;
      finished = true;
      f();
    };

    const onMessage = (m: StatusMessage) => {
      try {
        opts.onMessage?.(m);
        if (m.status === 'LOG') {
          onLog?.({
            requestId,
            attempt: m.attempt ?? null,
            stream: m.stream === 'stderr' ? 'stderr' : 'stdout',
            line: m.line ?? '',
          });
          return;
        }
        if (m.status === 'STREAM') {
          if (Array.isArray(m.tokens)) opts.onTokens?.(m.tokens);
          return;
        }
        if (m.status === 'TRACE') {
          if (typeof m.trace === 'number' && typeof m.traces === 'number' && m.traceStatus !== undefined)
            traceProgress(requestId, m, opts, progress, reports);
          return;
        }
        if (m.status === 'RESULT_WRITING') {
          if (typeof m.url === 'string') early = downloadEarly(this.http, m);
          return;
        }
        const u = updateFromMessage(m);
        progress?.status(u);
        opts.onStatus?.(u);
      } catch (e) {
        finish(() => settle.reject(e));
        return;
      }
      if (m.status === 'COMPLETED') {
        fetchResult(this.http, requestId, { ...m, ...earlyFor(m, early) }).then(
          (d) => finish(() => settle.resolve({ requestId, values: d.values, meta: d.meta })),
          (e) => finish(() => settle.reject(e)),
        );
      } else if (m.status === 'ERROR') {
        finish(() =>
          settle.reject(
            new RemoteError(
              requestId,
              m.error ?? { phase: 'unknown', type: 'Error', message: 'the fabric reported an error without details' },
              origin,
            ),
          ),
        );
      } else if (m.status === 'CANCELLED') {
        finish(() =>
          settle.reject(new CancelledError(requestId, `${m.by ?? 'someone'}${m.actor ? ` ${m.actor}` : ''}`)),
        );
      }
    };

    const cleanup: Array<() => void> = [() => progress?.end()];
    try {
      // When the websocket gives out (reconnects exhausted, or the subscription ended early), the outcome is
      // still read: by polling GET /requests/:id.
      const fallBack = (e: Error, submitted = false) => {
        if (finished) return;
        if (!submitted && !(e instanceof UnreachableError || e instanceof SubscriptionEndedError))
          return finish(() => settle.reject(e));
        // No signal here: a cancel sent meanwhile shows as CANCELLED in the polled view.
        new RequestHandle(this.http, requestId, false).output().then(
          (r) => finish(() => settle.resolve(r)),
          (err: unknown) => finish(() => settle.reject(err)),
        );
      };
      const follow = await this.following(opts, progress);
      let submitted = false;
      if (follow.submitWaitMs !== null) {
        const reply = await this.http.json<SubmitReply>('POST', '/requests', {
          body,
          query: { waitMs: follow.submitWaitMs },
        });
        submitted = true;
        const final = reply.final;
        if (final && (final.status !== 'COMPLETED' || final.inline !== undefined)) {
          onMessage(final);
          return await outcome;
        }
        // Not finished within the wait, something streamed from it, or a result too large to come inline: the
        // websocket replays the request's history (a result as its binary frame), then follows it.
      }
      const subscribing = this.socket.subscribe(
        requestId,
        { message: onMessage, error: (e) => fallBack(e) },
        null,
        follow.subscribe,
      );
      cleanup.push(
        () =>
          void subscribing.then(
            (sub) => sub.unsubscribe(),
            () => undefined,
          ),
      );
      subscribing.catch(() => undefined);
      if (!submitted) {
        // Where progress is shown, the submission waits for the subscription, so the statuses come live, in the
        // order they happen. Where only the outcome is read, it does not wait (a round trip): a subscription replays
        // the request's history first, so one confirmed after the request was received misses nothing; one that
        // fails once the request is submitted leaves the outcome to polling.
        if (follow.subscribe.statuses !== 'final') await subscribing;
        await this.http.json<SubmitReply>('POST', '/requests', { body });
      }
      subscribing.catch((e: Error) => fallBack(e, true));

      if (opts.signal) {
        const signal = opts.signal;
        const onAbort = () => {
          this.cancel(requestId).catch((e: unknown) => {
            // Finished before the cancel arrived: the outcome that is on its way stands.
            if (e instanceof FabricHttpError && e.code === 'CP_REQUEST_FINISHED') return;
            finish(() => settle.reject(e));
          });
        };
        if (signal.aborted) onAbort();
        else {
          signal.addEventListener('abort', onAbort, { once: true });
          cleanup.push(() => signal.removeEventListener('abort', onAbort));
        }
      }
      if (opts.waitMs !== undefined) {
        const t = setTimeout(
          () => finish(() => settle.reject(new ClientTimeoutError(requestId, opts.waitMs!))),
          opts.waitMs,
        );
        cleanup.push(() => clearTimeout(t));
      }
      return await outcome;
    } finally {
      for (const f of cleanup.reverse()) f();
    }
  }

  /**
   * Generates and yields the tokens as they are produced: `for await (const t of ndif.stream(model, prompt, block,
   * { maxNewTokens: 20 })) process.stdout.write(t.text ?? '')`. Each token once, in step order per invoke, across
   * websocket reconnects; `.result` is the request's outcome (what `execute` returns). Progress is off unless asked.
   */
  stream<
    K extends string,
    R,
    const I extends string | number[] | TypedInvoke<ModelOf<K>> | readonly TypedInvoke<ModelOf<K>>[],
  >(model: K, input: I, block: TypedBlock<ModelOf<K>, R>, opts?: TraceOptions): GenerationStream<InvokeValues<I, R>>;
  stream<T extends TypedModel>(
    model: T['key'],
    input: TypedInvoke<T['m']> | TypedInvoke<T['m']>[],
    block?: TypedBlock<T['m'], unknown> | string,
    opts?: TraceOptions,
  ): GenerationStream;
  stream(model: string, input: Invoke | Invoke[], block?: BlockFn | string, opts?: TraceOptions): GenerationStream;
  stream(model: string, input: Invoke | Invoke[], block?: BlockFn | string, opts: TraceOptions = {}): GenerationStream {
    const requestId = opts.requestId ?? randomUUID();
    const callSite = callerFrame();
    return new GenerationStream(requestId, (onTokens) =>
      this.executeFrom(callSite, model, input, block, {
        progress: false,
        ...opts,
        requestId,
        onTokens: (t) => {
          opts.onTokens?.(t);
          onTokens(t);
        },
      }),
    );
  }

  /** Submits without waiting: the handle polls `GET /requests/:id` for status and result. */
  async submit(
    model: string,
    input: Invoke | Invoke[],
    block?: BlockFn | string,
    opts: RequestOptions = {},
  ): Promise<RequestHandle> {
    const requestId = opts.requestId ?? randomUUID();
    const body = buildSubmitBody(model, input, block, opts, requestId, false);
    await this.ready();
    await this.http.json<SubmitReply>('POST', '/requests', { body });
    return new RequestHandle(this.http, requestId, !isInvokeList(input));
  }

  /** A handle on a request submitted earlier (by id); its `result()` is the list of every invoke's value. */
  request(requestId: string): RequestHandle {
    return new RequestHandle(this.http, requestId, false);
  }

  /** Cancels a request of this key (an operator's key cancels any). */
  async cancel(requestId: string): Promise<{ requestId: string; cancelled: boolean; alreadyCancelled: boolean }> {
    await this.ready();
    return this.http.json('POST', `/requests/${encodeURIComponent(requestId)}/cancel`, { body: {} });
  }

  /** The model's manifest: its modules in forward order, with shapes (resolved for `batch`×`sequence` when given). */
  async manifest(model: string, shape?: { batch: number; sequence: number }): Promise<Manifest> {
    await this.ready();
    return this.http.json('GET', `/models/${encodeURIComponent(model)}/manifest`, {
      query: shape ? { batch: shape.batch, sequence: shape.sequence } : undefined,
    });
  }

  /**
   * nnsight's `model.edit()`: registers `block`'s interventions as a persistent edit of `model` under `name`. Requests
   * to the variant `<model>@<name>` (the returned `variant`) run them with every block, started first; requests to
   * `model` itself do not. Private (only this key may use the variant) unless `visibility` is `public` (operators
   * only). The block is sent as source: it may reference only what a block may.
   */
  async edit(
    model: string,
    name: string,
    block: BlockFn | string,
    opts: { visibility?: 'public' | 'private' } = {},
  ): Promise<EditRegisteredReply> {
    await this.ready();
    return this.http.json<EditRegisteredReply>('POST', '/models/edits', {
      body: { model, name, source: blockSource(block), ...(opts.visibility ? { visibility: opts.visibility } : {}) },
    });
  }

  /** The edits of `model` this key may use (public ones and its own). */
  async edits(model: string): Promise<EditReply[]> {
    await this.ready();
    return (await this.http.json<{ edits: EditReply[] }>('GET', `/models/${encodeURIComponent(model)}/edits`)).edits;
  }

  /** Removes an edit (`<model>@<name>`): its author or an operator; later submissions to the variant are refused. */
  async removeEdit(variant: string): Promise<{ variant: string; removed: boolean }> {
    await this.ready();
    const at = variant.indexOf('@');
    if (at < 0) throw new TypeError(`${JSON.stringify(variant)} is not a variant key <model>@<edit name>`);
    return this.http.json('POST', '/models/edits/remove', {
      body: { model: variant.slice(0, at), name: variant.slice(at + 1) },
    });
  }

  /**
   * nnsight's `model.scan()`: the shape and dtype every module's outputs and inputs have for `input`, as one invoke's
   * block sees them, without running the model (the manifest, fetched once per model by this client, resolved for
   * the prompt tokenized here).
   */
  async scan(model: string, input: Invoke | Invoke[]): Promise<ScanResult> {
    let manifest = this.scanManifests.get(model);
    if (manifest === undefined) {
      manifest = this.manifest(model);
      this.scanManifests.set(model, manifest);
      manifest.catch(() => this.scanManifests.delete(model));
    }
    const [m, tok] = await Promise.all([manifest, needsTokenizer(input) ? this.tokenizer(model) : null]);
    return scanManifest(
      m,
      invokeLengths(input, (text) => tok!.encode(text)),
    );
  }

  /**
   * The model's tokenizer, to encode and decode here without a round trip: fetched from the fabric on the first
   * call (or confirmed unchanged against the disk cache), then the same object for every later call.
   */
  tokenizer(model: string): Promise<ModelTokenizer> {
    let t = this.tokenizers.get(model);
    if (t === undefined) {
      t = this.ready().then(() => fetchTokenizer(this.http, model, this.tokenizerCache));
      this.tokenizers.set(model, t);
      // A failed fetch is not kept: the next call tries again.
      t.catch(() => this.tokenizers.delete(model));
    }
    return t;
  }

  /** Closes the status websocket (it also closes by itself whenever no trace is waiting). */
  close(): void {
    this.socket.close();
  }

  private progressFor(opts: TraceOptions, requestId: string): Progress | null {
    return progressFor(opts.progress ?? this.opts.progress ?? true, requestId);
  }
}

/** True when some invoke of `input` is text (token lists need no tokenizer). */
function needsTokenizer(input: Invoke | Invoke[]): boolean {
  const list = isInvokeList(input) ? input : [input];
  return list.some(
    (inv) => typeof (typeof inv === 'object' && !Array.isArray(inv) && inv !== null ? inv.input : inv) === 'string',
  );
}
