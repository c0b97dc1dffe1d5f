// The text around a block's source when it is compiled (gpu-agent/block/host/compile.ts): the source's first line is
// line 1 of the script, so the user's line numbers hold. Kept apart from block-source.ts (which needs a parser) so
// the sandbox runner's small import graph stays free of packages.
export const BLOCK_PREFIX = '(function (console) { "use strict"; return (';
export const BLOCK_SUFFIX = '\n); })';
