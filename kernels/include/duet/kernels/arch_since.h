/* The first NVIDIA architecture of each instruction family, written major*10 + minor (80 =
 * sm_80), from the PTX ISA. Plain macros, so that device code tests __CUDA_ARCH__ (major*100 +
 * minor*10) against the same numbers as the host's record of an architecture's features
 * (duet/kernels/arch.h, the only host code that reads them):
 *
 *   #if __CUDA_ARCH__ >= DUET_SM_CP_ASYNC * 10
 *
 * Architecture-specific features (wgmma on sm_90a, tcgen05 on sm_100a) exist only on their own
 * architecture and only in code compiled for its 'a' target; arch.h says which, and device code
 * tests nvcc's __CUDA_ARCH_FEAT_SM90_ALL (sm_90a) or __CUDA_ARCH_FEAT_SM100_ALL for them. */
#ifndef DUET_KERNELS_ARCH_SINCE_H
#define DUET_KERNELS_ARCH_SINCE_H

/* CUDA-core arithmetic */
#define DUET_SM_FP16_ARITH 53 /* half and half2 arithmetic */
#define DUET_SM_DP4A 61       /* dp4a / dp2a: 8-bit integer dot products */
#define DUET_SM_BF16 80       /* bf16 arithmetic and bf16 mma.sync operands */

/* Tensor cores (mma.sync) */
#define DUET_SM_MMA_F16_M8N8K4 70   /* the first tensor cores (Volta), and wmma */
#define DUET_SM_MMA_F16_M16N8K8 75  /* Turing */
#define DUET_SM_MMA_S8_M8N8K16 75   /* int8 operands, s32 accumulation */
#define DUET_SM_MMA_F16_M16N8K16 80 /* Ampere */
#define DUET_SM_MMA_S8_M16N8K32 80  /* and m16n8k16 s8 */
#define DUET_SM_MMA_TF32 80         /* m16n8k4, m16n8k8 tf32 */
#define DUET_SM_MMA_FP8 89          /* m16n8k32 e4m3 / e5m2 (Ada) */

/* Data movement and synchronisation */
#define DUET_SM_LDMATRIX 75   /* ldmatrix.m8n8 */
#define DUET_SM_CP_ASYNC 80   /* cp.async global -> shared, 4 to 16 bytes */
#define DUET_SM_MBARRIER 80   /* mbarrier objects in shared memory */
#define DUET_SM_REDUX 80      /* redux.sync warp reductions */
#define DUET_SM_CVT_PACKED 80 /* cvt.rn.f16x2.f32: two floats to a half2 in one instruction */

/* Hopper */
#define DUET_SM_TMA 90         /* cp.async.bulk and cp.async.bulk.tensor (the TMA unit) */
#define DUET_SM_MBARRIER_TX 90 /* mbarrier.expect_tx and try_wait: bulk-copy completion */
#define DUET_SM_CLUSTERS 90    /* thread block clusters, distributed shared memory */
#define DUET_SM_STMATRIX 90    /* stmatrix.m8n8 */
#define DUET_SM_WGMMA 90       /* wgmma.mma_async: sm_90a only (architecture-specific) */

#endif /* DUET_KERNELS_ARCH_SINCE_H */
