// A block travels as its source text: `fn.toString()` of the function the caller wrote. It runs on the fabric,
// so it cannot see the caller's variables; values it needs go in as `params` (JSON): the block gets them as its
// third argument, and as a variable `params` in scope. The wrapper starts on the source's first line so the line
// numbers of the fabric's stack traces are the block's own.
import { FabricClientError } from './errors.js';

export type BlockFn = (m: any, ctx: any, params?: any) => unknown;

/** The block is not something the fabric can run (a native or bound function, params that are not JSON). */
export class BlockSourceError extends FabricClientError {}

export function blockSource(block: BlockFn | string, params?: unknown): string {
  let src: string;
  if (typeof block === 'string') src = block;
  else if (typeof block === 'function') {
    src = Function.prototype.toString.call(block);
    if (/\{\s*\[native code\]\s*\}\s*$/.test(src)) {
      throw new BlockSourceError(
        `the block ${block.name ? `${JSON.stringify(block.name)} ` : ''}is a native or bound function; pass the function itself (\`async (m, ctx) => { … }\`), not a .bind() of it`,
      );
    }
    src = asExpression(src);
  } else {
    throw new BlockSourceError(
      `a block is a function \`async (m, ctx) => { … }\` or its source text; got ${block === null ? 'null' : typeof block}`,
    );
  }
  if (params === undefined) return src;
  let json: string | undefined;
  try {
    json = JSON.stringify(params);
  } catch (e) {
    throw new BlockSourceError(`params must be JSON: ${(e as Error).message}`);
  }
  if (json === undefined) throw new BlockSourceError('params must be JSON (got a function or undefined)');
  // Still exactly one function expression (the fabric refuses anything else); the JSON has no raw newline, so the
  // block's first line stays line 1.
  return `(m, ctx) => { const params = ${json}; return (${src}\n)(m, ctx, params); }`;
}

/**
 * `async foo(m) { … }` (an object-literal method) is not an expression; make it one. Arrow functions, `function`
 * expressions and classes are left as they are.
 */
function asExpression(src: string): string {
  const trimmed = src.trimStart();
  if (
    /^(async\s+)?function\b/.test(trimmed) ||
    /^(async\s*)?(\(|[A-Za-z_$][\w$]*\s*=>)/.test(trimmed) ||
    /^class\b/.test(trimmed)
  )
    return src;
  const m = /^(async\s+)?(\*\s*)?([A-Za-z_$][\w$]*|\[.*?\]|'[^']*'|"[^"]*")\s*\(/.exec(trimmed);
  if (m) return `${m[1] ?? ''}function ${m[2] ?? ''}${trimmed.slice(m[0].length - 1)}`;
  return src;
}
