// The SDK's local mode (nnsight's `remote=False`): `trace`, `execute`, `session`, `stream`, `tokenizer` and
// `manifest` as `Fabric` has them, run in this process on model folders with the GPU agent's own runtime — no
// fabric, no queue, no network. The request goes the fabric's way: the same body the SDK would POST, checked and
// turned into the agent's payload by the command API's own functions, run by HostedModel with the blocks
// in-process (a trusted agent's path), encoded into a result container and decoded by the SDK's decoder. A block
// debugged here runs unchanged on the fabric, and gives the same bits there (tests/client/local.int.test.ts).
import { sessionValues } from '../session-values.js';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { checkBlockSource } from '../../../command-api/http/submit/block-check.js';
import { submissionOf } from '../../../command-api/http/submit/payload.js';
import type { SubmitBody as CheckedBody } from '../../../command-api/http/submit/schema.js';
import { isFabricError } from '../../../protocol/errors.js';
import type { Manifest } from '../../../protocol/manifest.js';
import { parseRequestPayload, type InvokePayload, type RequestPayload } from '../../../protocol/request-payload.js';
import { encodeResultContainer } from '../../../protocol/result-container.js';
import { tokenizerBundleSha256 } from '../../../protocol/tokenizer-bundle.js';
import type { BlockFn } from '../block-source.js';
import { CancelledError, FabricHttpError, RemoteError } from '../errors.js';
import type { SessionResult, TraceOptions, TraceResult } from '../fabric.js';
import { defaultLog, progressFor, type ProgressOutput } from '../progress.js';
import { buildSessionBody, buildSubmitBody, isInvokeList } from '../request-body.js';
import type { Invoke, SessionTrace, SubmitBody } from '../request-body.js';
import { type ReportsSeen, traceProgress } from '../trace-progress.js';
import { decodeResult } from '../results.js';
import { invokeLengths, scanManifest, type ScanResult } from '../scan.js';
import { updateFromMessage, type LogLine } from '../status.js';
import { GenerationStream } from '../token-stream.js';
import { ModelTokenizer } from '../tokenizer.js';
import type { StatusMessage } from '../wire.js';
import type { TypedModel } from '../model-types.js';
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
} from '../typed-calls.js';
import { bindModel } from '../bound-model.js';
import {
  createInProcessBlocks,
  failureReport,
  loadModel,
  runMeta,
  TokenStream,
  type HostedModel,
  type InvokeSpec,
  type OpenChannel,
} from './agent-runtime.js';

export interface LocalFabricOptions {
  /** Model folders by the key blocks name them with (`{ 'gpt2-tiny': './models/gpt2-tiny' }`). */
  models: Record<string, string>;
  /** Progress of each trace on stderr, as `Fabric`'s (default false here: a local run has no queue to wait in). */
  progress?: boolean | ProgressOutput;
  /** Where the blocks' console lines go (default: printed, tagged with their request); null drops them. */
  onLog?: ((l: LogLine) => void) | null;
  /** Execution limit of a request that sets none (default: an agent's, 3 600 000 ms). */
  maxRunMs?: number;
}

const AGENT_MAX_RUN_MS = 3_600_000;

/** Runs blocks in this process on local model folders, with the calls `Fabric` has. */
export class LocalFabric {
  readonly url = 'local';
  private readonly dirs = new Map<string, string>();
  private readonly loaded = new Map<string, Promise<HostedModel>>();
  private readonly tokenizers = new Map<string, Promise<ModelTokenizer>>();

  constructor(private readonly opts: LocalFabricOptions) {
    for (const [key, dir] of Object.entries(opts.models)) this.dirs.set(key, resolve(dir));
  }

  /** A local fabric of one model folder, named by the folder's name unless `key` is given. */
  static folder(dir: string, opts: Omit<LocalFabricOptions, 'models'> & { key?: string } = {}): LocalFabric {
    return new LocalFabric({ ...opts, models: { [opts.key ?? basename(resolve(dir))]: dir } });
  }

