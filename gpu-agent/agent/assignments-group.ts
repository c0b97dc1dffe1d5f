// The agent's consumer group on the assignments topic: one per agent and topic. Kafka groups are shared by name
// across a broker, and kafkajs assigns the partitions of every topic any member subscribes to among all the
// group's members; two fabrics on one broker with the same agent id (different topics) in one group took each
// other's partitions, and one's restart stalled the other for a session timeout.
import { createHash } from 'node:crypto';

const MAX_GROUP_ID = 255;

export function assignmentsGroupId(agentId: string, topic: string): string {
  const plain = `agent-${agentId}.${topic}`;
  if (plain.length <= MAX_GROUP_ID) return plain;
  return `agent-${agentId}.${createHash('sha256').update(topic).digest('hex').slice(0, 32)}`;
}
