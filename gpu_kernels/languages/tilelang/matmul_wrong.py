# WRONG (a plausible bug), for level1/1_Square_matrix_multiplication_: the same tiled fp32
# TileLang matmul as matmul_right.py, but its K loop runs ceildiv(K, block_K) - 1 times, so the
# last 16-wide K tile never enters the sum: every output misses 16 of its 4096 products (about
# 0.4% of its value, far past the 1e-4 tolerance). Every output is still written. Device kernel:
# `matmul_kernel`.
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
            # BUG: one K tile short (should be T.ceildiv(K, block_K)).
            for ko in T.Pipelined(T.ceildiv(K, block_K) - 1, num_stages=num_stages):
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
