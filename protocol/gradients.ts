// Gradient addresses and the gradient side of a block's source. The gradient at a point is addressed as the point
// with `.grad` after it — `transformer.h.3.output.0.grad` — and travels in the ordinary WAIT / VALUE / RAISE / SWAP
// messages; only BACKWARD (protocol/interleave.ts) is its own message.
import { formatAddr, parseAddr } from './interleave.js';
import type { Addr } from './interleave.js';

export const GRAD_SUFFIX = '.grad';

export function isGradAddr(addr: string): boolean {
  return addr.endsWith(GRAD_SUFFIX);
}

export function formatGradAddr(a: Addr): string {
  return `${formatAddr(a)}${GRAD_SUFFIX}`;
}

/** The forward address a gradient address names; throws like parseAddr on a malformed one. */
export function parseGradAddr(addr: string): Addr {
  if (!isGradAddr(addr))
    throw new Error(
      `malformed gradient address ${JSON.stringify(addr)}: expected <path>.<output|input>.<step>${GRAD_SUFFIX}`,
    );
  return parseAddr(addr.slice(0, -GRAD_SUFFIX.length));
}
