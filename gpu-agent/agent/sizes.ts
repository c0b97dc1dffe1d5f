// Byte sizes as operators write them: 24GiB, 512MiB, 16GB, 1.5TiB, or a plain byte count.
const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

/** Bytes, or undefined when `text` is not a size. */
export function parseBytes(text: string): number | undefined {
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  if (!m) return undefined;
  const unit = UNITS[m[2].toLowerCase()];
  if (unit === undefined) return undefined;
  const bytes = Math.round(Number(m[1]) * unit);
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined;
}
