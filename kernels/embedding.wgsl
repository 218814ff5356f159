// Row gather: out[i, c] = table[ids[i], c], one unit per invocation on a 2-D
// grid (a vec4 of columns with VEC, when C is a multiple of 4; else a float).
// Ids are integers stored as f32; an id that is not an integer in [0, V)
// yields a NaN row; the host refuses such ids before dispatching, or, for
// ids computed on the device, reports them after (check_indices.wgsl).

const VEC: bool = false;

struct Params {
  // Units in the output, units per row (C or C / 4), and table rows V.
  n: u32,
  cols: u32,
  vocab: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
//#if VEC
@group(0) @binding(1) var<storage, read> TABLE: array<vec4<f32>>;
//#else
@group(0) @binding(1) var<storage, read> TABLE: array<f32>;
//#endif
@group(0) @binding(2) var<storage, read> IDS: array<f32>;
//#if VEC
@group(0) @binding(3) var<storage, read_write> O: array<vec4<f32>>;
//#else
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
//#endif

//#include _units.wgsl

fn unitMain(i: u32) {
  let pos = i / p.cols;
  let c = i % p.cols;
  let id = IDS[pos];
  let ok = id >= 0.0 && id < f32(p.vocab) && floor(id) == id;
  let row = min(u32(max(id, 0.0)), p.vocab - 1u);
  let v = TABLE[row * p.cols + c];
  // Built at run time: a NaN constant expression is a shader-creation error.
  let nan = bitcast<f32>(0x7fc00000u | (p.n & 0u));
  O[i] = select(v * 0.0 + nan, v, ok);
}
