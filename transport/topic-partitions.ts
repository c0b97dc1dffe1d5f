// Partition count of a topic the transport creates: `topicPartitions` by exact name, else by the longest pattern
// `<prefix>*` the name starts with (the per-agent assignment topics: `ndif.assignments.agent.*` → 1), else the
// default.
export function partitionsFor(
  topic: string,
  table: Readonly<Record<string, number>> | undefined,
  fallback: number,
): number {
  if (table === undefined) return fallback;
  const exact = table[topic];
  if (exact !== undefined) return exact;
  let best: string | undefined;
  for (const key of Object.keys(table))
    if (key.endsWith('*') && topic.startsWith(key.slice(0, -1)) && (best === undefined || key.length > best.length))
      best = key;
  return best === undefined ? fallback : table[best];
}
