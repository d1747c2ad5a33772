// duet from C++: build a graph, run it on this machine's devices, see where each op ran.
#include <cstdio>

#include <duet/builtin_engine.h>

int main() {
  duet::GraphBuilder b("hello");
  duet::ValueId x = b.input("x", duet::DType::f32, {4, 8});
  duet::ValueId w = b.input("w", duet::DType::f32, {8, 8});
  b.output(b.softmax(b.matmul(x, w, false, "xw"), "y"));
  auto graph = b.build();
  auto engine = graph.ok() ? duet::open_engine(std::move(*graph)) : graph.status();
  if (!engine.ok()) return std::fprintf(stderr, "%s\n", engine.status().message().c_str()), 1;

  duet::HostTensor xs =
      duet::HostTensor::empty(duet::TensorDesc::contiguous(duet::DType::f32, {4, 8}));
  duet::HostTensor ws =
      duet::HostTensor::empty(duet::TensorDesc::contiguous(duet::DType::f32, {8, 8}));
  for (int i = 0; i < 32; ++i) xs.data<float>()[i] = 0.1f * static_cast<float>(i % 8);
  for (int i = 0; i < 64; ++i) ws.data<float>()[i] = i % 9 == 0 ? 1.0f : 0.0f;  // identity
  auto out = (*engine)->run({{"x", xs}, {"w", ws}});
  if (!out.ok()) return std::fprintf(stderr, "%s\n", out.status().message().c_str()), 1;

  std::printf("y[0][7] = %.4f\n", out->at("y").data<float>()[7]);
  for (const duet::PlanStep& s : (*engine)->plan().steps)
    if (s.kind == duet::StepKind::kernel)
      std::printf("%s: %s, %s, %s\n", s.name.c_str(),
                  (*engine)->plan().device_name(s.device).c_str(),
                  std::string(duet::precision_name(s.op.choice.precision)).c_str(),
                  std::string(duet::tier_name(s.op.choice.tier)).c_str());
  return 0;
}
