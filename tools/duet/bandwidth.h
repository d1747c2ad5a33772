// The host's memory read bandwidth, measured: the yardstick `duet bench` holds memory-bound
// rows against (decode mat-vec, decode attention, element-wise ops) on devices that read host
// memory (the CPU, and CPU-type Vulkan devices such as lavapipe).
#pragma once

#include <cstdint>

namespace duet::cli {

// The fastest pass is the figure: on a machine shared with other work it is the closest to what
// the memory can deliver, so fractions of it never flatter a kernel.
struct ReadBandwidth {
  double gbps = 0;         // the fastest timed pass
  double median_gbps = 0;  // the median pass (how loaded the machine was)
  int threads = 0;         // threads that read, each its own contiguous part
  int passes = 0;          // timed passes (after one untimed pass)
  uint64_t bytes = 0;      // buffer read per pass, several times the last-level cache
};

// Reads a buffer much larger than the last-level cache on `threads` threads (each streams its
// own contiguous part, as a mat-vec over a weight split by rows does) and reports the rate.
// Takes about 0.2 s on a machine with tens of GB/s.
ReadBandwidth measure_read_bandwidth(int threads);

}  // namespace duet::cli
