#version 450
// Elementwise ops, one invocation per element (MODE spec constant, one pipeline each):
// 0 add: dst = a + b; 1 silu_mul: dst = a / (1 + exp(-a)) * b; 2 relu2_mul: dst = relu(a)^2 * b;
// 3 scale: dst = a * b[0] (b: the 1-element .scale weight); 4 bias: dst = a + b[i % cols]
// (b: one row, a linear's bias). dst may alias a or b.
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0u;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint n;
  uint cols;  // bias only
} p;

void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.n) return;
  float x = a[i];
  precise float y;
  if (MODE == 0u) {
    y = x + b[i];
  } else if (MODE == 1u) {
    y = x / (1.0 + exp(-x)) * b[i];
  } else if (MODE == 2u) {
    float r = max(x, 0.0);
    y = r * r * b[i];
  } else if (MODE == 3u) {
    y = x * b[0];
  } else {
    y = x + b[i % p.cols];
  }
  dst[i] = y;
}
