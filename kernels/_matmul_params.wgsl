// The Params of the two matmul families (matmul.wgsl, matmul_tiled.wgsl),
// which the host dispatches alike, bound at binding 0. Not a kernel: taken
// in with the line `//#include _matmul_params.wgsl`. Layouts: see
// matmul.wgsl.

struct Params {
  M: u32,
  N: u32,
  K: u32,
  lda: u32,
  ldb: u32,
  ldc: u32,
  strideA: u32,
  strideB: u32,
  strideC: u32,
  // Offsets (in workgroups / batch entries) when a problem needs several
  // dispatches because it exceeds 65535 workgroups in some dimension.
  offX: u32,
  offY: u32,
  offZ: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
