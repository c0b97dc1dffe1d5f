// Forensics over the event log: why (causal chains with the numbers), replay (projections as of a point, in a
// throwaway store), audit (indexed queries that refuse unrecorded filters), and their text renderings.
export * from './errors.js';
export * from './describe.js';
export * from './why.js';
export * from './why-text.js';
export * from './replay.js';
export * from './replay-diff.js';
export * from './replay-text.js';
export * from './audit.js';
export * from './audit-text.js';
