// Errors at the user's line. A block travels as its source text, so the fabric's stack names `block-<invoke>.js` with
// lines counted from the block's first line — and under tsx/esbuild the text is the transpiled one. When a request
// fails, the SDK maps each such frame back to the user's file: the block function's position in the script V8 ran
// (the inspector's [[FunctionLocation]] and the script's source, read on the error path only), then through the
// script's source map (tsx, tsc --sourceMap) to the original file and line. The trace call's own frame is recorded
// when the call is made, so the error's stack shows where the user called the fabric.
import { Session } from 'node:inspector';
import { findSourceMap, SourceMap } from 'node:module';
import { sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BLOCK_PREFIX } from '../../protocol/block-wrapper.js';

const SDK_DIR = fileURLToPath(new URL('.', import.meta.url));
// In this repository the SDK runs from dist/ with source maps on, so its frames name client/sdk/*.ts.
const SDK_DIRS = [SDK_DIR, SDK_DIR.replace(`${sep}dist${sep}`, sep)];

interface Origin {
  fn: (...args: never[]) => unknown;
  /** The block's text as sent (with the params wrapper, if any). */
  sent: string;
}

/** The functions behind the blocks of one request, by trace and invoke (the shared block under `null`). */
export class BlockOrigins {
  private readonly traces = new Map<number, Map<number | null, Origin>>();

  record(trace: number, invoke: number | null, block: unknown, sent: string): void {
    if (typeof block !== 'function') return;
    let t = this.traces.get(trace);
    if (t === undefined) {
      t = new Map();
      this.traces.set(trace, t);
    }
    t.set(invoke, { fn: block as Origin['fn'], sent });
  }

  find(trace: number, invoke: number): Origin | undefined {
    const t = this.traces.get(trace);
    return t?.get(invoke) ?? t?.get(null);
  }

  get size(): number {
    return this.traces.size;
  }
}

