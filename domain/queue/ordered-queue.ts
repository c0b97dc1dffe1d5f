// An order-statistic AVL tree keyed by OrderKey, with an id → node map: enqueue, remove, head and position
// lookup in O(log n). Positions come from the order itself (the number of keys before this one), never from
// a counter of arrivals. Deterministic (no randomised balancing), so a rebuilt queue has the same shape.
import { compareKeys, type OrderKey } from './order-key.js';

interface Node<T> {
  key: OrderKey;
  id: string;
  value: T;
  left: Node<T> | null;
  right: Node<T> | null;
  parent: Node<T> | null;
  height: number;
  size: number;
}

const h = (n: Node<unknown> | null): number => (n === null ? 0 : n.height);
const sz = (n: Node<unknown> | null): number => (n === null ? 0 : n.size);

export interface QueueEntry<T> {
  id: string;
  key: OrderKey;
  value: T;
}

export class OrderedQueue<T> {
  private root: Node<T> | null = null;
  private readonly byId = new Map<string, Node<T>>();

  get size(): number {
    return this.byId.size;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  get(id: string): QueueEntry<T> | undefined {
    const n = this.byId.get(id);
    return n === undefined ? undefined : { id, key: n.key, value: n.value };
  }

  /** Adds an entry; an id already queued is moved to the new key. */
  enqueue(id: string, key: OrderKey, value: T): void {
    if (this.byId.has(id)) this.remove(id);
    const node: Node<T> = { key, id, value, left: null, right: null, parent: null, height: 1, size: 1 };
    this.byId.set(id, node);
    if (this.root === null) {
      this.root = node;
      return;
    }
    let cur = this.root;
    for (;;) {
      const c = compareKeys(key, cur.key) || (id < cur.id ? -1 : id > cur.id ? 1 : 0);
      if (c < 0) {
        if (cur.left === null) {
          cur.left = node;
          break;
        }
        cur = cur.left;
      } else {
        if (cur.right === null) {
          cur.right = node;
          break;
        }
        cur = cur.right;
      }
    }
    node.parent = cur;
    this.rebalanceUp(cur);
  }

  /** Removes an entry; false when the id is not queued. */
  remove(id: string): boolean {
    const node = this.byId.get(id);
    if (node === undefined) return false;
    this.byId.delete(id);
    let start: Node<T> | null;
    if (node.left !== null && node.right !== null) {
      // Swap in the in-order successor's contents, then unlink the successor (it has no left child).
      let s = node.right;
      while (s.left !== null) s = s.left;
      node.key = s.key;
      node.id = s.id;
      node.value = s.value;
      this.byId.set(s.id, node);
      start = s.parent;
      this.replace(s, s.right);
    } else {
      start = node.parent;
      this.replace(node, node.left ?? node.right);
    }
    if (start !== null) this.rebalanceUp(start);
    return true;
  }

  /** The first entry in queue order, without removing it. */
  peek(): QueueEntry<T> | undefined {
    let n = this.root;
    if (n === null) return undefined;
    while (n.left !== null) n = n.left;
    return { id: n.id, key: n.key, value: n.value };
  }

  /** Removes and returns the first entry. */
  dequeue(): QueueEntry<T> | undefined {
    const first = this.peek();
    if (first !== undefined) this.remove(first.id);
    return first;
  }

  /** 0-based position of the entry in queue order (0 = next), or -1 when the id is not queued. */
  position(id: string): number {
    const node = this.byId.get(id);
    if (node === undefined) return -1;
    let pos = sz(node.left);
    let n = node;
    while (n.parent !== null) {
      if (n === n.parent.right) pos += sz(n.parent.left) + 1;
      n = n.parent;
    }
    return pos;
  }

  /** The entry at a 0-based position. */
  at(position: number): QueueEntry<T> | undefined {
    let n = this.root;
    let p = position;
    while (n !== null) {
      const l = sz(n.left);
      if (p < l) n = n.left;
      else if (p === l) return { id: n.id, key: n.key, value: n.value };
      else {
        p -= l + 1;
        n = n.right;
      }
    }
    return undefined;
  }

  /** The first entry whose key is >= `key` in queue order (e.g. the first of a rank). */
  firstAtOrAfter(key: OrderKey): QueueEntry<T> | undefined {
    let n = this.root;
    let best: Node<T> | null = null;
    while (n !== null) {
      if (compareKeys(n.key, key) >= 0) {
        best = n;
        n = n.left;
      } else n = n.right;
    }
    return best === null ? undefined : { id: best.id, key: best.key, value: best.value };
  }

  /** The number of entries whose key is < `key` (where an entry with that key would go). */
  countBefore(key: OrderKey): number {
    let n = this.root;
    let count = 0;
    while (n !== null) {
      if (compareKeys(n.key, key) < 0) {
        count += sz(n.left) + 1;
        n = n.right;
      } else n = n.left;
    }
    return count;
  }

  /** The last entry whose key is < `key` (e.g. the last of the rank before). */
  lastBefore(key: OrderKey): QueueEntry<T> | undefined {
    let n = this.root;
    let best: Node<T> | null = null;
    while (n !== null) {
      if (compareKeys(n.key, key) < 0) {
        best = n;
        n = n.right;
      } else n = n.left;
    }
    return best === null ? undefined : { id: best.id, key: best.key, value: best.value };
  }

  /** Entries in queue order, one at a time (for scans that stop early). */
  *entries(): Generator<QueueEntry<T>> {
    let n = this.nodeAt(0);
    while (n !== null) {
      const next = this.successor(n);
      yield { id: n.id, key: n.key, value: n.value };
      n = next;
    }
  }

  /** Entries in queue order, from `from` (0-based), at most `limit`. */
  slice(from = 0, limit = Number.POSITIVE_INFINITY): QueueEntry<T>[] {
    const out: QueueEntry<T>[] = [];
    let n = this.nodeAt(from);
    while (n !== null && out.length < limit) {
      out.push({ id: n.id, key: n.key, value: n.value });
      n = this.successor(n);
    }
    return out;
  }

  private nodeAt(position: number): Node<T> | null {
    let n = this.root;
    let p = position;
    while (n !== null) {
      const l = sz(n.left);
      if (p < l) n = n.left;
      else if (p === l) return n;
      else {
        p -= l + 1;
        n = n.right;
      }
    }
    return null;
  }

  private successor(n: Node<T>): Node<T> | null {
    if (n.right !== null) {
      let s = n.right;
      while (s.left !== null) s = s.left;
      return s;
    }
    let c = n;
    while (c.parent !== null && c === c.parent.right) c = c.parent;
    return c.parent;
  }

  private replace(node: Node<T>, child: Node<T> | null): void {
    const p = node.parent;
    if (child !== null) child.parent = p;
    if (p === null) this.root = child;
    else if (p.left === node) p.left = child;
    else p.right = child;
  }

  private update(n: Node<T>): void {
    n.height = Math.max(h(n.left), h(n.right)) + 1;
    n.size = sz(n.left) + sz(n.right) + 1;
  }

  private rotateLeft(x: Node<T>): Node<T> {
    const y = x.right!;
    x.right = y.left;
    if (y.left !== null) y.left.parent = x;
    this.replace(x, y);
    y.left = x;
    x.parent = y;
    this.update(x);
    this.update(y);
    return y;
  }

  private rotateRight(x: Node<T>): Node<T> {
    const y = x.left!;
    x.left = y.right;
    if (y.right !== null) y.right.parent = x;
    this.replace(x, y);
    y.right = x;
    x.parent = y;
    this.update(x);
    this.update(y);
    return y;
  }

  private rebalanceUp(from: Node<T>): void {
    let n: Node<T> | null = from;
    while (n !== null) {
      this.update(n);
      const bal = h(n.left) - h(n.right);
      if (bal > 1) {
        if (h(n.left!.left) < h(n.left!.right)) this.rotateLeft(n.left!);
        n = this.rotateRight(n);
      } else if (bal < -1) {
        if (h(n.right!.right) < h(n.right!.left)) this.rotateRight(n.right!);
        n = this.rotateLeft(n);
      }
      n = n.parent;
    }
  }
}
