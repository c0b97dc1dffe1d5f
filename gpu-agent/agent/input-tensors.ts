// The uploaded tensors a request names, read from the blob store (checked against the size and sha256 recorded at
// upload) into what START carries to the blocks (`ctx.tensors.<name>`).
import type { BlobStore } from '../../blobstore/port.js';
import type { NamedTensor } from '../../protocol/interleave.js';
import type { TensorRefPayload } from '../../protocol/request-payload.js';
import { FabricError } from '../../protocol/errors.js';

export const TENSOR_UNAVAILABLE = 'AGENT_TENSOR_UNAVAILABLE';

export async function readInputTensors(blobs: BlobStore, refs: TensorRefPayload[] | undefined): Promise<NamedTensor[]> {
  const out: NamedTensor[] = [];
  for (const r of refs ?? []) {
    let bytes: Buffer;
    try {
      const blob = await blobs.get(r.ref);
      if (blob.size !== r.bytes || blob.sha256 !== r.sha256) throw new Error('its bytes are not the ones uploaded');
      bytes = blob.bytes;
    } catch (err) {
      throw new FabricError(TENSOR_UNAVAILABLE, 404, `tensor ${r.name} cannot be read: ${(err as Error).message}`, {
        hint: 'it was deleted or expired after the request was submitted; upload it again and resubmit',
      });
    }
    out.push({
      name: r.name,
      tensor: {
        dtype: r.dtype,
        shape: [...r.shape],
        data: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
      },
    });
  }
  return out;
}
