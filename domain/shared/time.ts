// Time in the domain is data: ISO-8601 UTC strings passed in with every command, converted here.

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

/** Epoch milliseconds of an ISO-8601 UTC timestamp; throws on anything else (a caller bug, not user input). */
export function toMs(at: string): number {
  const ms = ISO_UTC.test(at) ? Date.parse(at) : Number.NaN;
  if (!Number.isFinite(ms)) throw new TypeError(`not an ISO-8601 UTC timestamp: ${JSON.stringify(at)}`);
  return ms;
}

export function isIsoUtc(at: string): boolean {
  return ISO_UTC.test(at) && Number.isFinite(Date.parse(at));
}

export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}
