// What a block's source must be: exactly one function expression (`async (m, ctx) => { … }`, `function (m) { … }`),
// and nothing else. The runtime compiles a block inside a wrapper (block-wrapper.ts);
// a source that closes the wrapper early (`async (m) => 1\n); }); globalThis.X = 1; (function () { return (…`)
// or is a sequence (`(f, sideEffect(), g)`) would run top-level code when the wrapper is evaluated. The check
// parses the wrapped text with a real JavaScript parser (acorn) and accepts it only when the wrapper's shape is
// intact and what it returns is a single function node. Nothing is evaluated. Used at submission (command API) and
// by the runtime before any block is compiled (trusted and sandboxed alike). It lives outside protocol/ (schemas and
// codecs only) because it needs a parser (acorn) and V8's own compile check (node:vm).
import { Script } from 'node:vm';
import { parse, type Node } from 'acorn';
import { BLOCK_PREFIX, BLOCK_SUFFIX } from '../protocol/block-wrapper.js';

export { BLOCK_PREFIX, BLOCK_SUFFIX };

export interface BlockSourceProblem {
  /** `syntax`: it does not parse; `shape`: it parses but is not exactly one function expression. */
  kind: 'syntax' | 'shape';
  message: string;
  /** 1-based, in the user's source. */
  line?: number;
  column?: number;
}

function describe(node: Node): string {
  switch (node.type) {
    case 'Literal':
      return 'a literal value';
    case 'Identifier':
      return 'a name';
    case 'SequenceExpression':
      return 'a sequence of expressions (a, b, …)';
    case 'CallExpression':
      return 'a function call';
    case 'ClassExpression':
      return 'a class';
    case 'ObjectExpression':
      return 'an object';
    case 'ArrayExpression':
      return 'an array';
    default:
      return `a ${node.type
        .replace(/Expression$/, ' expression')
        .replace(/([a-z])([A-Z])/g, '$1 $2')
        .toLowerCase()}`;
  }
}

function at(node: Node, source: string): { line: number; column: number } {
  // Positions are in the wrapped text; the source starts at column PREFIX.length of line 1.
  const offset = Math.max(0, node.start - BLOCK_PREFIX.length);
  const before = source.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - (before.lastIndexOf('\n') + 1) + 1;
  return { line, column };
}

/** Undefined when `source` is exactly one function expression; otherwise what is wrong with it, and where. */
export function blockSourceProblem(source: string): BlockSourceProblem | undefined {
  const wrapped = `${BLOCK_PREFIX}${source}${BLOCK_SUFFIX}`;
  let program: Node & { body: Node[] };
  try {
    program = parse(wrapped, { ecmaVersion: 'latest', sourceType: 'script', locations: true }) as Node & {
      body: Node[];
    };
  } catch (e) {
    const err = e as SyntaxError & { loc?: { line: number; column: number } };
    const loc = err.loc;
    const line = loc?.line;
    const column =
      loc === undefined ? undefined : loc.line === 1 ? loc.column - BLOCK_PREFIX.length + 1 : loc.column + 1;
    const message = err.message.replace(/\s*\(\d+:\d+\)$/, '');
    if (line !== undefined && line > source.split('\n').length) {
      return {
        kind: 'syntax',
        message: `${message} (the source ends before the function does)`,
        line: source.split('\n').length,
      };
    }
    return {
      kind: 'syntax',
      message,
      ...(line === undefined ? {} : { line }),
      ...(column === undefined || column < 1 ? {} : { column }),
    };
  }
  const outside = (why: string, node?: Node): BlockSourceProblem => ({
    kind: 'shape',
    message: `the block must be a function expression such as \`async (m, ctx) => { … }\` and nothing else: ${why}`,
    ...(node ? at(node, source) : {}),
  });
  const stmt = program.body.length === 1 ? (program.body[0] as Node & { expression?: Node }) : undefined;
  const wrapper =
    stmt?.type === 'ExpressionStatement'
      ? (stmt.expression as Node & { body?: Node & { body: Node[] }; params?: Node[] })
      : undefined;
  const inner = wrapper?.type === 'FunctionExpression' ? wrapper.body?.body : undefined;
  const ret =
    inner !== undefined && inner.length === 2 && inner[1]!.type === 'ReturnStatement'
      ? (inner[1] as Node & { argument: Node | null })
      : undefined;
  if (ret === undefined || ret.argument === null || wrapper?.params?.length !== 1) {
    const extra = program.body.length > 1 ? program.body[1] : undefined;
    return outside(
      'it is not a function expression alone (the source closes the function and goes on after it)',
      extra,
    );
  }
  const fn = ret.argument;
  if (fn.type !== 'ArrowFunctionExpression' && fn.type !== 'FunctionExpression') {
    return outside(`it is not a function expression but ${describe(fn)}`, fn);
  }
  return undefined;
}

