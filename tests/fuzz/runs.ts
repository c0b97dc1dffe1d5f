// How many cases a fuzz test draws: its default count (`npm test`), or with NDIF_FUZZ=long its long count, the same
// generators and seed drawing more cases (fast-check draws the same sequence for a seed, so the default run is the
// long run's beginning). The long run is for a change to what a fuzz test drives, and before a release
// (docs/reliability.md, "Bad input"). Counts a test asserts on (how many cases reached a branch) scale with `share`.
export const FUZZ_LONG = process.env.NDIF_FUZZ === 'long';

export function fuzzRuns(short: number, long: number): number {
  return FUZZ_LONG ? long : short;
}

/** At least `perLong` cases of `long` in a long run, the same share of `runs` in a shorter one. */
export function share(perLong: number, long: number, runs: number): number {
  return Math.floor((perLong * runs) / long);
}
