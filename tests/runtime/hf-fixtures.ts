// The Hugging Face family fixtures (tests/fixtures/hf/, format in its README.md): model folders per family and
// exporter, the PyTorch reference each is checked against, and the safetensors reader.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { floatValues } from '../../protocol/tensor-payload.js';
import { repoRoot } from './tiny-model.js';

export const hfDir = join(repoRoot, 'tests', 'fixtures', 'hf');
export const FAMILIES = ['gpt2', 'llama', 'qwen2', 'bert'] as const;
/** Variants exported on purpose in a form the fabric refuses. */
export const REFUSED_VARIANTS = new Set(['gpt2/dynamo-static']);

export interface Intervention {
  path: string;
  point: 'output' | 'input';
  what: 'zeros' | 'scale';
  factor?: number;
}

export interface ReferenceCase {
  name: string;
  intervention: Intervention | null;
  /** Per prompt: key → tensor name in reference.safetensors. */
  tensors: Record<string, string>[];
}

export interface Reference {
  format: string;
  family: string;
  dtype: string;
  tolerance: number;
  padding_side: 'left' | 'right';
  prompts: { text: string; ids: number[] }[];
  input_names: string[];
  output_names: string[];
  cases: ReferenceCase[];
  gradients?: {
    prompt: number;
    metric: { output: string; index_a: number[]; index_b: number[]; value: number };
    tensors: Record<string, string>;
  };
  generate?: { prompt: number; new_tokens: number; tokens: number[]; logits: string; cache: boolean };
  tokenizer?: { kind: string; cases: { text: string; ids: number[]; decoded: string }[] };
}

export interface Variant {
  family: string;
  name: string;
  /** `<family>/<variant>` */
  label: string;
  dir: string;
  /** The folder holding reference.json (the variant's own, e.g. float16, or its family's). */
  referenceDir: string;
}

/** An ONNX export's folder, or a Hugging Face snapshot folder (`snapshot/`, `snapshot-sharded/`: save_pretrained). */
function isModelFolder(dir: string): boolean {
  return (
    existsSync(join(dir, 'model.onnx')) ||
    existsSync(join(dir, 'model.safetensors')) ||
    existsSync(join(dir, 'model.safetensors.index.json'))
  );
}

export function variants(opts: { includeRefused?: boolean } = {}): Variant[] {
  const out: Variant[] = [];
  for (const family of FAMILIES) {
    for (const name of readdirSync(join(hfDir, family)).sort()) {
      const dir = join(hfDir, family, name);
      if (!isModelFolder(dir)) continue;
      const label = `${family}/${name}`;
      if (REFUSED_VARIANTS.has(label) && !opts.includeRefused) continue;
      out.push({
        family,
        name,
        label,
        dir,
        referenceDir: existsSync(join(dir, 'reference.json'))
          ? dir
          : name === 'snapshot-float16'
            ? join(hfDir, family, 'float16')
            : join(hfDir, family),
      });
    }
  }
  return out;
}

export function readReference(dir: string): Reference {
  return JSON.parse(readFileSync(join(dir, 'reference.json'), 'utf8')) as Reference;
}

/** Every tensor of a safetensors file (F32, F16 as float32 values, I64). */
export function readSafetensors(file: string): Map<string, Tensor> {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const out = new Map<string, Tensor>();
  for (const [name, h] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const bytes = new Uint8Array(buf.subarray(8 + n + h.data_offsets[0], 8 + n + h.data_offsets[1]));
    if (h.dtype === 'F16') {
      const half = new Uint16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
      out.set(name, new Tensor('float32', h.shape, floatValues(half, 'float16')));
      continue;
    }
    const dtype = h.dtype === 'F32' ? 'float32' : h.dtype === 'I64' ? 'int64' : null;
    if (!dtype) throw new Error(`unexpected dtype ${h.dtype} for ${name}`);
    out.set(name, Tensor.fromPayload({ dtype, shape: h.shape, data: bytes }));
  }
  return out;
}

const API_NAMES = new Set([
  'output',
  'outputs',
  'input',
  'inputs',
  'skip',
  'path',
  'module',
  'children',
  'length',
  'step',
  'stop',
  'steps',
]);

/** A module path as block code: `encoder.layer.0.output` → `m.encoder.layer[0].module('output')`. */
export function moduleExpr(path: string): string {
  if (path === '') return 'm';
  return `m${path
    .split('.')
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : API_NAMES.has(p) ? `.module(${JSON.stringify(p)})` : `.${p}`))
    .join('')}`;
}

/** A recorded key: `<path>.output`, `<path>.output#<i>`, `<path>.input`, or a graph output's name. */
export function parseKey(
  key: string,
  outputNames: string[],
): { path: string; point: 'output' | 'input'; index: number } {
  const graphOutput = outputNames.indexOf(key);
  if (graphOutput >= 0) return { path: '', point: 'output', index: graphOutput };
  const m = /^(.*)\.(output|input)(?:#(\d+))?$/.exec(key);
  if (!m) throw new Error(`not a reference key: ${key}`);
  return { path: m[1]!, point: m[2] as 'output' | 'input', index: m[3] ? Number(m[3]) : 0 };
}

/** Block code reading a key's value (`await` included). */
export function readExpr(key: string, outputNames: string[]): string {
  const k = parseKey(key, outputNames);
  return `(await ${moduleExpr(k.path)}.${k.point}s)[${k.index}]`;
}
