// The tensor API beyond tensor.ts, by family; importing this file adds them to Tensor (docs/runtime.md, "Training").
import '../trainable.js';
import './elementwise.js';
import './shape.js';
import './reductions.js';
import './einsum.js';
