// Raw writes to fd 1 and 2 (fs.writeSync(1, …)) bypass the runner's stream capture and travel on its
// stdout/stderr pipes, which the agent reads apart from the socket: an END on the socket can arrive before
// lines written earlier on a pipe. So, before the last invoke's END, the runner writes a drain marker on both
// pipes (after every earlier write, in pipe order), and the agent delivers that END only once it has read
// both markers (RunnerProcess.rawOutputDrained, SandboxSession), or the runner exited, or a short wait
// passed. A block that writes the marker itself only cuts its own wait short; the marker is never a LOG line.
import { writeSync } from 'node:fs';

export const DRAIN_MARKER = '\u0000ndif-runner-drained\u0000';

/** Runner side: the marker on fd 1 and fd 2. A closed or full pipe loses it; the agent's wait is bounded. */
export function writeDrainMarkers(): void {
  for (const fd of [1, 2]) {
    try {
      writeSync(fd, DRAIN_MARKER);
    } catch {
      /* the block closed its fd, or the pipe is full: the agent stops waiting after its bound */
    }
  }
}

/** Agent side: passes a pipe's text on without the markers, and says when one went by (in order). */
export class DrainMarkerScanner {
  private held = '';

  constructor(
    private readonly pass: (text: string) => void,
    private readonly onMarker: () => void,
  ) {}

  write(chunk: string): void {
    let text = this.held + chunk;
    this.held = '';
    for (;;) {
      const at = text.indexOf(DRAIN_MARKER);
      if (at < 0) break;
      if (at > 0) this.pass(text.slice(0, at));
      this.onMarker();
      text = text.slice(at + DRAIN_MARKER.length);
    }
    // Keep back a tail that may be the start of a marker split across chunks.
    const start = text.lastIndexOf(DRAIN_MARKER[0]!, text.length - 1);
    const keep =
      start >= 0 && text.length - start < DRAIN_MARKER.length && DRAIN_MARKER.startsWith(text.slice(start))
        ? text.length - start
        : 0;
    if (text.length - keep > 0) this.pass(text.slice(0, text.length - keep));
    this.held = text.slice(text.length - keep);
  }

  /** The pipe ended: what was held back was not a marker after all. */
  end(): void {
    if (this.held) this.pass(this.held);
    this.held = '';
  }
}
