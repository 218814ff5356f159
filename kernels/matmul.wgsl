// Batched register-blocked matmul: C[b] = op(A[b]) · op(B[b]).
//
// Each invocation computes a TM×TN block of C in registers (vec4 accumulators
// along N) and reads its operands straight from the storage buffers as vec4s:
// four consecutive K values of a row, or four consecutive rows / columns at
// one depth. There is no workgroup memory and no barrier: on CPU adapters
// such as llvmpipe every load is paid per invocation and a barrier spills the
// whole register block, so what counts is the FMA-per-load ratio
// TM·TN / (TM + TN). GPUs usually prefer `matmul_tiled.wgsl`; the host times
// both families per device and keeps the faster.
//
// Layouts: A is [M,K] (or [K,M] with TRANS_A), B is [K,N] (or [N,K] with
// TRANS_B), C is [M,N], with row strides lda / ldb / ldc (multiples of 4) and
// batch entries strideA / strideB / strideC floats apart (strideB = 0 shares
// one B across the batch). K here is a multiple of 4 and the operands hold
// zeros in their padding: the host pads operands whose shapes are not
// multiples of 4 (and crops C) so that one vec4 code path serves every shape.
// Rows and columns past M / N are clamped on load and never stored.

const TM: u32 = 16u; // rows per invocation, a multiple of 4
const TN: u32 = 16u; // columns per invocation, a multiple of 4
const WX: u32 = 8u;
const WY: u32 = 8u;
const TRANS_A: bool = false;
const TRANS_B: bool = false;

const TM4: u32 = TM / 4u;
const TN4: u32 = TN / 4u;

// Params at binding 0, shared by both matmul families:
//#include _matmul_params.wgsl

@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<f32>>;

@compute @workgroup_size(WX, WY, 1)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let batch = wid.z + p.offZ;
  let row0 = ((wid.y + p.offY) * WY + lid.y) * TM;
  let col0 = ((wid.x + p.offX) * WX + lid.x) * TN;
  // Element offsets, all multiples of 4 so that /4 indexes the vec4 arrays.
  let aBase = batch * p.strideA;
  let bBase = batch * p.strideB;
  // Clamped so that invocations past the edge still read valid data.
  let lastRow = p.M - 1u;
  let lastCol = p.N - 1u;

  var acc: array<vec4<f32>, TM * TN4>;
  //#unroll
  for (var i = 0u; i < TM * TN4; i++) {
    acc[i] = vec4<f32>(0.0);
  }
  //#endunroll

  for (var k0 = 0u; k0 < p.K; k0 += 4u) {
    // a[r] = A(row0 + r, k0 .. k0+3)
    var a: array<vec4<f32>, TM>;
    // b[kk * TN4 + j] = B(k0 + kk, col0 + 4j .. col0 + 4j + 3)
    var b: array<vec4<f32>, 4u * TN4>;

    if (TRANS_A) {
      // A is [K, M]: one load covers four rows at one depth; the 4×4
      // transposes below are free register renames on SIMD-per-lane targets.
      //#unroll
      for (var i = 0u; i < TM4; i++) {
        let m = min(row0 + i * 4u, lastRow & ~3u);
        var t: array<vec4<f32>, 4>;
        //#unroll
        for (var kk = 0u; kk < 4u; kk++) {
          t[kk] = A[(aBase + (k0 + kk) * p.lda + m) / 4u];
        }
        //#endunroll
        //#unroll
        for (var c = 0u; c < 4u; c++) {
          a[i * 4u + c] = vec4<f32>(t[0][c], t[1][c], t[2][c], t[3][c]);
        }
        //#endunroll
      }
      //#endunroll
    } else {
      // A is [M, K]: one load covers four depths of one row.
      //#unroll
      for (var r = 0u; r < TM; r++) {
        a[r] = A[(aBase + min(row0 + r, lastRow) * p.lda + k0) / 4u];
      }
      //#endunroll
    }

    if (TRANS_B) {
      // B is [N, K]: one load covers four depths of one column.
      //#unroll
      for (var j = 0u; j < TN4; j++) {
        var t: array<vec4<f32>, 4>;
        //#unroll
        for (var c = 0u; c < 4u; c++) {
          t[c] = B[(bBase + min(col0 + j * 4u + c, lastCol) * p.ldb + k0) / 4u];
        }
        //#endunroll
        //#unroll
        for (var kk = 0u; kk < 4u; kk++) {
          b[kk * TN4 + j] = vec4<f32>(t[0][kk], t[1][kk], t[2][kk], t[3][kk]);
        }
        //#endunroll
      }
      //#endunroll
    } else {
      // B is [K, N]: one load covers four columns at one depth.
      //#unroll
      for (var kk = 0u; kk < 4u; kk++) {
        //#unroll
        for (var j = 0u; j < TN4; j++) {
          let n = min(col0 + j * 4u, lastCol & ~3u);
          b[kk * TN4 + j] = B[(bBase + (k0 + kk) * p.ldb + n) / 4u];
        }
        //#endunroll
      }
      //#endunroll
    }

    //#unroll
    for (var r = 0u; r < TM; r++) {
      let av = a[r];
      //#unroll
      for (var j = 0u; j < TN4; j++) {
        var s = acc[r * TN4 + j];
        s = fma(vec4<f32>(av.x), b[j], s);
        s = fma(vec4<f32>(av.y), b[TN4 + j], s);
        s = fma(vec4<f32>(av.z), b[2u * TN4 + j], s);
        s = fma(vec4<f32>(av.w), b[3u * TN4 + j], s);
        acc[r * TN4 + j] = s;
      }
      //#endunroll
    }
    //#endunroll
  }

  let cBase = batch * p.strideC;
  //#unroll
  for (var r = 0u; r < TM; r++) {
    let row = row0 + r;
    //#unroll
    for (var j = 0u; j < TN4; j++) {
      let col = col0 + j * 4u;
      if (row < p.M && col < p.N) {
        C[(cBase + row * p.ldc + col) / 4u] = acc[r * TN4 + j];
      }
    }
    //#endunroll
  }
  //#endunroll
}
