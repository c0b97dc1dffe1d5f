// Turns a request's result container (protocol/result-container.ts) into the values the blocks returned, with
// every `{ $tensor: i }` a Tensor.
import {
  decodeResultContainer,
  materializeTree,
  type ResultContainer,
  ResultContainerError,
} from '../../protocol/result-container.js';
import { ProtocolError } from './errors.js';
import { Tensor } from './tensor.js';

export interface DecodedResult {
  /** One value per invoke: what its block returned (null for an invoke without a block). */
  values: unknown[];
  /** The container's metadata (request id, model, tokens, timings… as the fabric records them). */
  meta: Record<string, unknown>;
}

export function decodeResult(bytes: Uint8Array): DecodedResult {
  let c: ResultContainer;
  try {
    c = decodeResultContainer(bytes);
  } catch (e) {
    if (e instanceof ResultContainerError)
      throw new ProtocolError(`the fabric sent a result this SDK cannot read: ${e.message}`, { cause: e });
    throw e;
  }
  return { values: c.invokes.map((inv) => materializeTree(inv, (p) => Tensor.fromPayload(p))), meta: c.meta };
}
