// What the benchmarks share: a numeric `--name value` argument, the median and quantiles of a sample, rounding,
// and interleaved rounds of variants.

export function numberArg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : fallback;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

/** The nearest-rank `q` quantile (0 < q ≤ 1) of a sample: the smallest value with at least q of the sample at or below it. */
export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? Number.NaN;
}

/** `x` with `digits` decimals, as a number (for the JSON lines). */
export function round(x: number, digits = 2): number {
  return Number(x.toFixed(digits));
}

/**
 * Runs each named variant once per round, rotating their order each round so drift on a shared machine hits all
 * alike, until `rounds` are done or `budgetMs` has passed; returns each variant's wall times and the rounds run.
 */
export async function interleavedRounds(
  names: string[],
  rounds: number,
  budgetMs: number,
  runOne: (name: string) => Promise<unknown>,
): Promise<{ times: Record<string, number[]>; rounds: number }> {
  const times: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const t0 = performance.now();
  let done = 0;
  while (done < rounds) {
    for (let k = 0; k < names.length; k++) {
      const n = names[(done + k) % names.length]!;
      const ts = performance.now();
      await runOne(n);
      times[n]!.push(performance.now() - ts);
    }
    done++;
    if (performance.now() - t0 > budgetMs) break;
  }
  return { times, rounds: done };
}
