// Addresses of answers that are not module points: a module call's result (`@call:<id>`), a cache's values
// (`@cache:<id>`), a module parameter (`@param:<path>`), one position of a point (`@at:<position>:<addr>`) and a barrier (`@barrier:<seq>:<parties>:<name>`). They travel in the ordinary WAIT / VALUE /
// RAISE messages; `@` never starts a module path, so none of them can be mistaken for `<path>.<point>.<step>`.

/** The answer to CALL `id`: the module's outputs, or a RAISE saying why it could not be called. */
export function callAddr(id: number): string {
  return `@call:${id}`;
}

/** The values cache `id` recorded (a WAIT for it is answered once the pass has reached its last point). */
export function cacheAddr(id: number): string {
  return `@cache:${id}`;
}

/**
 * The `seq`-th barrier named `name` an invoke reaches: answered, with no tensors, once `parties` invokes wait for the
 * same barrier (the same name and count of earlier arrivals at it).
 */
export function barrierAddr(name: string, seq: number, parties: number): string {
  return `@barrier:${seq}:${parties}:${name}`;
}

/**
 * A module parameter, `@param:<module path>.<name>`: a WAIT for it is answered at once with its value (the request's
 * own swap of it, once made), a SWAP replaces it for the rest of the trace.
 */
export function paramAddr(path: string): string {
  return `@param:${path}`;
}

/**
 * One position (dim 1, the sequence) of a module point's tensors, `@at:<position>:<path>.<point>.<step>` (negative
 * counts from the end): a WAIT for it is answered, where the point's WAIT would be, with the invoke's rows at that
 * position only ([rows, 1, …]). `await m.output.slice(0, -1)`: the pass may then compute the model's last module for
 * that position only.
 */
export function positionAddr(position: number, addr: string): string {
  return `@at:${position}:${addr}`;
}

export type ExtraAddr =
  | { kind: 'call'; id: number }
  | { kind: 'cache'; id: number }
  | { kind: 'barrier'; name: string; seq: number; parties: number }
  | { kind: 'param'; path: string }
  | { kind: 'at'; position: number; addr: string };

/** The extra address `addr` names, or undefined when it is not one (a module point, a step start, a gradient). */
export function parseExtraAddr(addr: string): ExtraAddr | undefined {
  if (!addr.startsWith('@')) return undefined;
  let m = /^@(call|cache):(\d+)$/.exec(addr);
  if (m) return { kind: m[1] as 'call' | 'cache', id: Number(m[2]) };
  m = /^@at:(-?\d+):([^@][\s\S]*)$/.exec(addr);
  if (m) return { kind: 'at', position: Number(m[1]), addr: m[2]! };
  m = /^@param:([\s\S]+)$/.exec(addr);
  if (m) return { kind: 'param', path: m[1]! };
  m = /^@barrier:(\d+):(\d+):([\s\S]+)$/.exec(addr);
  if (m) return { kind: 'barrier', seq: Number(m[1]), parties: Number(m[2]), name: m[3]! };
  return undefined;
}