/**
 * V8's own verdict on the wrapped source (what the runtime would say when compiling it): its message, line and
 * column, or undefined when it compiles. Compiling a Script parses it; nothing is evaluated.
 */
export function v8SyntaxProblem(source: string): BlockSourceProblem | undefined {
  try {
    new Script(`${BLOCK_PREFIX}${source}${BLOCK_SUFFIX}`, { filename: 'block.js' });
    return undefined;
  } catch (e) {
    const err = e as Error;
    const lines = (err.stack ?? '').split('\n');
    const line = /^block\.js:(\d+)/.exec(lines[0] ?? '')?.[1];
    let column: number | undefined;
    const caret = lines[2]?.indexOf('^');
    if (line !== undefined && caret !== undefined && caret >= 0)
      column = Number(line) === 1 ? caret - BLOCK_PREFIX.length + 1 : caret + 1;
    return {
      kind: 'syntax',
      message: `${err.name}: ${err.message}`,
      ...(line === undefined ? {} : { line: Number(line) }),
      ...(column !== undefined && column >= 1 ? { column } : {}),
    };
  }
}

/**
 * The whole check: the shape (acorn), and for a source that does not parse, V8's message (the one Node users know).
 * A source V8 accepts but the parser cannot read (syntax newer than it) is refused too: its shape cannot be verified.
 */
export function checkBlockSource(source: string): BlockSourceProblem | undefined {
  if (accepted.has(source)) {
    // Most recently used last: the Map's order is the eviction order.
    accepted.delete(source);
    accepted.add(source);
    return undefined;
  }
  const problem = checkUncached(source);
  if (problem === undefined && source.length <= ACCEPTED_MAX_CHARS) {
    accepted.add(source);
    if (accepted.size > ACCEPTED_MAX) accepted.delete(accepted.values().next().value!);
  }
  return problem;
}

/**
 * Sources that passed, most recently used last: the check is a pure function of the source, and the same blocks come
 * again and again (a parse with acorn took ~1 ms of a trivial request, at submission and again in the agent).
 * Bounded: at most ACCEPTED_MAX sources of up to ACCEPTED_MAX_CHARS characters (4 MiB of strings).
 */
const accepted = new Set<string>();
const ACCEPTED_MAX = 256;
const ACCEPTED_MAX_CHARS = 16 * 1024;

function checkUncached(source: string): BlockSourceProblem | undefined {
  const problem = blockSourceProblem(source);
  if (problem === undefined || problem.kind === 'shape') return problem;
  return (
    v8SyntaxProblem(source) ?? {
      ...problem,
      message: `${problem.message} (the fabric cannot verify that this is exactly one function expression)`,
    }
  );
}

/** The user-facing text of a problem, as BLOCK_SYNTAX_ERROR messages say it. */
export function blockSourceMessage(p: BlockSourceProblem): string {
  if (p.kind === 'shape') return p.message;
  const where = p.line === undefined ? '' : ` (line ${p.line}${p.column === undefined ? '' : `, column ${p.column}`})`;
  return `the block does not compile${where}: ${/^\w*Error: /.test(p.message) ? p.message : `SyntaxError: ${p.message}`}`;
}
