// What registering a model folder checks and records: the files a served model needs are there (model.onnx with
// its external data, config.json, tokenizer.json), config.json parses, the tokenizer loads (checked once per folder
// stamp, catalog/cache.ts), the runtime loads the model and builds its manifest (ONNX parses, ops and inputs
// supported, dims dynamic), and the files' sha256 fingerprint. Each failure is a coded error naming the file and the
// fix; nothing is recorded then.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { ModelFacts } from '../domain/events/model.js';
import { loadTokenizer, TokenizerLoadError } from '../gpu-agent/runtime/formats.js';
import type { Manifest } from '../protocol/manifest.js';
import { FabricError, isFabricError } from '../protocol/errors.js';
import type { FabricModelCatalog } from './catalog.js';
import { CatalogErrorCode } from './errors.js';
import { checkModelFiles } from './model-files.js';

const REQUIRED: Record<string, string> = {
  'model.onnx':
    'give a Hugging Face snapshot folder (config.json with model.safetensors, or its shards and model.safetensors.index.json) or export the model to ONNX into the folder (docs/runtime.md, "Registering a snapshot", "Exporting a model")',
  'config.json': "write the model's config with transformers' config.save_pretrained(folder)",
  'tokenizer.json':
    "write the tokenizer with transformers' tokenizer.save_pretrained(folder) (a fast tokenizer writes tokenizer.json)",
};

export interface InspectedModel {
  facts: ModelFacts;
  manifest: Manifest;
}

function missingFiles(dir: string): never | void {
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    /* absent */
  }
  if (!isDir) {
    throw new FabricError(CatalogErrorCode.FilesMissing, 422, `model folder ${dir} does not exist or is not a folder`, {
      hint: "give the path of a folder on the control plane's machine holding model.onnx, config.json and tokenizer.json",
      details: { dir, missing: Object.keys(REQUIRED) },
    });
  }
  // A Hugging Face snapshot (config.json + safetensors) stands in for model.onnx: the runtime builds its graph.
  const snapshot = existsSync(join(dir, 'model.safetensors')) || existsSync(join(dir, 'model.safetensors.index.json'));
  const missing = Object.keys(REQUIRED).filter((f) => !(f === 'model.onnx' && snapshot) && !existsSync(join(dir, f)));
  if (missing.length > 0) {
    throw new FabricError(CatalogErrorCode.FilesMissing, 422, `model folder ${dir} has no ${missing.join(', ')}`, {
      hint: missing.map((f) => `${f}: ${REQUIRED[f]}`).join('; '),
      details: { dir, missing },
    });
  }
}

function readConfig(dir: string): Record<string, unknown> {
  const file = join(dir, 'config.json');
  try {
    const c = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    if (c === null || typeof c !== 'object' || Array.isArray(c)) throw new Error('it is not a JSON object');
    return c as Record<string, unknown>;
  } catch (e) {
    throw new FabricError(
      CatalogErrorCode.ConfigJsonInvalid,
      422,
      `${file} is not a valid model config: ${(e as Error).message}`,
      {
        hint: "write it with transformers' config.save_pretrained(folder)",
        details: { file },
      },
    );
  }
}

function checkTokenizer(dir: string): void {
  try {
    const tok = loadTokenizer(dir);
    tok?.encode('Hello world');
  } catch (e) {
    throw new FabricError(
      CatalogErrorCode.TokenizerInvalid,
      422,
      `the tokenizer in ${dir} does not load: ${((e instanceof TokenizerLoadError ? e.cause : e) as Error).message}`,
      {
        hint: "tokenizer.json (and tokenizer_config.json) must be what transformers' tokenizer.save_pretrained writes for a fast tokenizer",
        details: { file: join(dir, 'tokenizer.json') },
      },
    );
  }
}

/** The runtime's own refusal (MODEL_STATIC_DIMS, MODEL_OP_UNSUPPORTED, …) rather than the catalog's wrapper. */
function runtimeCause(e: unknown): unknown {
  const cause = (e as { cause?: unknown })?.cause;
  return isFabricError(cause) ? cause : e;
}

/** Checks a folder for registration under `key`; throws a coded FabricError naming what is wrong. */
export async function inspectModelFolder(
  local: FabricModelCatalog,
  key: string,
  dirArg: string,
): Promise<InspectedModel> {
  const dir = resolve(dirArg);
  missingFiles(dir);
  // Regular files within their caps, external data inside the folder: before anything reads them.
  const onnx = await checkModelFiles(dir);
  const config = readConfig(dir);
  local.checkTokenizerOnce(key, dir, () => checkTokenizer(dir));
  let manifest: Manifest;
  try {
    manifest = await local.manifestFor(key, dir);
  } catch (e) {
    throw runtimeCause(e);
  }
  const weights = await local.weightsAsync(key, dir, onnx);
  const architectures = Array.isArray(config.architectures) ? config.architectures : [];
  return {
    manifest,
    facts: {
      fingerprint: weights.fingerprint,
      dir,
      files: weights.files,
      family: typeof config.model_type === 'string' && config.model_type !== '' ? config.model_type : 'unknown',
      architecture: typeof architectures[0] === 'string' ? architectures[0] : null,
      inputs: manifest.inputNames,
      outputs: manifest.outputNames,
      moduleCount: manifest.modules.length,
      dtype: manifest.dtype ?? 'float32',
      weightsBytes: manifest.weightsBytes,
      padding: manifest.padding ?? 'left',
      generative: manifest.logits !== null && manifest.logits !== undefined,
      vocabSize: manifest.vocabSize,
      maxPositions: Math.min(manifest.maxPositions, Number.MAX_SAFE_INTEGER),
      ...(manifest.memory === undefined ? {} : { memory: manifest.memory }),
    },
  };
}
