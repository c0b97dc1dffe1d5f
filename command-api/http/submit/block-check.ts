// A block is compiled at submission so a syntax error is refused at once, naming the line; it is never run here.
// The wrapper is the runtime's (gpu-agent/block/host/compile.ts), so line numbers are the same as the agent's.
import { checkBlockSource as checkSource } from '../../../block-source/check.js';
import { FabricError } from '../../../protocol/errors.js';

function syntaxError(
  invoke: number | 'shared',
  message: string,
  line?: number,
  column?: number,
  trace?: number,
): FabricError {
  const where = `${invoke === 'shared' ? 'the shared block' : `the block of invoke ${invoke}`}${trace === undefined ? '' : ` of trace ${trace}`}`;
  return new FabricError(
    'BLOCK_SYNTAX_ERROR',
    400,
    `${where} does not compile${line === undefined ? '' : ` (line ${line}${column === undefined ? '' : `, column ${column}`})`}: ${message}`,
    {
      hint: 'send the source of an async function expression: async (m, ctx) => { … }',
      details: {
        invoke,
        ...(trace === undefined ? {} : { trace }),
        ...(line === undefined ? {} : { line }),
        ...(column === undefined ? {} : { column }),
      },
    },
  );
}

/** Throws BLOCK_SYNTAX_ERROR when `source` is not exactly one function expression. Runs nothing. */
export function checkBlockSource(source: string, invoke: number | 'shared', trace?: number): void {
  const problem = checkSource(source);
  if (problem) throw syntaxError(invoke, problem.message, problem.line, problem.column, trace);
}
