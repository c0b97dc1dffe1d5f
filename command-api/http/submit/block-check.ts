// A block is compiled at submission so a syntax error is refused at once, naming the line; it is never run here.
// The wrapper is the runtime's (gpu-agent/block/compile.ts), so line numbers are the same as the agent's.
import { Script } from 'node:vm';
import { FabricError } from '../../../protocol/errors.js';

const PREFIX = '(function (console) { "use strict"; return (';

/** Leading whitespace and comments. */
const LEADING = /^(?:\s+|\/\/[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/;
/** `async (…) =>`, `(…) =>`, `x =>`, `async x =>`, `function (…) {…}`, `async function …`. */
const FUNCTION_START = /^(?:async\b\s*)?(?:function\b|\(|[A-Za-z_$][\w$]*\s*=>)/;

function syntaxError(invoke: number | 'shared', message: string, line?: number, column?: number): FabricError {
  const where = invoke === 'shared' ? 'the shared block' : `the block of invoke ${invoke}`;
  return new FabricError('BLOCK_SYNTAX_ERROR', 400, `${where} does not compile${line === undefined ? '' : ` (line ${line}${column === undefined ? '' : `, column ${column}`})`}: ${message}`, {
    hint: 'send the source of an async function expression: async (m, ctx) => { … }',
    details: { invoke, ...(line === undefined ? {} : { line }), ...(column === undefined ? {} : { column }) },
  });
}

/** Throws BLOCK_SYNTAX_ERROR when `source` does not parse as a function expression. Runs nothing. */
export function checkBlockSource(source: string, invoke: number | 'shared'): void {
  const start = source.replace(LEADING, '');
  if (!FUNCTION_START.test(start)) {
    throw syntaxError(invoke, `it is not a function expression (it starts with ${JSON.stringify(start.slice(0, 30))})`);
  }
  try {
    // Compiling a Script parses it (and pre-parses its inner functions for early errors); nothing is evaluated.
    new Script(`${PREFIX}${source}\n); })`, { filename: 'block.js' });
  } catch (e) {
    const err = e as Error;
    const lines = (err.stack ?? '').split('\n');
    const line = /^block\.js:(\d+)/.exec(lines[0] ?? '')?.[1];
    let column: number | undefined;
    const caret = lines[2]?.indexOf('^');
    if (line !== undefined && caret !== undefined && caret >= 0) column = Number(line) === 1 ? caret - PREFIX.length + 1 : caret + 1;
    throw syntaxError(invoke, `${err.name}: ${err.message}`, line === undefined ? undefined : Number(line), column !== undefined && column >= 1 ? column : undefined);
  }
}
