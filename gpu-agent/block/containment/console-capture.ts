// The `console` a block sees: each call becomes LOG lines for that invoke (log/info/debug → stdout,
// warn/error → stderr). Nothing reaches the process's own stdout, so concurrent requests never mix output.
import { formatWithOptions } from 'node:util';

export type LogSink = (stream: 'stdout' | 'stderr', line: string) => void;

const MAX_LINE = 16 * 1024;

export function captureConsole(sink: LogSink): Console {
  const emit =
    (stream: 'stdout' | 'stderr') =>
    (...args: unknown[]) => {
      const text = formatWithOptions({ depth: 4, breakLength: Infinity }, ...args);
      for (const line of text.split('\n'))
        sink(stream, line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}… (${line.length} chars)` : line);
    };
  const out = emit('stdout');
  const err = emit('stderr');
  const counts = new Map<string, number>();
  const timers = new Map<string, number>();
  const c = {
    log: out,
    info: out,
    debug: out,
    trace: out,
    dir: (v: unknown) => out(v),
    table: (v: unknown) => out(v),
    warn: err,
    error: err,
    assert: (cond: unknown, ...args: unknown[]) => {
      if (!cond) err('Assertion failed', ...args);
    },
    count: (label = 'default') => {
      const n = (counts.get(label) ?? 0) + 1;
      counts.set(label, n);
      out(`${label}: ${n}`);
    },
    time: (label = 'default') => void timers.set(label, performance.now()),
    timeEnd: (label = 'default') => {
      const t = timers.get(label);
      if (t !== undefined) out(`${label}: ${(performance.now() - t).toFixed(3)}ms`);
      timers.delete(label);
    },
  };
  return c as unknown as Console;
}
