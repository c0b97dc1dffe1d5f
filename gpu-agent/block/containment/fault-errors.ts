// The BlockErrors of faults a block causes outside its own call stack (invoke-guard.ts) and of reads it forgot
// to await. Each names the user's line when the error carries one (the frames of `block-<invoke>.js`).
import type { BlockError } from '../../../protocol/interleave.js';
import { InterleaveError } from '../api/block-errors.js';
import { errorText, userStack } from '../host/compile.js';
import type { FaultKind } from './invoke-guard.js';

/** ` (line 3)` for the first frame of the block's own file in `stack`, or ''. */
export function lineOf(stack: string | undefined, invoke: number): string {
  const m = new RegExp(`block-${invoke}\\.js:(\\d+)(?::(\\d+))?`).exec(stack ?? '');
  return m ? ` (line ${m[1]}${m[2] ? `, column ${m[2]}` : ''})` : '';
}

export function faultError(error: unknown, kind: FaultKind, invoke: number): BlockError {
  const stack = userStack(error, invoke);
  const what =
    kind === 'UnhandledRejection'
      ? 'a promise the block created was rejected and nothing handled it'
      : 'a callback the block scheduled (a timer, an event or a microtask) threw';
  const where = lineOf(stack, invoke);
  const hint =
    kind === 'UnhandledRejection' ? '; await the promise, or give it a .catch()' : '; catch errors inside the callback';
  return {
    phase: 'execute',
    type: kind,
    message: `${what}${where}: ${errorText(error)}${where === '' && !(error instanceof Error) ? ' (the value thrown is not an Error, so it carries no line)' : ''}${hint}`,
    ...(stack ? { stack } : {}),
  };
}

export interface LeftRead {
  addr: string;
  awaited: boolean;
  settled: boolean;
  origin: Error | undefined;
}

/** The block returned with reads it never awaited, or that were still pending. */
export function unawaitedReadError(left: LeftRead[], invoke: number): InterleaveError {
  const r = left.find((x) => !x.awaited) ?? left[0]!;
  const stack = userStack(r.origin, invoke);
  const at = lineOf(stack, invoke);
  const more =
    left.length > 1
      ? ` (${left.length - 1} more: ${left
          .filter((x) => x !== r)
          .slice(0, 3)
          .map((x) => x.addr)
          .join(', ')}${left.length > 4 ? ', …' : ''})`
      : '';
  const message = !r.awaited
    ? `the read of ${r.addr}${at} was never awaited: the block returned without its value${more}. Put \`await\` before the read (\`const h = await m.….output\`), or remove it`
    : `the read of ${r.addr}${at} was still pending when the block returned: something awaited it, but the block did not wait for that (an async function started without \`await\`?)${more}. Await it before returning`;
  const e = new InterleaveError('UnawaitedRead', message);
  if (stack)
    e.stack = `InterleaveError: ${message}\n${stack
      .split('\n')
      .filter((l) => /^\s+at /.test(l))
      .join('\n')}`;
  return e;
}

type LateFaultReporter = (requestId: string, invoke: number, error: BlockError) => void;

let late: LateFaultReporter = (requestId, invoke, error) => {
  process.stderr.write(
    `[ndif] request ${requestId} invoke ${invoke}: ${error.type} after the request ended (dropped): ${error.message.split('\n')[0]}\n`,
  );
};

/** Where faults of a block whose request already ended go (the agent logs them). */
export function setLateFaultReporter(r: LateFaultReporter): void {
  late = r;
}

export function reportLateFault(requestId: string, invoke: number, error: BlockError): void {
  try {
    late(requestId, invoke, error);
  } catch {
    // A reporter that fails must not turn a contained fault into an uncontained one.
  }
}
