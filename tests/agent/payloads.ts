// Request payloads for tests, in the format the command API stores (protocol/request-payload.ts).
import { REQUEST_PAYLOAD_FORMAT, type RequestPayload } from '../../protocol/request-payload.js';

export interface TestInvoke {
  prompt?: string;
  tokens?: number[];
  block?: string;
}

export function requestPayloadOf(invokes: TestInvoke[], newTokens = 0): RequestPayload {
  return { format: REQUEST_PAYLOAD_FORMAT, invokes, newTokens };
}

/** Reads layer 0's MLP output, logs its shape, zeroes it, returns it with the top-5 next tokens. */
export const READ_SWAP_BLOCK = `async (m, ctx) => {
  const h = await m.transformer.h[0].mlp.output;
  console.log('mlp', h.shape.join('x'));
  m.transformer.h[0].mlp.output = h.zerosLike();
  const logits = await m.output;
  return { h, top: logits.slice(0, -1).topk(5).indices };
}`;

/** Logs a line at layer 0, then never finishes (until cancelled). */
export const HANGING_BLOCK = `async (m) => {
  await m.transformer.h[0].output;
  console.log('waiting');
  await new Promise(() => {});
}`;

/** Logs a line, then holds the forward pass for `ms` before returning the layer-0 output. */
export function slowBlock(ms: number): string {
  return `async (m) => {
  const h = await m.transformer.h[0].output;
  console.log('slow');
  await new Promise((r) => setTimeout(r, ${ms}));
  return h;
}`;
}
