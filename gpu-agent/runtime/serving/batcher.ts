// Batching across requests: requests that arrive on one hosted model while it computes for others wait in a batch,
// and the batch runs as one forward pass once it gets the model's turn (batch-run.ts) — what was queued when the
// replica takes its turn, with no gather window, so a request that finds the model idle starts at once, alone.
// Compatible requests: a single forward pass (no generation, no session), no gradients, no barriers (their parties
// are the request's invokes), no parameters named (a parameter swap holds for every row of the pass), and prompts padded to the same length (a batch of one padded width is bit for bit the
// requests alone; padding to another width would change the sums' order). Batches hold at most `maxRows` rows.
import type { BlockChannel, StartRequest } from '../../../protocol/interleave.js';
import { usesGradients } from '../grad/uses-gradients.js';
import { Deadline } from '../interleave/deadline.js';
import type { HostContext } from '../interleave/host-context.js';
import type { RunRequest, RunResult } from '../interleave/request-types.js';
import { runBatch } from './batch-run.js';
import type { BatchEntry } from './batch-run.js';
import type { ModelTurns } from './model-turns.js';

/** Default most rows one batch stacks (a session's trace may hold 64 invokes too). */
export const DEFAULT_BATCH_ROWS = 64;

interface Gathering {
  entries: BatchEntry[];
  rows: number;
  closed: boolean;
}

/** A block naming a parameter (`m.lm_head.weight = t`): a parameter swap holds for every row of the pass. */
const PARAMETER = /\.(weight|bias)\b/;

/** Whether a planned single-pass request may share its forward pass with other requests. */
export function batchable(start: StartRequest): boolean {
  return (
    start.steps === 1 &&
    start.trace === undefined &&
    start.invokes.every(
      (inv) => !usesGradients(inv.source) && !inv.source.includes('barrier') && !PARAMETER.test(inv.source),
    )
  );
}

export class RequestBatcher {
  /** Batches still taking requests, by padded prompt length. */
  private readonly gathering = new Map<number, Gathering>();
  private serial = 0;

  constructor(
    private readonly ctx: HostContext,
    private readonly turns: ModelTurns,
    private readonly maxRows: number,
  ) {}

  /** Runs a batchable request in the batch now gathering (or a new one); its channel opens at once. */
  submit(req: RunRequest, start: StartRequest, open: () => BlockChannel | Promise<BlockChannel>): Promise<RunResult> {
    return new Promise<RunResult>((resolve, reject) => {
      const deadline = new Deadline(req.timeoutMs ?? 60_000, req.signal);
      let channel: Promise<BlockChannel>;
      try {
        channel = Promise.resolve(open());
      } catch (e) {
        channel = Promise.reject(e);
      }
      channel.catch(() => {});
      const entry: BatchEntry = { req, start, channel, deadline, resolve, reject };
      const rows = start.invokes.length;
      const width = Math.max(...start.invokes.map((i) => i.tokens.length));
      let g = this.gathering.get(width);
      if (!g || g.rows + rows > this.maxRows) g = this.open(width);
      const batch = g;
      batch.entries.push(entry);
      batch.rows += rows;
      if (batch.rows >= this.maxRows) this.close(width, batch);
      // Timed out or cancelled while the batch waits for the model: it leaves the batch.
      deadline.expired.catch((e: unknown) => {
        if (batch.closed) return;
        deadline.clear();
        batch.entries.splice(batch.entries.indexOf(entry), 1);
        batch.rows -= rows;
        reject(e);
        void channel.then((c) => c.close()).catch(() => {});
      });
    });
  }

  /** A new batch for prompts of `width` tokens: it closes when first granted the model's turn, then runs. */
  private open(width: number): Gathering {
    const g: Gathering = { entries: [], rows: 0, closed: false };
    this.gathering.set(width, g);
    void this.turns.serveTurn(async (turn) => {
      await turn.take();
      this.close(width, g);
      turn.give();
      await runBatch(this.ctx, g.entries, this.turns, turn, ++this.serial);
    });
    return g;
  }

  private close(width: number, g: Gathering): void {
    g.closed = true;
    if (this.gathering.get(width) === g) this.gathering.delete(width);
  }
}