  // The same typed entry points as Fabric's (client/sdk/typed-calls.ts): a key `ndif types` registered types the
  // block's `m` and the value of trace, execute, session, executeSession, stream and per-invoke blocks.
  /**
   * The entry points bound to one model: `ndif.model<typeof Gpt2Tiny>('gpt2-tiny').trace(prompt, async (m) => …)` types
   * `m` from the model's declaration and the value from the block, for trace, execute, session, executeSession and
   * stream (a registered key does the same without the type argument).
   */
  model<T extends TypedModel>(key: T['key']): BoundModel<T['m']> {
    return bindModel<T['m']>(this, key);
  }

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
    const r = await this.execute(model, input, block, opts);
    return isInvokeList(input) ? r.values : r.values[0];
  }

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
  execute(
    model: string,
    input: Invoke | Invoke[],
    block?: BlockFn | string,
    opts: TraceOptions = {},
  ): Promise<TraceResult> {
    const requestId = opts.requestId ?? randomUUID();
    return this.runBody(buildSubmitBody(model, input, block, opts, requestId, true), opts);
  }

  session<K extends string, const S extends readonly TypedSessionTrace<ModelOf<K>>[]>(
    model: K,
    traces: S,
    opts?: TraceOptions,
  ): Promise<SessionValues<S>>;
  session<T extends unknown[] = any[]>(model: string, traces: SessionTrace[], opts?: TraceOptions): Promise<T>;
  async session(model: string, traces: SessionTrace[], opts: TraceOptions = {}): Promise<unknown[]> {
    return (await this.executeSession(model, traces, opts)).traces;
  }

  executeSession<K extends string, const S extends readonly TypedSessionTrace<ModelOf<K>>[]>(
    model: K,
    traces: S,
    opts?: TraceOptions,
  ): Promise<SessionResult<SessionValues<S>>>;
  executeSession(model: string, traces: SessionTrace[], opts?: TraceOptions): Promise<SessionResult>;
  async executeSession(model: string, traces: SessionTrace[], opts: TraceOptions = {}): Promise<SessionResult> {
    const requestId = opts.requestId ?? randomUUID();
    const r = await this.runBody(buildSessionBody(model, traces, opts, requestId, true), opts);
    return { requestId: r.requestId, traces: sessionValues(traces, r.values, r.meta), meta: r.meta };
  }

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
    return new GenerationStream(requestId, (onTokens) =>
      this.execute(model, input, block, {
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

  /** The model's module tree and shapes, as the fabric's `GET /models/:key/manifest` gives it. */
  async manifest(model: string, shape?: { batch: number; sequence: number }): Promise<Manifest> {
    const hm = await this.hosted(model);
    return shape ? hm.manifest(shape.batch, shape.sequence) : hm.manifest();
  }

  /** nnsight's `model.scan()`, as `Fabric.scan`: every module's shapes and dtypes for `input`, without running. */
  async scan(model: string, input: Invoke | Invoke[]): Promise<ScanResult> {
    const manifest = await this.manifest(model);
    const list = isInvokeList(input) ? input : [input];
    const text = list.some(
      (inv) => typeof (typeof inv === 'object' && !Array.isArray(inv) ? inv.input : inv) === 'string',
    );
    const tok = text ? await this.tokenizer(model) : null;
    return scanManifest(
      manifest,
      invokeLengths(input, (t) => tok!.encode(t)),
    );
  }

  /** The model folder's tokenizer, with the options the fabric encodes prompts with. */
  tokenizer(model: string): Promise<ModelTokenizer> {
    let t = this.tokenizers.get(model);
    if (t === undefined) {
      t = (async () => {
        const dir = this.dirOf(model);
        const file = join(dir, 'tokenizer.json');
        if (!existsSync(file))
          throw new FabricHttpError(
            404,
            {
              code: 'API_NO_TOKENIZER',
              message: `model ${model} has no tokenizer (no tokenizer.json in ${dir})`,
              hint: 'send token ids instead of text for this model, or add its tokenizer.json to the model folder',
            },
            'local tokenizer',
          );
        const tokenizer = readFileSync(file, 'utf8');
        const cfg = join(dir, 'tokenizer_config.json');
        const config = existsSync(cfg) ? readFileSync(cfg, 'utf8') : null;
        const sha256 = await tokenizerBundleSha256(tokenizer, config);
        return new ModelTokenizer({ model, sha256, tokenizer, config }, 'fabric');
      })();
      this.tokenizers.set(model, t);
      t.catch(() => this.tokenizers.delete(model));
    }
    return t;
  }

  /** Unloads the models (their onnxruntime sessions). */
  async close(): Promise<void> {
    const models = [...this.loaded.values()];
    this.loaded.clear();
    for (const m of models) await m.then((hm) => hm.close()).catch(() => undefined);
  }

  private dirOf(model: string): string {
    const dir = this.dirs.get(model);
    if (dir === undefined)
      throw new FabricHttpError(
        404,
        {
          code: 'API_UNKNOWN_MODEL',
          message: `model ${model} is not one of this local fabric's models (${[...this.dirs.keys()].join(', ') || 'none'})`,
          hint: 'name the model folder in new LocalFabric({ models: { key: dir } })',
          details: { model },
        },
        'local trace',
      );
    return dir;
  }

  private hosted(key: string): Promise<HostedModel> {
    let m = this.loaded.get(key);
    if (m === undefined) {
      m = loadModel(this.dirOf(key), { key });
      this.loaded.set(key, m);
      m.catch(() => this.loaded.delete(key));
    }
    return m;
  }

  private async runBody(body: SubmitBody, opts: TraceOptions): Promise<TraceResult> {
    const requestId = body.requestId;
    if (opts.signal?.aborted) throw new CancelledError(requestId, 'this client, before submitting');
    const payload = accepted(body);
    const hm = await this.hosted(body.model);

    const progress = progressFor(opts.progress ?? this.opts.progress ?? false, requestId);
    const onLog =
      opts.onLog !== undefined
        ? opts.onLog
        : this.opts.onLog !== undefined
          ? this.opts.onLog
          : defaultLog(progress, requestId);
    const reports: ReportsSeen = new Map();
    const send = (m: Omit<StatusMessage, 'type' | 'requestId'>) => {
      const msg = { type: 'status', requestId, ...m } as StatusMessage;
      opts.onMessage?.(msg);
      if (m.status === 'LOG' || m.status === 'STREAM' || m.status === 'TRACE') return;
      const u = updateFromMessage(msg);
      progress?.status(u);
      opts.onStatus?.(u);
    };
    const controller = new AbortController();
    const onAbort = () => controller.abort('cancelled by this client');
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const tokens = new TokenStream(
      (t) => {
        send({ status: 'STREAM', tokens: t });
        opts.onTokens?.(t);
      },
      hm.tokenizer ? (ids) => hm.tokenizer!.decode(ids) : undefined,
    );
    let waitTimer: ReturnType<typeof setTimeout> | undefined;
    try {
      send({ status: 'RECEIVED' });
      const common = {
        requestId,
        timeoutMs: payload.timeoutMs ?? this.opts.maxRunMs ?? AGENT_MAX_RUN_MS,
        signal: controller.signal,
        onLog: (l: { stream: 'stdout' | 'stderr'; line: string }) => {
          send({ status: 'LOG', stream: l.stream, line: l.line, attempt: 1 });
          onLog?.({ requestId, attempt: 1, stream: l.stream, line: l.line });
        },
      };
      const open: OpenChannel = () => {
        send({ status: 'RUNNING', attempt: 1 });
        return createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
      };
      const run = async (): Promise<Parameters<typeof encodeResultContainer>[0]> => {
        const meta = { requestId, model: body.model, replicaId: null, agentId: 'local', attempt: 1 };
        if (payload.traces !== undefined) {
          const result = await hm.runSession(
            {
              ...common,
              traces: payload.traces.map((t) => ({
                invokes: invokeSpecs(t.invokes, t.block),
                ...(t.newTokens === undefined ? {} : { newTokens: t.newTokens }),
                ...(t.generation === undefined ? {} : { generation: t.generation }),
                ...(t.repeat === undefined ? {} : { repeat: t.repeat }),
              })),
              onTrace: (e) => {
                const t = {
                  trace: e.trace,
                  traces: e.traces,
                  traceStatus: e.status,
                  ...(e.ms === undefined ? {} : { ms: e.ms }),
                  ...(e.iterations === undefined ? {} : { iterations: e.iterations, done: e.done ?? 0 }),
                  ...(e.reported === undefined ? {} : { reported: e.reported }),
                };
                send({ status: 'TRACE', ...t } as Omit<StatusMessage, 'type' | 'requestId'>);
                traceProgress(requestId, t, opts, progress, reports);
              },
            },
            open,
          );
          return {
            meta: {
              ...meta,
              ...runMeta(result.traces[0]!),
              traces: result.traces.map((r) => ({ invokes: r.invokes.length, ...runMeta(r) })),
            },
            invokes: result.traces.flatMap((r) => r.invokes.map((i) => i.result)),
          };
        }
        const result = await hm.run(
          {
            ...common,
            invokes: invokeSpecs(payload.invokes, payload.block),
            newTokens: payload.newTokens ?? (payload.generation?.maxNewTokens === undefined ? 0 : undefined),
            ...(payload.generation === undefined ? {} : { generation: payload.generation }),
            onToken: (t) => tokens.add(t),
          },
          open,
        );
        return { meta: { ...meta, ...runMeta(result) }, invokes: result.invokes.map((i) => i.result) };
      };
      const waited =
        opts.waitMs === undefined
          ? run()
          : Promise.race([
              run(),
              new Promise<never>((_, reject) => {
                waitTimer = setTimeout(() => {
                  controller.abort('waitMs ran out');
                  reject(new CancelledError(requestId, `this client's waitMs (${opts.waitMs} ms)`));
                }, opts.waitMs);
              }),
            ]);
      let container: Parameters<typeof encodeResultContainer>[0];
      try {
        container = await waited;
      } catch (err) {
        tokens.close();
        if (controller.signal.aborted) {
          send({ status: 'CANCELLED' });
          throw new CancelledError(requestId, 'this client');
        }
        const f = failureReport(err);
        const error = { phase: f.phase, type: f.errorType, message: f.message, stack: f.stack };
        send({ status: 'ERROR', error } as Omit<StatusMessage, 'type' | 'requestId'>);
        throw new RemoteError(requestId, error);
      }
      tokens.close();
      // Through the result container, as the fabric returns it: the values decode to the same Tensors.
      const decoded = decodeResult(encodeResultContainer(container));
      send({ status: 'COMPLETED' });
      return { requestId, values: decoded.values, meta: decoded.meta };
    } finally {
      clearTimeout(waitTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      progress?.end();
    }
  }
}

/** The body as the command API accepts it: blocks compiled (not run), generation options checked, the payload. */
function accepted(body: SubmitBody): RequestPayload {
  try {
    const check = (invokes: Array<{ block?: string }>, shared: string | undefined, trace?: number) => {
      if (shared !== undefined) checkBlockSource(shared, 'shared', trace);
      for (const [i, inv] of invokes.entries()) if (inv.block !== undefined) checkBlockSource(inv.block, i, trace);
    };
    if (body.traces) for (const [i, t] of body.traces.entries()) check(t.invokes, t.block, i);
    else check(body.invokes ?? [], body.block);
    const s = submissionOf(body as unknown as CheckedBody, { trusted: true, priority: false });
    return parseRequestPayload(JSON.parse(JSON.stringify(s.payload)));
  } catch (e) {
    if (isFabricError(e))
      throw new FabricHttpError(
        e.httpStatus,
        {
          code: e.code,
          message: e.message,
          ...(e.hint ? { hint: e.hint } : {}),
          ...(e.details ? { details: e.details } : {}),
        },
        'local trace',
      );
    throw e;
  }
}

/** A trace's invokes as the runtime takes them (as the agent builds them: gpu-agent/agent/requests.ts). */
function invokeSpecs(invokes: InvokePayload[], shared: string | undefined): InvokeSpec[] {
  return invokes.map((inv) => {
    const block = inv.block ?? shared;
    const input = inv.prompt !== undefined ? { prompt: inv.prompt } : { tokens: inv.tokens! };
    return {
      ...input,
      ...(block === undefined ? {} : { block }),
      ...(inv.generation === undefined ? {} : { generation: inv.generation }),
    };
  });
}
