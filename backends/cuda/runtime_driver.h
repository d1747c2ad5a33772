// The process-wide Driver over the CUDA runtime and cuBLASLt (CUDA builds only).
#pragma once

#include <memory>

#include "driver.h"

namespace duet::cuda {

std::shared_ptr<Driver> runtime_driver();

}  // namespace duet::cuda
