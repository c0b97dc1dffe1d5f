// The names a block's module proxy `m` uses for its own API (gpu-agent/block/api/model-proxy.ts): a child module with
// one of these names is reached through `.module('<name>')`, never as a property (`ndif types` writes it so too).
export const BLOCK_API_NAMES: ReadonlySet<string> = new Set([
  'output',
  'outputs',
  'input',
  'inputs',
  'namedInputs',
  'call',
  'skip',
  'path',
  'module',
  'children',
  'length',
  'step',
  'stop',
  'steps',
  'iter',
  'all',
]);
