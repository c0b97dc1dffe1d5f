// Prefix reuse within a session: the traces of a session that feed the same inputs compute the same forward pass up
// to the first point any of their invokes intervenes at (waits, swaps, skips, caches). Each such pass leaves the
// table it had there — its position and the tensors live at it, before anything was served — here, keyed by the
// feeds' bytes; a later pass of the session with the same feeds starts from the furthest snapshot at or before its own
// first point instead of from the embeddings. Only a pristine prefix is stored or reused: a single forward pass (no
// generation), not recorded for a backward, no parameter swapped, no module skipped and no point cached before the
// snapshot's position. The snapshot's tensors are the pass's own segment outputs, which nothing writes in place (a swap
// copies a tensor it does not own), so reusing one is bit-identical to computing it again. The store holds at most
// `limitBytes` of distinct tensors (the least recently used snapshots go first); it lives as long as its session.
import { createHash } from 'node:crypto';
import type { OrtTensor } from '../ort/session.js';

export interface PrefixSnapshot {
  key: string;
  /** The pass's position (node index) when the snapshot was taken. */
  pos: number;
  table: ReadonlyMap<string, OrtTensor>;
}

/** Default bytes of snapshots one session keeps (the agent's NDIF_AGENT_PREFIX_CACHE). */
export const DEFAULT_PREFIX_CACHE_BYTES = 256 * 2 ** 20;

export class PrefixStore {
  /** Least recently used first. */
  private readonly entries: PrefixSnapshot[] = [];
  /**
   * How many snapshots hold each tensor: a later snapshot of the same pass shares the earlier one's tensors (its KV
   * outputs, its mask), and a tensor counts once towards the limit however many hold it.
   */
  private readonly refs = new Map<OrtTensor, number>();
  private held = 0;
  /** Every tensor some snapshot holds or held (never handed to a block as a view: a trusted block could write into it). */
  private readonly kept = new WeakSet<OrtTensor>();

  constructor(readonly limitBytes: number) {}

  /** Bytes of the distinct tensors the snapshots hold. */
  get bytes(): number {
    return this.held;
  }

  get size(): number {
    return this.entries.length;
  }

  /** The snapshot of `key` furthest along at or before `cut` that `usable` accepts (it becomes the most recently used). */
  find(key: string, cut: number, usable: (pos: number) => boolean): PrefixSnapshot | undefined {
    let best: PrefixSnapshot | undefined;
    for (const e of this.entries)
      if (e.key === key && e.pos <= cut && (!best || e.pos > best.pos) && usable(e.pos)) best = e;
    if (best) {
      this.entries.splice(this.entries.indexOf(best), 1);
      this.entries.push(best);
    }
    return best;
  }

  /**
   * Keeps the table as it is at `pos` (a copy of the map; the tensors are shared), dropping the least recently used
   * snapshots until it fits; a table larger than the limit on its own is not kept.
   */
  put(key: string, pos: number, table: ReadonlyMap<string, OrtTensor>): void {
    if (this.entries.some((e) => e.key === key && e.pos === pos)) return;
    const tensors = [...new Set(table.values())];
    if (tensors.reduce((n, t) => n + tensorBytes(t), 0) > this.limitBytes) return;
    const fresh = () => tensors.reduce((n, t) => n + (this.refs.has(t) ? 0 : tensorBytes(t)), 0);
    while (this.held + fresh() > this.limitBytes) this.drop(this.entries.shift()!);
    this.held += fresh();
    for (const t of tensors) {
      this.refs.set(t, (this.refs.get(t) ?? 0) + 1);
      this.kept.add(t);
    }
    this.entries.push({ key, pos, table: new Map(table) });
  }

  /** Whether a snapshot holds (or held) `t`. */
  holds(t: OrtTensor): boolean {
    return this.kept.has(t);
  }

  private drop(e: PrefixSnapshot): void {
    for (const t of new Set(e.table.values())) {
      const n = this.refs.get(t)! - 1;
      if (n > 0) this.refs.set(t, n);
      else {
        this.refs.delete(t);
        this.held -= tensorBytes(t);
      }
    }
  }
}

/** The key of a pass's inputs: every feed's name, type, shape and bytes. */
export function feedsKey(feeds: Record<string, OrtTensor>): string {
  const h = createHash('sha256');
  for (const name of Object.keys(feeds).sort()) {
    const t = feeds[name]!;
    h.update(`${name}|${t.type}|${t.dims.join(',')}|`);
    const d = t.data;
    if (ArrayBuffer.isView(d)) h.update(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
    else h.update(JSON.stringify(d));
  }
  return h.digest('hex');
}

/** A tensor's bytes: its typed array's (a tensor without one, as a string tensor, counts 4 bytes an element). */
function tensorBytes(t: OrtTensor): number {
  return ArrayBuffer.isView(t.data) ? t.data.byteLength : t.size * 4;
}
