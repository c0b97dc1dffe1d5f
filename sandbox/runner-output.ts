// In the runner every write to process.stdout / process.stderr is the block's. A write from an invoke's own
// code (and what it started: timers, promises) is that invoke's: serveBlocks runs each invoke in its output
// context (gpu-agent/block/containment/invoke-output.ts). The rest — writes made outside every invoke's context, such as
// from a process event handler — go to the lowest invoke still running. All of these are LOG frames on the
// socket, in order with the block's other messages. Writes that bypass the streams (fs.writeSync(1, …))
// reach the runner's real stdout/stderr pipes instead; see runner-drain.ts.
import type { BlockToHost } from '../protocol/interleave.js';
import { routeWritesOutsideInvokes } from '../gpu-agent/block/containment/invoke-output.js';
import { LineSplitter } from '../gpu-agent/block/containment/line-splitter.js';

export interface OutputCapture {
  /** Emits any unfinished line of the writes outside invokes now (before an invoke's END). */
  flush(): void;
  /** Emits any unfinished line and lets later writes outside invokes reach the real streams again. */
  restore(): void;
}

/** `invoke` says which invoke a write made outside every invoke's context belongs to. */
export function captureOutput(send: (msg: BlockToHost) => void, invoke: () => number): OutputCapture {
  const splitters = {
    stdout: new LineSplitter((line) => send({ kind: 'LOG', invoke: invoke(), stream: 'stdout', line })),
    stderr: new LineSplitter((line) => send({ kind: 'LOG', invoke: invoke(), stream: 'stderr', line })),
  };
  routeWritesOutsideInvokes((stream, text) => splitters[stream].write(text));
  const flush = () => {
    splitters.stdout.flush();
    splitters.stderr.flush();
  };
  return {
    flush,
    restore() {
      flush();
      routeWritesOutsideInvokes(undefined);
    },
  };
}
