// The uploaded tensors a submission names, resolved against the caller's own (an unknown, expired or deleted name,
// or another key's, is API_UNKNOWN_TENSOR alike) into the references the agent reads the bytes by.
import type { Identity } from '../../../auth/keys.js';
import type { FabricContext } from '../../../fabric/context.js';
import type { TensorRefPayload } from '../../../protocol/request-payload.js';
import { readKeyTensors } from '../tensors/key-tensors.js';
import { tensorInvalid, unknownTensor } from '../tensors/errors.js';

export async function resolveTensors(
  ctx: FabricContext,
  me: Identity,
  names: string[],
  maxBytes: number,
): Promise<TensorRefPayload[]> {
  const kept = await readKeyTensors(ctx, me);
  const out: TensorRefPayload[] = [];
  let total = 0;
  for (const name of names) {
    const t = kept.live.get(name);
    if (t === undefined) throw unknownTensor(name, [...kept.live.keys()]);
    total += t.bytes;
    out.push({ name, dtype: t.dtype, shape: t.shape, bytes: t.bytes, ref: t.blobRef, sha256: t.sha256 });
  }
  if (total > maxBytes)
    throw tensorInvalid(
      `the tensors named are ${total} bytes together; one request may carry at most ${maxBytes}`,
      'name fewer or smaller tensors in one request',
      { bytes: total, maxBytes },
    );
  return out;
}
