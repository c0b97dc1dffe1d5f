// Kafka's default partitioner (murmur2 of the key bytes, as the Java client and kafkajs compute it),
// so a key lands in the same partition in-process and on a Kafka topic with the same partition count.

export function murmur2(data: Uint8Array): number {
  const m = 0x5bd1e995;
  const length = data.length;
  let h = (0x9747b28c ^ length) | 0;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  const rest = length & ~3;
  const tail = length % 4;
  if (tail >= 3) h ^= data[rest + 2] << 16;
  if (tail >= 2) h ^= data[rest + 1] << 8;
  if (tail >= 1) {
    h ^= data[rest];
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

export function partitionFor(key: string, partitions: number): number {
  return (murmur2(Buffer.from(key, 'utf8')) & 0x7fffffff) % partitions;
}
