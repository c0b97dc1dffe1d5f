// A snapshot's config.json as the graph builders read it: the family from `model_type`, its shape, and every
// option that changes the computation checked against what the builder implements. A value the builder does not
// implement (a model_type, an activation, a rope scaling kind, sliding-window attention) is refused here, at
// registration, with SNAPSHOT_CONFIG_UNSUPPORTED naming the field — never served as a different model.
import { ModelLoadError } from '../errors.js';

export type SnapshotFamily = 'gpt2' | 'llama' | 'bert';
export const SUPPORTED_MODEL_TYPES: Readonly<Record<string, SnapshotFamily>> = {
  gpt2: 'gpt2',
  llama: 'llama',
  qwen2: 'llama',
  mistral: 'llama',
  bert: 'bert',
};

export interface Gpt2Config {
  family: 'gpt2';
  layers: number;
  d: number;
  heads: number;
  inner: number;
  vocab: number;
  positions: number;
  eps: number;
  activation: 'gelu_new' | 'gelu';
  scaleAttn: boolean;
}

export interface LlamaConfig {
  family: 'llama';
  modelType: string;
  layers: number;
  d: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  vocab: number;
  positions: number;
  eps: number;
  /** q/k/v biases (Qwen2 always, Llama with attention_bias) and the output projection's (Llama attention_bias). */
  qkvBias: boolean;
  oBias: boolean;
  mlpBias: boolean;
  tied: boolean;
  invFreq: number[];
  /** cos/sin factor (1 unless a scaling kind sets it). */
  attentionScaling: number;
}

export interface BertConfig {
  family: 'bert';
  layers: number;
  d: number;
  heads: number;
  intermediate: number;
  vocab: number;
  positions: number;
  typeVocab: number;
  eps: number;
}

export type SnapshotConfig = (Gpt2Config | LlamaConfig | BertConfig) & { dtype: 'float32' | 'float16' };

const FILE = 'config.json';

function unsupported(field: string, value: unknown, fix: string): never {
  throw new ModelLoadError(
    'SNAPSHOT_CONFIG_UNSUPPORTED',
    `${FILE}: ${field} = ${JSON.stringify(value)} is not supported by the snapshot graph builder; ${fix}`,
    { details: { file: FILE, field, value: value === undefined ? null : value, fix } },
  );
}

class Fields {
  constructor(private readonly c: Record<string, unknown>) {}
  has(name: string): boolean {
    return this.c[name] !== undefined && this.c[name] !== null;
  }
  raw(name: string): unknown {
    return this.c[name];
  }
  int(name: string, fallback?: number, max = 1 << 24): number {
    const v = this.c[name] ?? fallback;
    if (!Number.isSafeInteger(v) || (v as number) < 1 || (v as number) > max)
      unsupported(name, v, `it must be a positive integer of at most ${max}`);
    return v as number;
  }
  num(name: string, fallback?: number): number {
    const v = this.c[name] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) unsupported(name, v, 'it must be a positive number');
    return v;
  }
  bool(name: string, fallback: boolean): boolean {
    const v = this.c[name] ?? fallback;
    if (typeof v !== 'boolean') unsupported(name, v, 'it must be true or false');
    return v;
  }
  /** Refuses the field unless it is absent or one of `ok`. */
  only(name: string, ok: unknown[], fix: string): void {
    const v = this.c[name];
    if (v === undefined || v === null) return;
    if (!ok.includes(v)) unsupported(name, v, fix);
  }
}

function dtypeOf(f: Fields): 'float32' | 'float16' {
  const v = f.raw('dtype') ?? f.raw('torch_dtype') ?? 'float32';
  if (v === 'float32' || v === 'float16') return v;
  return unsupported(
    f.has('dtype') ? 'dtype' : 'torch_dtype',
    v,
    'save the weights as float32 or float16 (model.to(torch.float32).save_pretrained(folder))',
  );
}

function gpt2(f: Fields): Gpt2Config {
  const d = f.int('n_embd');
  const heads = f.int('n_head');
  if (d % heads !== 0) unsupported('n_head', heads, `n_embd (${d}) must be a multiple of it`);
  const act = f.raw('activation_function') ?? 'gelu_new';
  if (act !== 'gelu_new' && act !== 'gelu_pytorch_tanh' && act !== 'gelu')
    unsupported('activation_function', act, 'the builder implements gelu_new, gelu_pytorch_tanh and gelu');
  f.only('scale_attn_by_inverse_layer_idx', [false], 'the builder scales attention by 1/sqrt(head_dim) only');
  f.only('add_cross_attention', [false], 'cross-attention (an encoder-decoder GPT-2) is not built');
  return {
    family: 'gpt2',
    layers: f.int('n_layer', undefined, 4096),
    d,
    heads,
    inner: f.has('n_inner') ? f.int('n_inner') : 4 * d,
    vocab: f.int('vocab_size'),
    positions: f.int('n_positions'),
    eps: f.num('layer_norm_epsilon', 1e-5),
    activation: act === 'gelu' ? 'gelu' : 'gelu_new',
    scaleAttn: f.bool('scale_attn_weights', true),
  };
}

