#version 450
// Rotates x in place: one invocation per (token, head, pair). cos/sin come from a table
// [n_tokens][n_rot / 2] of (cos, sin) that the host fills per step with llama.cpp's float theta
// recurrence (the CPU reference's exact values; GPU sin/cos of angles up to n_ctx radians
// are not accurate enough). NORM rotates (x[2i], x[2i+1]); NEOX (x[i], x[i + n_rot/2]).
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Table { vec2 cs[]; };
layout(push_constant) uniform Params {
  uint n_cols;    // row length of x
  uint n_head;
  uint head_dim;
  uint n_rot;
  uint neox;
  uint n_tokens;
} p;

void main() {
  uint half_rot = p.n_rot / 2u;
  uint i = gl_GlobalInvocationID.x;
  if (i >= p.n_tokens * p.n_head * half_rot) return;
  uint pair = i % half_rot;
  uint h = (i / half_rot) % p.n_head;
  uint t = i / (half_rot * p.n_head);
  uint base = t * p.n_cols + h * p.head_dim;
  uint a = p.neox != 0u ? pair : 2u * pair;
  uint b = p.neox != 0u ? pair + half_rot : 2u * pair + 1u;
  vec2 c = cs[t * half_rot + pair];
  float x0 = x[base + a];
  float x1 = x[base + b];
  precise float y0 = x0 * c.x - x1 * c.y;
  precise float y1 = x0 * c.y + x1 * c.x;
  x[base + a] = y0;
  x[base + b] = y1;
}
