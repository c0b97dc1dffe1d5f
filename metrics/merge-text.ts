// Joins another process's Prometheus text to this one's: the families it has that this process does not (the
// embedded fabric's /metrics adds its agent child's ndif_agent_* and ndif_sandbox_* families, so one scrape has
// every series the dashboard reads). A family both export (Node's process_* and nodejs_*) stays this process's
// own: one exposition may hold a family once.

/** The family names of a Prometheus text exposition (its `# TYPE` lines). */
export function familyNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) /gm)) names.add(m[1]!);
  return names;
}

/** `own` followed by the families of `other` that `own` lacks, each with its HELP, TYPE and samples. */
export function mergeExposition(own: string, other: string): string {
  const have = familyNames(own);
  const kept: string[] = [];
  let current: string | null = null;
  let keep = false;
  for (const line of other.split('\n')) {
    const meta = /^# (?:HELP|TYPE) (\S+)/.exec(line);
    if (meta) {
      if (meta[1] !== current) {
        current = meta[1]!;
        keep = !have.has(current);
      }
    } else if (line === '' || line.startsWith('#')) continue;
    if (keep) kept.push(line);
  }
  if (kept.length === 0) return own;
  return `${own.endsWith('\n') ? own : `${own}\n`}${kept.join('\n')}\n`;
}
