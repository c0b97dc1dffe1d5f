// Compiles a block's source text into its function, and turns what it throws into a BlockError whose stack holds
// only the user's frames. The source is compiled as a script named `block-<invoke>.js` with line numbers kept
// (the wrapper sits on the first line), and `console` bound to the invoke's own capture.
import { Script } from 'node:vm';
import type { BlockError } from '../../protocol/interleave.js';
import { InterleaveError } from './block-errors.js';

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
export function compileBlock(source: string, invoke: number, consoleObj: unknown): BlockFunction {
  const filename = blockFileName(invoke);
  let factory: (c: unknown) => unknown;
  try {
    const script = new Script(`(function (console) { "use strict"; return (${source}\n); })`, { filename });
    factory = script.runInThisContext() as (c: unknown) => unknown;
  } catch (e) {
    const err = e as Error;
    const line = /block-\d+\.js:(\d+)/.exec(err.stack ?? '')?.[1];
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
    throw new BlockCompileError({ phase: 'deserialize', type: 'BlockSyntaxError', message: `evaluating the block failed: ${(e as Error).message}`, stack: userStack(e, invoke) });
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

/** `Name: message` plus only the frames inside the block's own file. */
export function userStack(e: unknown, invoke: number): string | undefined {
  if (!(e instanceof Error) || typeof e.stack !== 'string') return undefined;
  const file = blockFileName(invoke);
  const lines = e.stack.split('\n');
  const firstFrame = lines.findIndex((l) => /^\s+at /.test(l));
  const head = firstFrame < 0 ? lines : lines.slice(0, firstFrame);
  const frames = (firstFrame < 0 ? [] : lines.slice(firstFrame)).filter((l) => l.includes(file));
  return [...head, ...frames].join('\n');
}

/** What a block threw, as the protocol's BlockError. */
export function toBlockError(e: unknown, invoke: number): BlockError {
  if (e instanceof InterleaveError) return { phase: 'execute', type: e.type, message: e.message, stack: userStack(e, invoke) };
  if (e instanceof Error) return { phase: 'execute', type: 'BlockError', message: `${e.name}: ${e.message}`, stack: userStack(e, invoke) };
  let text: string;
  try {
    text = typeof e === 'string' ? e : JSON.stringify(e) ?? String(e);
  } catch {
    text = String(e);
  }
  return { phase: 'execute', type: 'BlockError', message: `the block threw a non-Error value: ${text}` };
}
