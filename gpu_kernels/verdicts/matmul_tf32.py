# A tiled Triton fp32 matmul, for level1/1_Square_matrix_multiplication_, with tl.dot at Triton's
# default precision: on fp32 operands that is TF32 (tensor cores, inputs cut to 10 mantissa
# bits), far outside fp32's 1e-4 tolerance at K = 4096. Expected: incorrect, with the diagnosis
# naming TF32 and the fix (input_precision="ieee"; matmul_ieee.py is the same kernel with it).
# On the CPU (Triton's interpreter) tl.dot is plain fp32 and this kernel passes.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tiled_matmul(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr,
                 sam, sak, sbk, sbn, scm, scn,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * sam + kk[None, :] * sak,
                    mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + cols[None, :] * sbn,
                    mask=(kk[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)  # the default input_precision: "tf32"
    tl.store(c_ptr + rows[:, None] * scm + cols[None, :] * scn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=torch.float32)
        bm, bn, bk = 128, 128, 32
        tiled_matmul[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
            A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
            C.stride(0), C.stride(1), BM=bm, BN=bn, BK=bk, num_warps=8, num_stages=3)
        return C
