// Which build of the kernels this is.
#pragma once

// The GPU build (duet_kernels_gpu, DUET_DEV_ABI=abi_gpu) and the emulator build (duet_kernels_emu)
// compile the same kernels; an inline namespace per build keeps their symbols apart, so both can
// live in one program (the CUDA backend's host tests run the emulator through the device).
#ifndef DUET_DEV_ABI
#define DUET_DEV_ABI abi_emu
#endif
