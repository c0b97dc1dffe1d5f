// Which in-process request's blocks are running their own code: the host handed them a message (START, a value)
// and they have not answered yet. When the agent must stop a trusted block it cannot see (memory runs out, the event
// loop stalls), the culprit is the one entered last: the code that runs now is the code that was resumed last. A
// block resumed by its own timer is not seen here; then the guess is the request whose blocks were entered last.
import type { BlockChannel } from '../../protocol/interleave.js';

export class BlockTurns {
  private seq = 0;
  /** Request id → the turn its blocks were last entered (absent: they answered since). */
  private readonly entered = new Map<string, number>();
  /** Request id → the turn its blocks were last entered, answered or not. */
  private readonly lastEntered = new Map<string, number>();
  /** Told each time a request's blocks are entered (the watchdog names that request if the process must die). */
  onEnter: ((requestId: string) => void) | undefined;

  /** The channel to a request's in-process blocks, noting when they are entered and when they answer. */
  watch(requestId: string, channel: BlockChannel): BlockChannel {
    return {
      send: (msg) => {
        const n = ++this.seq;
        this.entered.set(requestId, n);
        this.lastEntered.set(requestId, n);
        this.onEnter?.(requestId);
        channel.send(msg);
      },
      receive: async () => {
        const msg = await channel.receive();
        if (msg.kind !== 'LOG' && msg.kind !== 'REPORT') this.entered.delete(requestId);
        return msg;
      },
      close: () => channel.close(),
    };
  }

  /** Of `candidates`, the request whose blocks run their own code and were entered last (else entered last at all). */
  last(candidates: string[]): string | undefined {
    const pick = (m: Map<string, number>) => {
      let best: string | undefined;
      for (const id of candidates) {
        const n = m.get(id);
        if (n !== undefined && (best === undefined || n > m.get(best)!)) best = id;
      }
      return best;
    };
    return pick(this.entered) ?? pick(this.lastEntered) ?? candidates.at(-1);
  }

  forget(requestId: string): void {
    this.entered.delete(requestId);
    this.lastEntered.delete(requestId);
  }
}
