// The canonical node order: a topological order that keeps every module's nodes contiguous wherever the graph
// allows, so a module's output is complete, and its inputs ready, at a single cut point.
//
// Hierarchical sort: within a module, its direct nodes and its child modules (each as one block) are sorted
// topologically, ties broken by the earliest file position of the item; each child block is then sorted the
// same way. When child blocks form a cycle at some level (a module whose nodes are interleaved with outside
// nodes that both feed and consume it), those children are dissolved into their own items and recorded as
// not contiguous. Deterministic: depends only on the graph.

export interface OrderInput {
  /** Nodes in file order: scope path and the indices of the nodes producing each input. */
  scopes: string[];
  producers: number[][];
}

export interface CanonicalOrder {
  /** order[k] = file index of the node at canonical position k. */
  order: number[];
  /** Module paths dissolved because their nodes could not be kept together. */
  dissolved: Set<string>;
}

function childUnder(scope: string, path: string): string | null {
  if (path === scope) return null;
  const rest = scope === '' ? path : path.slice(scope.length + 1);
  const first = rest.split('.')[0]!;
  return scope === '' ? first : `${scope}.${first}`;
}

export function canonicalOrder(input: OrderInput): CanonicalOrder {
  const dissolved = new Set<string>();
  const consumers: number[][] = input.scopes.map(() => []);
  input.producers.forEach((ps, i) => {
    ps.forEach((p) => {
      consumers[p]!.push(i);
    });
  });

  const orderWithin = (scope: string, members: number[]): number[] => {
    const memberSet = new Set(members);
    for (;;) {
      // Item of a node at this level: the outermost non-dissolved module between `scope` and the node's scope.
      const itemOf = new Map<number, string>();
      for (const n of members) {
        let s = scope;
        let item = `n:${n}`;
        for (;;) {
          const c = childUnder(s, input.scopes[n]!);
          if (c === null) break;
          if (!dissolved.has(c)) {
            item = `m:${c}`;
            break;
          }
          s = c;
        }
        itemOf.set(n, item);
      }
      const items = [...new Set(members.map((n) => itemOf.get(n)!))];
      const first = new Map<string, number>();
      const nodesOf = new Map<string, number[]>();
      for (const n of members) {
        const it = itemOf.get(n)!;
        first.set(it, Math.min(first.get(it) ?? Infinity, n));
        (nodesOf.get(it) ?? nodesOf.set(it, []).get(it)!).push(n);
      }
      const succ = new Map<string, Set<string>>(items.map((it) => [it, new Set<string>()]));
      for (const n of members) {
        for (const c of consumers[n]!) {
          if (!memberSet.has(c)) continue;
          const a = itemOf.get(n)!;
          const b = itemOf.get(c)!;
          if (a !== b) succ.get(a)!.add(b);
        }
      }
      const cyclic = cyclicItems(items, succ);
      if (cyclic.length > 0) {
        for (const it of cyclic) if (it.startsWith('m:')) dissolved.add(it.slice(2));
        continue;
      }
      const sorted = kahn(items, succ, first);
      const out: number[] = [];
      for (const it of sorted) {
        if (it.startsWith('n:')) out.push(Number(it.slice(2)));
        else out.push(...orderWithin(it.slice(2), nodesOf.get(it)!));
      }
      return out;
    }
  };

  const all = input.scopes.map((_, i) => i);
  return { order: orderWithin('', all), dissolved };
}

function kahn(items: string[], succ: Map<string, Set<string>>, first: Map<string, number>): string[] {
  const indeg = new Map(items.map((it) => [it, 0]));
  for (const s of succ.values()) for (const b of s) indeg.set(b, indeg.get(b)! + 1);
  const heap = new MinHeap<string>((a, b) => first.get(a)! - first.get(b)!);
  for (const it of items) if (indeg.get(it) === 0) heap.push(it);
  const out: string[] = [];
  while (heap.size > 0) {
    const it = heap.pop();
    out.push(it);
    for (const b of succ.get(it)!) {
      const d = indeg.get(b)! - 1;
      indeg.set(b, d);
      if (d === 0) heap.push(b);
    }
  }
  if (out.length !== items.length) throw new Error('graph has a cycle: ONNX graphs must be acyclic');
  return out;
}

class MinHeap<T> {
  private readonly a: T[] = [];
  constructor(private readonly less: (x: T, y: T) => number) {}

  get size(): number {
    return this.a.length;
  }

  push(v: T): void {
    const a = this.a;
    a.push(v);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.less(a[i]!, a[p]!) >= 0) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  pop(): T {
    const a = this.a;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.less(a[l]!, a[m]!) < 0) m = l;
        if (r < a.length && this.less(a[r]!, a[m]!) < 0) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

/** Items in strongly connected components of size > 1 (Tarjan, iterative). */
function cyclicItems(items: string[], succ: Map<string, Set<string>>): string[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const result: string[] = [];
  let counter = 0;
  for (const root of items) {
    if (index.has(root)) continue;
    const work: Array<{ v: string; it: Iterator<string> }> = [];
    const visit = (v: string) => {
      index.set(v, counter);
      low.set(v, counter);
      counter++;
      stack.push(v);
      onStack.add(v);
      work.push({ v, it: succ.get(v)![Symbol.iterator]() });
    };
    visit(root);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const next = top.it.next();
      if (!next.done) {
        const w = next.value;
        if (!index.has(w)) visit(w);
        else if (onStack.has(w)) low.set(top.v, Math.min(low.get(top.v)!, index.get(w)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.v;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.v)!));
      }
      if (low.get(top.v) === index.get(top.v)) {
        const comp: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          comp.push(w);
        } while (w !== top.v);
        if (comp.length > 1) result.push(...comp);
      }
    }
  }
  return result;
}
