// Where a model's weights live for onnxruntime. Every session of a model (the whole graph and each segment)
// names its initializers as external data in one folder, so no session model carries weight bytes: onnxruntime
// maps the files and only its own pre-packing of MatMul/Gemm weights copies anything (see docs/runtime.md).
//
// A model whose weights are already external data next to model.onnx uses its own directory. A model with
// weights inside model.onnx (raw_data) gets a private folder under the OS temp dir holding those bytes in one
// file, plus links to any external files it also has; `dispose()` removes it.
import { mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, normalize, sep } from 'node:path';
import { DataLocation } from '../onnx/types.js';
import type { TensorProto } from '../onnx/types.js';
import { externalEntry, tensorBytes } from '../onnx/tensor-bytes.js';
import { ModelLoadError } from '../errors.js';

/** Initializers at most this big stay inside the session models (shape constants and the like). */
const INLINE_LIMIT = 1024;
const INLINE_FILE = 'ndif-inline-weights.data';

export interface WeightStore {
  /** Folder the external-data locations resolve against (onnxruntime's external initializers folder). */
  folder: string;
  /** Initializers by name, each either small inline or external data in `folder`. */
  initializers: Map<string, TensorProto>;
  /** Sum of every initializer's bytes. */
  totalBytes: number;
  dispose(): void;
}

function checkLocation(location: string, name: string): string {
  const n = normalize(location);
  if (isAbsolute(n) || n === '..' || n.startsWith(`..${sep}`)) {
    throw new ModelLoadError(
      'MODEL_INVALID',
      `initializer ${name}: external data location ${JSON.stringify(location)} must be a path inside the model directory`,
    );
  }
  return n;
}

/** Refuses external data whose file is absent or shorter than the initializers it should hold. */
function checkExternalFiles(modelDir: string, external: TensorProto[]): void {
  const sizes = new Map<string, number>();
  for (const t of external) {
    const loc = normalize(externalEntry(t, 'location')!);
    let size = sizes.get(loc);
    if (size === undefined) {
      try {
        size = statSync(join(modelDir, loc)).size;
      } catch {
        throw new ModelLoadError(
          'MODEL_EXTERNAL_DATA_MISSING',
          `initializer ${t.name} is stored in ${loc}, which is not in ${modelDir}: copy the external data file (it is written next to model.onnx by the exporter) into the model folder`,
          {
            details: { file: loc, initializer: t.name },
          },
        );
      }
      sizes.set(loc, size);
    }
    const end = Number(externalEntry(t, 'offset') ?? 0) + tensorBytes(t);
    if (end > size) {
      throw new ModelLoadError(
        'MODEL_EXTERNAL_DATA_MISSING',
        `initializer ${t.name} needs bytes up to ${end} of ${loc}, which has ${size}: the external data file is truncated or from another export; copy it again`,
        {
          details: { file: loc, initializer: t.name, bytes: size, needed: end },
        },
      );
    }
  }
}

export function prepareWeights(modelDir: string, initializers: TensorProto[]): WeightStore {
  const byName = new Map<string, TensorProto>();
  let totalBytes = 0;
  const inline: TensorProto[] = [];
  const locations = new Set<string>();
  const external: TensorProto[] = [];
  for (const t of initializers) {
    if (!t.name) continue;
    totalBytes += tensorBytes(t);
    if (t.data_location === DataLocation.EXTERNAL) {
      const loc = externalEntry(t, 'location');
      if (loc === undefined)
        throw new ModelLoadError('MODEL_INVALID', `initializer ${t.name} is external data without a location`);
      locations.add(checkLocation(loc, t.name));
      external.push(t);
      byName.set(t.name, t);
    } else if (t.raw_data && t.raw_data.byteLength > INLINE_LIMIT) {
      inline.push(t);
    } else {
      byName.set(t.name, t);
    }
  }
  checkExternalFiles(modelDir, external);
  if (inline.length === 0) return { folder: modelDir, initializers: byName, totalBytes, dispose: () => {} };

  const folder = mkdtempSync(join(tmpdir(), 'ndif-weights-'));
  try {
    for (const loc of locations) {
      mkdirSync(dirname(join(folder, loc)), { recursive: true });
      symlinkSync(join(modelDir, loc), join(folder, loc));
    }
    const file = locations.has(INLINE_FILE) ? `${INLINE_FILE}.${process.pid}` : INLINE_FILE;
    let size = 0;
    const placed = inline.map((t) => {
      const offset = Math.ceil(size / 64) * 64;
      size = offset + t.raw_data!.byteLength;
      return { t, offset };
    });
    const buf = new Uint8Array(size);
    for (const { t, offset } of placed) {
      buf.set(t.raw_data!, offset);
      const { raw_data: _drop, ...rest } = t;
      byName.set(t.name!, {
        ...rest,
        data_location: DataLocation.EXTERNAL,
        external_data: [
          { key: 'location', value: file },
          { key: 'offset', value: String(offset) },
          { key: 'length', value: String(t.raw_data!.byteLength) },
        ],
      });
    }
    writeFileSync(join(folder, file), buf);
  } catch (e) {
    rmSync(folder, { recursive: true, force: true });
    throw e;
  }
  let disposed = false;
  return {
    folder,
    initializers: byName,
    totalBytes,
    dispose: () => {
      if (disposed) return;
      disposed = true;
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
