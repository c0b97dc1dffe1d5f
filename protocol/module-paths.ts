// Module paths as users write them, and the nearest valid paths for an unknown one (both sides of the
// interleaving report UnknownModule with the same suggestions).

/** `transformer.h[5].mlp` → `transformer.h.5.mlp`. */
export function normalizePath(p: string): string {
  return p.replace(/\[(\d+)\]/g, '.$1').replace(/^\./, '');
}

export function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j]!;
      prev[j] = Math.min(up + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length]!;
}

/** Up to `n` candidates closest to `name` by edit distance (ties in candidate order). */
export function nearestPaths(name: string, candidates: readonly string[], n = 3): string[] {
  return candidates
    .filter((c) => c !== '')
    .map((c, i) => ({ c, i, d: editDistance(name, c) }))
    .sort((x, y) => x.d - y.d || x.i - y.i)
    .slice(0, n)
    .map((x) => x.c);
}

export function unknownModuleMessage(path: string, candidates: readonly string[]): string {
  const near = nearestPaths(path, candidates);
  return `the model has no module ${JSON.stringify(path)}${near.length ? `; nearest: ${near.join(', ')}` : ''}`;
}
