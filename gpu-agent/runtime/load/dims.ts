// Symbolic tensor dimensions as integer-coefficient functions of batch size b and sequence length t:
// dim = k + b·B + t·T + bt·(b·t). Fitted from probe runs at a few (b, t) and checked on one more.

export interface DimFit {
  k: number;
  b: number;
  t: number;
  bt: number;
}

export interface ProbePoint {
  batch: number;
  seq: number;
}

export function resolveDim(d: DimFit, batch: number, seq: number): number {
  return d.k + d.b * batch + d.t * seq + d.bt * batch * seq;
}

export function formatDim(d: DimFit): string {
  const terms: string[] = [];
  const term = (c: number, sym: string) => {
    if (c === 0) return;
    terms.push(c === 1 ? sym : c === -1 ? `-${sym}` : `${c}*${sym}`);
  };
  term(d.bt, 'batch*sequence');
  term(d.b, 'batch');
  term(d.t, 'sequence');
  if (d.k !== 0 || terms.length === 0) terms.push(String(d.k));
  return terms.join('+').replace(/\+-/g, '-');
}

/** Solves for the coefficients from observed dims; null when no integer fit explains every point. */
export function fitDim(points: ProbePoint[], values: number[]): DimFit | null {
  const varyB = new Set(points.map((p) => p.batch)).size > 1;
  const varyT = new Set(points.map((p) => p.seq)).size > 1;
  const basis: Array<keyof DimFit> = ['k'];
  if (varyB) basis.push('b');
  if (varyT) basis.push('t');
  if (varyB && varyT) basis.push('bt');
  const row = (p: ProbePoint): number[] =>
    basis.map((k) => (k === 'k' ? 1 : k === 'b' ? p.batch : k === 't' ? p.seq : p.batch * p.seq));
  const n = basis.length;
  if (points.length < n) return null;
  const a = points.slice(0, n).map((p, i) => [...row(p), values[i]!]);
  for (let c = 0; c < n; c++) {
    let piv = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(a[r]![c]!) > Math.abs(a[piv]![c]!)) piv = r;
    if (Math.abs(a[piv]![c]!) < 1e-12) return null;
    [a[c], a[piv]] = [a[piv]!, a[c]!];
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = a[r]![c]! / a[c]![c]!;
      for (let k = c; k <= n; k++) a[r]![k]! -= f * a[c]![k]!;
    }
  }
  const fit: DimFit = { k: 0, b: 0, t: 0, bt: 0 };
  for (let c = 0; c < n; c++) {
    const v = a[c]![n]! / a[c]![c]!;
    const r = Math.round(v);
    if (Math.abs(v - r) > 1e-6) return null;
    fit[basis[c]!] = r;
  }
  return points.every((p, i) => resolveDim(fit, p.batch, p.seq) === values[i]) ? fit : null;
}
