// Cooperative matrices (SPV_KHR_cooperative_matrix) for glslang 12, which predates
// GL_KHR_cooperative_matrix: the matrix types and instructions declared through
// GL_EXT_spirv_intrinsics. glslang writes a spirv_type's parameters as literal words; the build
// tool shaders/spirv_coopmat.cpp turns them into what OpTypeCooperativeMatrixKHR takes (the
// component type, here written 16 for f16 and 32 for f32, and the ids of integer constants for
// scope, rows, columns and use), checks every matrix instruction, and writes the NV twin that
// spirv-val validates.
//
// Matrices are 16x16x16: A (16 x 16 f16), B (16 x 16 f16), accumulator (16 x 16 f32), subgroup
// scope (3). Use: 0 A, 1 B, 2 accumulator. Layout (an int constant): 0 row-major, 1 column-major.
#extension GL_EXT_spirv_intrinsics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#define CM_EXT extensions = ["SPV_KHR_cooperative_matrix"], capabilities = [6022]
#define CM_A spirv_type(CM_EXT, id = 4456, 16, 3, 16, 16, 0)
#define CM_B spirv_type(CM_EXT, id = 4456, 16, 3, 16, 16, 1)
#define CM_C spirv_type(CM_EXT, id = 4456, 32, 3, 16, 16, 2)
#define CM_ROW_MAJOR 0
#define CM_COLUMN_MAJOR 1

// OpCooperativeMatrixLoadKHR: the matrix whose element (r, c) is at p[r * stride + c] (row-major)
// or p[c * stride + r] (column-major), p the element passed by reference.
spirv_instruction(CM_EXT, id = 4457) CM_A cm_load_a(spirv_by_reference float16_t p, int layout_,
                                                    uint stride);
spirv_instruction(CM_EXT, id = 4457) CM_B cm_load_b(spirv_by_reference float16_t p, int layout_,
                                                    uint stride);
// OpCooperativeMatrixStoreKHR.
spirv_instruction(CM_EXT, id = 4458) void cm_store_c(spirv_by_reference float p, CM_C m,
                                                     int layout_, uint stride);
// OpCooperativeMatrixMulAddKHR: a * b + c.
spirv_instruction(CM_EXT, id = 4459) CM_C cm_muladd(CM_A a, CM_B b, CM_C c);
// OpCompositeConstruct with one constituent: every element x.
spirv_instruction(id = 80) CM_C cm_fill_c(float x);
