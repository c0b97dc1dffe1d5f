// What a block may report as progress (`ctx.report(v)`): a finite number (a loss) or an object of at most 8 finite
// numbers keyed by short names ({ loss, acc }). It travels as JSON text in a REPORT message and lands in a session's
// TRACE statuses; anything else is refused where the block calls report, so a status never carries unbounded data.
export type ReportedValue = number | Record<string, number>;

export const REPORT_LIMITS = { keys: 8, keyChars: 32 } as const;

/** Why `v` cannot be reported, or undefined when it can. */
export function reportProblem(v: unknown): string | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? undefined : `${v} is not a finite number`;
  if (v === null || typeof v !== 'object' || Array.isArray(v) || Object.getPrototypeOf(v) !== Object.prototype)
    return `a ${v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v} is neither a number nor a plain object of numbers`;
  const entries = Object.entries(v);
  if (entries.length === 0 || entries.length > REPORT_LIMITS.keys)
    return `an object of ${entries.length} keys (1 to ${REPORT_LIMITS.keys})`;
  for (const [k, x] of entries) {
    if (k.length === 0 || k.length > REPORT_LIMITS.keyChars)
      return `key ${JSON.stringify(k.slice(0, 40))} is not 1 to ${REPORT_LIMITS.keyChars} characters`;
    if (typeof x !== 'number' || !Number.isFinite(x)) return `${k} is not a finite number`;
  }
  return undefined;
}

/** The value a REPORT message carries, or undefined when its text is not a reportable value. */
export function parseReported(text: string): ReportedValue | undefined {
  if (text.length > 1024) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  return reportProblem(v) === undefined ? (v as ReportedValue) : undefined;
}
