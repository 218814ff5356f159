// NaN tests for kernels that must keep NaN (NaN in gives NaN out). Not a
// kernel: taken in with `//#include _nan.wgsl`. NaN is recognised by its
// bits: `x != x`, `max` and `clamp` cannot be trusted with NaN, since WGSL
// implementations may assume there is none.

fn isNan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn isNan4(x: vec4<f32>) -> vec4<bool> {
  return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
}

// A NaN in every lane, built from the bits of x at run time: a NaN constant
// expression is a shader-creation error, and arithmetic such as inf - inf
// may be folded to 0 by compilers that assume there is no NaN.
fn nan4(x: vec4<f32>) -> vec4<f32> {
  return bitcast<vec4<f32>>((bitcast<vec4<u32>>(x) & vec4<u32>(0u)) | vec4<u32>(0x7fc00000u));
}
