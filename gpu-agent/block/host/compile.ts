// Compiles a block's source text into its function, and turns what it throws into a BlockError whose stack holds
// only the user's frames. The source is compiled as a script named `block-<invoke>.js` with line numbers kept
// (the wrapper sits on the first line), and `console` bound to the invoke's own capture. The source was checked
// to be exactly one function expression before it gets here (block-source/check.ts: by the runtime, before START).
import { Script } from 'node:vm';
import type { BlockError } from '../../../protocol/interleave.js';
import { BLOCK_PREFIX, BLOCK_SUFFIX } from '../../../protocol/block-wrapper.js';
import { InterleaveError } from '../api/block-errors.js';

export type BlockFunction = (m: unknown, ctx: unknown) => unknown;

export function blockFileName(invoke: number): string {
  return `block-${invoke}.js`;
}

export class BlockCompileError extends Error {
  constructor(readonly blockError: BlockError) {
    super(blockError.message);
  }
}

/** Compiles `async (m, ctx) => { … }`; throws BlockCompileError (BlockSyntaxError) when it is not one. */
export function compileBlock(
  source: string,
  invoke: number,
  consoleObj: unknown,
  filename = blockFileName(invoke),
): BlockFunction {
  let factory: (c: unknown) => unknown;
  try {
    const script = new Script(`${BLOCK_PREFIX}${source}${BLOCK_SUFFIX}`, { filename });
    factory = script.runInThisContext() as (c: unknown) => unknown;
  } catch (e) {
    const err = e as Error;
    const line = /(?:block|edit)-\d+\.js:(\d+)/.exec(err.stack ?? '')?.[1];
    throw new BlockCompileError({
      phase: 'deserialize',
      type: 'BlockSyntaxError',
      message: `the block does not compile${line ? ` (line ${line})` : ''}: ${err.message}`,
    });
  }
  let fn: unknown;
  try {
    fn = factory(consoleObj);
  } catch (e) {
    throw new BlockCompileError({
      phase: 'deserialize',
      type: 'BlockSyntaxError',
      message: `evaluating the block failed: ${(e as Error).message}`,
      stack: userStack(e, invoke),
    });
  }
  if (typeof fn !== 'function') {
    throw new BlockCompileError({
      phase: 'deserialize',
      type: 'BlockSyntaxError',
      message: `the block must be a function expression such as \`async (m, ctx) => { … }\`; it evaluated to ${fn === null ? 'null' : typeof fn}`,
    });
  }
  return fn as BlockFunction;
}

/** Reads `f()` of a value the block made, which may be a Proxy or have throwing getters; `fallback` if it throws. */
function safely<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}

const isError = (e: unknown): e is Error => safely(() => e instanceof Error, false);

/** A one-line text of anything a block threw or rejected with; never throws. */
export function errorText(e: unknown): string {
  if (isError(e)) {
    const name = safely(() => String(e.name), 'Error');
    const message = safely(() => String(e.message), '(its message cannot be read)');
    return `${name}: ${message}`;
  }
  if (typeof e === 'string') return e;
  return (
    safely(() => JSON.stringify(e) ?? String(e), '') ||
    safely(() => String(e), `a value of type ${typeof e} that cannot be shown`)
  );
}

/** `Name: message` plus only the frames inside the block's own file (undefined when there is no stack); never throws. */
export function userStack(e: unknown, invoke: number): string | undefined {
  if (!isError(e)) return undefined;
  const stack = safely(() => e.stack, undefined);
  if (typeof stack !== 'string') return undefined;
  const file = blockFileName(invoke);
  const lines = stack.split('\n');
  const firstFrame = lines.findIndex((l) => /^\s+at /.test(l));
  const head = firstFrame < 0 ? lines : lines.slice(0, firstFrame);
  const frames = (firstFrame < 0 ? [] : lines.slice(firstFrame)).filter((l) => l.includes(file));
  return [...head, ...frames].join('\n');
}

/** What a block threw, as the protocol's BlockError; never throws, whatever the value is. */
export function toBlockError(e: unknown, invoke: number): BlockError {
  if (safely(() => e instanceof InterleaveError, false)) {
    const ie = e as InterleaveError;
    return { phase: 'execute', type: ie.type, message: ie.message, stack: userStack(e, invoke) };
  }
  if (isError(e)) return { phase: 'execute', type: 'BlockError', message: errorText(e), stack: userStack(e, invoke) };
  return { phase: 'execute', type: 'BlockError', message: `the block threw a non-Error value: ${errorText(e)}` };
}
