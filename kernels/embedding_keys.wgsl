// First step of the sorted embedding backward: KEYS[i] = (id, i) for the
// N positions, (NONE, i) past them up to the padded power-of-two length
// (and for ids that are not integers in [0, V), which then match no row).
// bitonic_sort.wgsl then orders the keys by id, then position.

const NONE: u32 = 0xffffffffu;

struct Params {
  // Keys to write (the padded length), ids N, and table rows V.
  n: u32,
  count: u32,
  vocab: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> IDS: array<f32>;
@group(0) @binding(2) var<storage, read_write> KEYS: array<vec2<u32>>;

//#include _nan.wgsl

//#include _units.wgsl

fn unitMain(i: u32) {
  var id = NONE;
  if (i < p.count) {
    let v = IDS[i];
    if (!isNan(v) && v >= 0.0 && v < f32(p.vocab) && floor(v) == v) {
      id = u32(v);
    }
  }
  KEYS[i] = vec2<u32>(id, i);
}
