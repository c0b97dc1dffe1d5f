// Where the CLI writes: results to stdout (text or JSON), diagnostics and progress to stderr; and the small
// renderers (tables, sizes, durations) the commands share.
export interface Stream {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface Output {
  json: boolean;
  stdout: Stream;
  stderr: Stream;
  /** A line of the result (text mode). */
  line(s?: string): void;
  /** The whole result as one JSON document on stdout. */
  printJson(v: unknown): void;
  /** A diagnostic on stderr. */
  note(s: string): void;
}

export function createOutput(stdout: Stream, stderr: Stream, json: boolean): Output {
  return {
    json,
    stdout,
    stderr,
    line: (s = '') => void stdout.write(`${s}\n`),
    printJson: (v) => void stdout.write(`${JSON.stringify(v, null, 2)}\n`),
    note: (s) => void stderr.write(`${s}\n`),
  };
}

/** Columns padded to their widest cell; the header row first. */
export function table(header: string[], rows: Array<Array<string | number | null | undefined>>): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[i]}`;
}

export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** `5s ago` style age of an ISO time, relative to `now`. */
export function formatAge(iso: string | null | undefined, now: number): string {
  if (!iso) return '-';
  const t = Date.parse(iso);
  return Number.isFinite(t) ? `${formatMs(Math.max(0, now - t))} ago` : '-';
}
