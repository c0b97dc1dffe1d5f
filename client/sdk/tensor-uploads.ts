// Uploaded tensors (`ndif.tensors`): upload a tensor once (PUT /tensors/:name, its raw little-endian bytes), list and
// remove the key's own; a request names them (`tensors: ['probe_w']`) and its blocks read `ctx.tensors.probe_w`.
import type { FabricHttp } from './http.js';
import { Tensor } from './tensor.js';

export interface UploadedTensor {
  name: string;
  dtype: 'float32' | 'int32' | 'int64';
  shape: number[];
  bytes: number;
  sha256: string;
  uploadedAt: string;
  expiresAt: string | null;
}

const UPLOADABLE = ['float32', 'int32', 'int64'];

export class TensorUploads {
  constructor(
    private readonly http: FabricHttp,
    private readonly ready: () => Promise<void>,
  ) {}

  /** Uploads `tensor` (float32, int32 or int64) under `name`, replacing this key's tensor of that name. */
  async upload(name: string, tensor: Tensor, opts: { timeoutMs?: number } = {}): Promise<UploadedTensor> {
    if (!(tensor instanceof Tensor)) throw new TypeError('upload takes a Tensor (Tensor.from(values, shape))');
    if (!UPLOADABLE.includes(tensor.dtype))
      throw new TypeError(`a ${tensor.dtype} tensor cannot be uploaded; convert it to one of ${UPLOADABLE.join(', ')}`);
    await this.ready();
    const d = tensor.data;
    const bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
    return this.http.json<UploadedTensor>('PUT', `/tensors/${encodeURIComponent(name)}`, {
      rawBody: bytes,
      headers: { 'x-ndif-dtype': tensor.dtype, 'x-ndif-shape': tensor.shape.join(',') },
      timeoutMs: opts.timeoutMs ?? 600_000,
    });
  }

  /** This key's tensors (never another key's). */
  async list(): Promise<UploadedTensor[]> {
    await this.ready();
    return (await this.http.json<{ tensors: UploadedTensor[] }>('GET', '/tensors')).tensors;
  }

  /** Deletes this key's tensor `name` (API_UNKNOWN_TENSOR when it has none). */
  async remove(name: string): Promise<{ name: string; deleted: boolean }> {
    await this.ready();
    return this.http.json('DELETE', `/tensors/${encodeURIComponent(name)}`);
  }
}
