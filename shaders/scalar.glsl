// The op's run-time scalar (rope's position, attention's key count, write_slice's offset: an i32
// the host never reads, so that a new value needs no new dispatch parameters) at binding 11, and
// the error words at binding 12 through which a shader reports a bad value: the host turns a set
// slot into the op's error at synchronize(). Include after common.glsl.
layout(std430, set = 0, binding = 11) readonly buffer RuntimeScalar { int rt_scalar[]; };
layout(std430, set = 0, binding = 12) buffer RuntimeErrors { uint rt_error[]; };

bool has_runtime_scalar() {
  return P.rt.x != 0u;
}
int runtime_scalar() {
  return rt_scalar[P.rt.x - 1u];
}
// Records `v` as the bad value of this op's error slot.
void report_bad_value(int v) {
  atomicMax(rt_error[2u * P.rt.y], 1u);
  rt_error[2u * P.rt.y + 1u] = uint(v);
}