/** Inverse rotary frequencies and the cos/sin factor of the config's rope kind (transformers' rope_init functions). */
function rope(f: Fields, headDim: number, positions: number): { invFreq: number[]; scaling: number } {
  const params = (f.raw('rope_parameters') ?? f.raw('rope_scaling') ?? null) as Record<string, unknown> | null;
  const field = f.has('rope_parameters') ? 'rope_parameters' : 'rope_scaling';
  if (params !== null && (typeof params !== 'object' || Array.isArray(params)))
    unsupported(field, params, 'it must be an object or null');
  const kind = params ? (params.rope_type ?? params.type ?? 'default') : 'default';
  const theta = params?.rope_theta ?? f.raw('rope_theta') ?? 10000;
  if (typeof theta !== 'number' || !(theta > 0)) unsupported('rope_theta', theta, 'it must be a positive number');
  const partial = f.raw('partial_rotary_factor');
  if (partial !== undefined && partial !== null && partial !== 1)
    unsupported('partial_rotary_factor', partial, 'the builder rotates the whole head');
  const base = Array.from({ length: headDim / 2 }, (_, i) => 1 / theta ** ((2 * i) / headDim));
  if (kind === 'default') return { invFreq: base, scaling: 1 };
  const factor = params!.factor;
  if (typeof factor !== 'number' || !(factor > 0))
    unsupported(`${field}.factor`, factor, 'it must be a positive number');
  if (kind === 'linear') return { invFreq: base.map((x) => x / factor), scaling: 1 };
  if (kind === 'llama3') {
    const low = params!.low_freq_factor;
    const high = params!.high_freq_factor;
    const orig = params!.original_max_position_embeddings;
    if (typeof low !== 'number' || typeof high !== 'number' || typeof orig !== 'number' || !(high > low))
      unsupported(
        field,
        params,
        'llama3 rope scaling needs low_freq_factor < high_freq_factor and original_max_position_embeddings',
      );
    const lowWave = orig / low;
    const highWave = orig / high;
    const invFreq = base.map((x) => {
      const wave = (2 * Math.PI) / x;
      if (wave > lowWave) return x / factor;
      if (wave < highWave) return x;
      const smooth = (orig / wave - low) / (high - low);
      return (1 - smooth) * (x / factor) + smooth * x;
    });
    return { invFreq, scaling: 1 };
  }
  void positions;
  return unsupported(
    `${field}.rope_type`,
    kind,
    'the builder implements the rope kinds default, linear and llama3; export this model to ONNX instead (docs/runtime.md, "Exporting a model")',
  );
}

function llama(f: Fields, modelType: string): LlamaConfig {
  const d = f.int('hidden_size');
  const heads = f.int('num_attention_heads');
  const kvHeads = f.int('num_key_value_heads', heads);
  if (heads % kvHeads !== 0)
    unsupported('num_key_value_heads', kvHeads, `num_attention_heads (${heads}) must be a multiple of it`);
  const headDim = f.has('head_dim') ? f.int('head_dim') : d / heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) unsupported('head_dim', headDim, 'it must be an even integer');
  f.only('hidden_act', ['silu'], 'the builder implements the gated SiLU MLP');
  f.only('pretraining_tp', [1], 'set it to 1 (it only splits the matrix products)');
  const positions = f.int('max_position_embeddings');
  if (modelType === 'qwen2') {
    f.only('use_sliding_window', [false], 'sliding-window attention is not built');
  } else if (f.has('sliding_window')) {
    const w = f.raw('sliding_window');
    if (typeof w !== 'number' || w < positions)
      unsupported(
        'sliding_window',
        w,
        'sliding-window attention is not built (set it to null if the model attends to every position)',
      );
  }
  const { invFreq, scaling } = rope(f, headDim, positions);
  const attnBias = modelType === 'qwen2' ? true : f.bool('attention_bias', false);
  return {
    family: 'llama',
    modelType,
    layers: f.int('num_hidden_layers', undefined, 4096),
    d,
    heads,
    kvHeads,
    headDim,
    intermediate: f.int('intermediate_size'),
    vocab: f.int('vocab_size'),
    positions,
    eps: f.num('rms_norm_eps', 1e-6),
    qkvBias: attnBias,
    oBias: modelType === 'qwen2' ? false : attnBias,
    mlpBias: modelType === 'llama' ? f.bool('mlp_bias', false) : false,
    tied: f.bool('tie_word_embeddings', false),
    invFreq,
    attentionScaling: scaling,
  };
}

function bert(f: Fields): BertConfig {
  const d = f.int('hidden_size');
  const heads = f.int('num_attention_heads');
  if (d % heads !== 0) unsupported('num_attention_heads', heads, `hidden_size (${d}) must be a multiple of it`);
  f.only('hidden_act', ['gelu'], 'the builder implements the exact (erf) GELU');
  f.only('position_embedding_type', ['absolute'], 'the builder implements absolute position embeddings');
  f.only('is_decoder', [false], 'BERT is built as an encoder');
  f.only('add_cross_attention', [false], 'cross-attention is not built');
  return {
    family: 'bert',
    layers: f.int('num_hidden_layers', undefined, 4096),
    d,
    heads,
    intermediate: f.int('intermediate_size'),
    vocab: f.int('vocab_size'),
    positions: f.int('max_position_embeddings'),
    typeVocab: f.int('type_vocab_size', 2),
    eps: f.num('layer_norm_eps', 1e-12),
  };
}

export function parseSnapshotConfig(raw: Record<string, unknown>): SnapshotConfig {
  const f = new Fields(raw);
  const modelType = raw.model_type;
  const family =
    typeof modelType === 'string' && Object.hasOwn(SUPPORTED_MODEL_TYPES, modelType)
      ? SUPPORTED_MODEL_TYPES[modelType]
      : undefined;
  if (family === undefined)
    unsupported(
      'model_type',
      modelType,
      `the builder knows ${Object.keys(SUPPORTED_MODEL_TYPES).join(', ')}; export other models to ONNX (docs/runtime.md, "Exporting a model")`,
    );
  const dtype = dtypeOf(f);
  const c = family === 'gpt2' ? gpt2(f) : family === 'bert' ? bert(f) : llama(f, modelType as string);
  return { ...c, dtype };
}