/** The first frame of the current stack outside the SDK's own files (`    at main (/home/me/study.ts:12:3)`). */
export function callerFrame(): string | null {
  const lines = (new Error().stack ?? '').split('\n').slice(1);
  return (
    lines.find(
      (l) =>
        !SDK_DIRS.some((d) => l.includes(d)) &&
        !/\((node:|internal\/)|at (node:|internal\/)/.test(l) &&
        !/^\s*at (new Promise|Promise\.|process\.processTicksAndRejections)/.test(l),
    ) ?? null
  );
}

export interface Place {
  file: string;
  line: number;
  column: number;
}

/**
 * The remote stack with each `block-<i>.js:L:C` frame followed by where it is in the user's file, and the first such
 * place (null when no frame could be placed: blocks sent as text, or no inspector).
 */
export function placeRemoteStack(
  remoteStack: string,
  remoteMessage: string,
  origins: BlockOrigins,
): { stack: string; first: Place | null } {
  const trace = Number(/^trace (\d+): /.exec(remoteMessage)?.[1] ?? 0);
  let first: Place | null = null;
  const stack = remoteStack.replace(/block-(\d+)\.js:(\d+):(\d+)/g, (whole, inv: string, l: string, c: string) => {
    const origin = origins.find(trace, Number(inv));
    const place = origin ? placeInSource(origin, Number(l), Number(c)) : null;
    if (place === null) return whole;
    first ??= place;
    return `${place.file}:${place.line}:${place.column} [${whole}]`;
  });
  return { stack, first };
}

/** Also maps the `(line L, column C)` that some block errors name (UnawaitedRead, faults) to the user's file. */
export function placeMessage(message: string, origins: BlockOrigins, invoke: number | null): string {
  if (invoke === null) return message;
  const trace = Number(/^trace (\d+): /.exec(message)?.[1] ?? 0);
  const origin = origins.find(trace, invoke);
  if (origin === undefined) return message;
  return message.replace(/\(line (\d+)(?:, column (\d+))?\)/, (whole, l: string, c?: string) => {
    const place = placeInSource(origin, Number(l), Number(c ?? 1));
    return place ? `${whole.slice(0, -1)}; ${place.file}:${place.line}:${place.column})` : whole;
  });
}

/** Where line L, column C (1-based) of the compiled block is in the user's file. */
function placeInSource(origin: Origin, line: number, column: number): Place | null {
  const fnText = Function.prototype.toString.call(origin.fn);
  const script = functionScript(origin.fn);
  if (script === null) return null;
  // Line 1 of the compiled block starts with the wrapper (and the params prelude, when there are params).
  const firstLine = fnText.split('\n', 1)[0]!;
  const at = origin.sent.indexOf(firstLine);
  const lineOneShift = BLOCK_PREFIX.length + Math.max(at, 0);
  const relLine = line - 1;
  const relCol = relLine === 0 ? Math.max(column - 1 - lineOneShift, 0) : column - 1;
  // The function's text is a slice of the script V8 ran: its start there, nearest the reported location.
  const start = nearestIndex(script.source, fnText, offsetOf(script.source, script.line, script.column));
  if (start < 0) return null;
  const startPos = positionOf(script.source, start);
  const gLine = startPos.line + relLine;
  const gCol = relLine === 0 ? startPos.column + relCol : relCol;
  const map = sourceMapOf(script.url, script.source);
  const entry = map?.findEntry(gLine, gCol) as
    | { originalSource?: string; originalLine?: number; originalColumn?: number }
    | undefined;
  if (entry?.originalSource !== undefined && entry.originalLine !== undefined)
    return {
      file: pathOf(entry.originalSource),
      line: entry.originalLine + 1,
      column: (entry.originalColumn ?? 0) + 1,
    };
  return { file: pathOf(script.url), line: gLine + 1, column: gCol + 1 };
}

interface FunctionScript {
  url: string;
  source: string;
  line: number;
  column: number;
}

/** The script that defines `fn` and where (0-based), through the inspector; null where it is not available. */
function functionScript(fn: Origin['fn']): FunctionScript | null {
  let session: Session | undefined;
  const key = `__ndifBlockOrigin${process.pid}`;
  try {
    session = new Session();
    session.connect();
    (globalThis as Record<string, unknown>)[key] = fn;
    const s = session;
    const post = <R>(method: string, params?: object): R => {
      let out: { err: Error | null; r: unknown } | undefined;
      s.post(method, params ?? {}, (err, r) => (out = { err, r }));
      if (out === undefined) throw new Error(`${method} answered asynchronously`);
      if (out.err) throw out.err;
      return out.r as R;
    };
    const obj = post<{ result: { objectId?: string } }>('Runtime.evaluate', { expression: `globalThis.${key}` });
    if (obj.result.objectId === undefined) return null;
    const props = post<{ internalProperties?: Array<{ name: string; value?: { value?: unknown } }> }>(
      'Runtime.getProperties',
      { objectId: obj.result.objectId, ownProperties: true },
    );
    const loc = props.internalProperties?.find((p) => p.name === '[[FunctionLocation]]')?.value?.value as
      | { scriptId: string; lineNumber: number; columnNumber: number }
      | undefined;
    if (loc === undefined) return null;
    const urls = new Map<string, string>();
    s.on('Debugger.scriptParsed', (m: { params: { scriptId: string; url: string } }) =>
      urls.set(m.params.scriptId, m.params.url),
    );
    post('Debugger.enable');
    const { scriptSource } = post<{ scriptSource: string }>('Debugger.getScriptSource', { scriptId: loc.scriptId });
    post('Debugger.disable');
    return { url: urls.get(loc.scriptId) ?? '', source: scriptSource, line: loc.lineNumber, column: loc.columnNumber };
  } catch {
    return null;
  } finally {
    delete (globalThis as Record<string, unknown>)[key];
    session?.disconnect();
  }
}

function sourceMapOf(url: string, source: string): SourceMap | undefined {
  const known = findSourceMap(url) ?? (url.startsWith('file://') ? findSourceMap(fileURLToPath(url)) : undefined);
  if (known) return known;
  const inline = /\/\/# sourceMappingURL=data:application\/json(?:;charset=[^;,]+)?;base64,([A-Za-z0-9+/=]+)\s*$/.exec(
    source,
  );
  if (!inline) return undefined;
  try {
    return new SourceMap(JSON.parse(Buffer.from(inline[1]!, 'base64').toString('utf8')));
  } catch {
    return undefined;
  }
}

function pathOf(urlOrPath: string): string {
  return urlOrPath.startsWith('file://') ? fileURLToPath(urlOrPath) : urlOrPath;
}

function offsetOf(text: string, line: number, column: number): number {
  let at = 0;
  for (let l = 0; l < line && at >= 0; l++) at = text.indexOf('\n', at) + 1;
  return Math.max(at, 0) + column;
}

function positionOf(text: string, offset: number): { line: number; column: number } {
  let line = 0;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: offset - lineStart };
}

/** The occurrence of `needle` in `text` closest to `near`, or -1. */
function nearestIndex(text: string, needle: string, near: number): number {
  let best = -1;
  for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + 1))
    if (best < 0 || Math.abs(i - near) < Math.abs(best - near)) best = i;
  return best;
}
