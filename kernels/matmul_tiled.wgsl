// Batched matmul with workgroup-shared tiles: C[b] = op(A[b]) · op(B[b]).
//
// The classic GPU layout: a workgroup of WX×WY invocations stages a BM×BK
// slice of A and a BK×BN slice of B in workgroup memory (BM = WY·TM,
// BN = WX·TN), then each invocation accumulates a TM×TN register block from
// the shared tiles. Global loads are scalar and bounds-checked, so any M, N, K
// and either transpose work; the host times this family against
// `matmul.wgsl` (no shared memory) per device and keeps the faster.
//
// Layouts and Params as in matmul.wgsl.

const TM: u32 = 4u; // rows per invocation, a multiple of 4
const TN: u32 = 4u; // columns per invocation, a multiple of 4
const WX: u32 = 16u;
const WY: u32 = 16u;
const BK: u32 = 16u;
const TRANS_A: bool = false;
const TRANS_B: bool = false;

const BM: u32 = WY * TM;
const BN: u32 = WX * TN;
const BM4: u32 = BM / 4u;
const BN4: u32 = BN / 4u;
const TM4: u32 = TM / 4u;
const TN4: u32 = TN / 4u;
const NT: u32 = WX * WY;
// Staging work per invocation (vec4 units); the host keeps these integral.
const LOAD_A: u32 = BK * BM4 / NT;
const LOAD_B: u32 = BK * BN4 / NT;

// Params at binding 0, shared by both matmul families:
//#include _matmul_params.wgsl

@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;

// As[k * BM4 + m4] holds rows 4·m4 … 4·m4+3 of the tile at depth k.
var<workgroup> As: array<vec4<f32>, BK * BM4>;
// Bs[k * BN4 + n4] holds columns 4·n4 … 4·n4+3 of the tile at depth k.
var<workgroup> Bs: array<vec4<f32>, BK * BN4>;

fn loadA(base: u32, m: u32, k: u32) -> f32 {
  if (m >= p.M || k >= p.K) {
    return 0.0;
  }
  if (TRANS_A) {
    return A[base + k * p.lda + m];
  }
  return A[base + m * p.lda + k];
}

fn loadB(base: u32, k: u32, n: u32) -> f32 {
  if (k >= p.K || n >= p.N) {
    return 0.0;
  }
  if (TRANS_B) {
    return B[base + n * p.ldb + k];
  }
  return B[base + k * p.ldb + n];
}

@compute @workgroup_size(WX, WY, 1)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let batch = wid.z + p.offZ;
  let row0 = (wid.y + p.offY) * BM;
  let col0 = (wid.x + p.offX) * BN;
  let tid = lid.y * WX + lid.x;
  let aBase = batch * p.strideA;
  let bBase = batch * p.strideB;

  var acc: array<vec4<f32>, TM * TN4>;
  //#unroll
  for (var i = 0u; i < TM * TN4; i++) {
    acc[i] = vec4<f32>(0.0);
  }
  //#endunroll

  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    // Consecutive invocations walk the contiguous global dimension (k
    // without transpose, m or n with it) so global loads coalesce.
    //#unroll
    for (var l = 0u; l < LOAD_A; l++) {
      let u = tid + l * NT;
      var k: u32;
      var m4: u32;
      if (TRANS_A) {
        k = u / BM4;
        m4 = u % BM4;
      } else {
        k = u % BK;
        m4 = u / BK;
      }
      let m = row0 + m4 * 4u;
      let kk = k0 + k;
      As[k * BM4 + m4] = vec4<f32>(
        loadA(aBase, m, kk),
        loadA(aBase, m + 1u, kk),
        loadA(aBase, m + 2u, kk),
        loadA(aBase, m + 3u, kk),
      );
    }
    //#endunroll
    //#unroll
    for (var l = 0u; l < LOAD_B; l++) {
      let u = tid + l * NT;
      var k: u32;
      var n4: u32;
      if (TRANS_B) {
        k = u % BK;
        n4 = u / BK;
      } else {
        k = u / BN4;
        n4 = u % BN4;
      }
      let n = col0 + n4 * 4u;
      let kk = k0 + k;
      Bs[k * BN4 + n4] = vec4<f32>(
        loadB(bBase, kk, n),
        loadB(bBase, kk, n + 1u),
        loadB(bBase, kk, n + 2u),
        loadB(bBase, kk, n + 3u),
      );
    }
    //#endunroll
    workgroupBarrier();

    for (var k = 0u; k < BK; k++) {
      var a: array<vec4<f32>, TM4>;
      var b: array<vec4<f32>, TN4>;
      //#unroll
      for (var i = 0u; i < TM4; i++) {
        a[i] = As[k * BM4 + lid.y * TM4 + i];
      }
      //#endunroll
      //#unroll
      for (var j = 0u; j < TN4; j++) {
        b[j] = Bs[k * BN4 + lid.x * TN4 + j];
      }
      //#endunroll
      //#unroll
      for (var r = 0u; r < TM; r++) {
        let av = vec4<f32>(a[r / 4u][r % 4u]);
        //#unroll
        for (var j = 0u; j < TN4; j++) {
          acc[r * TN4 + j] = fma(av, b[j], acc[r * TN4 + j]);
        }
        //#endunroll
      }
      //#endunroll
    }
    workgroupBarrier();
  }

  let cBase = batch * p.strideC;
  //#unroll
  for (var r = 0u; r < TM; r++) {
    let row = row0 + lid.y * TM + r;
    //#unroll
    for (var j = 0u; j < TN4; j++) {
      let col = col0 + lid.x * TN + j * 4u;
      let v = acc[r * TN4 + j];
      let o = cBase + row * p.ldc + col;
      if (row < p.M) {
        //#unroll
        for (var e = 0u; e < 4u; e++) {
          if (col + e < p.N) {
            C[o + e] = v[e];
          }
        }
        //#endunroll
      }
    }
    //#endunroll
  }
  //#endunroll
}
