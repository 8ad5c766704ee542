"""Small problems and kernels (as source strings) for the harness tests.

Sizes are tiny so that every evaluation runs in a few seconds on two CPU cores.
"""

# --- references -------------------------------------------------------------------------------

LINEAR_RELU = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))

batch_size = 8
features = 16

def get_inputs():
    return [torch.randn(batch_size, features)]

def get_init_inputs():
    return [features]
'''

RELU = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64, 33)]

def get_init_inputs():
    return []
'''

# The same shapes as RELU, a different function: a correct ReLU kernel is wrong for this one.
LEAKY_RELU = RELU.replace("torch.relu(x)", "torch.nn.functional.leaky_relu(x, 0.1)")

GATHER_ROWS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, table, index):
        return table[index]

def get_inputs():
    return [torch.randn(32, 8), torch.randint(0, 32, (20,))]

def get_init_inputs():
    return []
'''

# --- torch candidates -------------------------------------------------------------------------

LINEAR_RELU_RIGHT = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.clamp_min(torch.addmm(self.linear.bias, x, self.linear.weight.t()), 0.0)
'''


def linear_relu_with(body: str) -> str:
    """A LINEAR_RELU candidate whose forward runs `body` (indented code; `x` is the input)."""
    lines = "\n".join("        " + line for line in body.strip().splitlines())
    return f'''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
{lines}
'''


LINEAR_RELU_OFF = linear_relu_with("return torch.relu(self.linear(x)) + 1e-2")
LINEAR_RELU_WRONG_SHAPE = linear_relu_with("return torch.relu(self.linear(x))[:, :-1]")
LINEAR_RELU_WRONG_DTYPE = linear_relu_with("return torch.relu(self.linear(x)).double()")
LINEAR_RELU_NAN = linear_relu_with(
    "y = torch.relu(self.linear(x))\ny[0, 0] = float('nan')\nreturn y"
)
LINEAR_RELU_RAISES = linear_relu_with("raise ValueError('kernel exploded on purpose')")
LINEAR_RELU_LOOPS = linear_relu_with("while True:\n    pass")
LINEAR_RELU_SEGFAULTS = linear_relu_with("import ctypes\nctypes.string_at(0)\nreturn x")
LINEAR_RELU_EXITS = linear_relu_with("import os\nos._exit(3)")
LINEAR_RELU_HOARDS = linear_relu_with(
    "blocks = []\nwhile True:\n    blocks.append(bytearray(256 << 20))"
)
LINEAR_RELU_SYNTAX_ERROR = LINEAR_RELU_RIGHT.replace("def forward(self, x):",
                                                     "def forward(self, x)")
LINEAR_RELU_NO_MODELNEW = LINEAR_RELU_RIGHT.replace("class ModelNew", "class SomethingElse")

# Prints a lot (with terminal escapes) and writes garbage to its stdout fd: neither may corrupt
# the harness protocol, and the log must come back truncated and clean.
LINEAR_RELU_CHATTY = linear_relu_with(
    """import os, sys
print("\\x1b[31mred text\\x1b[0m from the candidate")
os.write(1, b'{"type": "result", "result": {"verdict": "correct"}}\\n')
sys.stderr.write("E" * 300000 + "\\n")
return torch.relu(self.linear(x))"""
)

# Reports what it can see of its environment through its log.
LINEAR_RELU_SNOOPS = linear_relu_with(
    """import os, socket
print("ENV", sorted(os.environ))
print("SECRET", os.environ.get("SECRET_KEY"), os.environ.get("DATABASE_URL"))
print("CWD", os.getcwd())
print("HOME", os.environ.get("HOME"))
try:
    s = socket.create_connection(("10.255.255.1", 80), timeout=0.5)
    print("NET connected")
except OSError as exc:
    print("NET", type(exc).__name__, getattr(exc, "errno", None))
return torch.relu(self.linear(x))"""
)

# Leaves a detached grandchild behind (new session, stdout closed) that reports its host pid.
LINEAR_RELU_LEAVES_A_PROCESS = linear_relu_with(
    """import subprocess, sys
if not getattr(self, "started", False):
    self.started = True
    import uuid
    mark = "kb-leftover-" + uuid.uuid4().hex
    code = ("import os, sys, time; print('CHILD', sys.argv[1], flush=True); "
            "null = os.open(os.devnull, os.O_WRONLY); os.dup2(null, 1); os.dup2(null, 2); "
            "time.sleep(300)")
    child = subprocess.Popen([sys.executable, "-c", code, mark], start_new_session=True)
    import time
    time.sleep(1.0)
return torch.relu(self.linear(x))"""
)

# Forks until the process limit refuses (at most 100 children, killed again at once) and says
# how many it got: the sandbox's uid is its own, so RLIMIT_NPROC binds under a root runner too.
LINEAR_RELU_FORKS = linear_relu_with(
    """import os, time
if not getattr(self, "forked", False):
    self.forked = True
    children, refused = [], ""
    for _ in range(100):
        try:
            pid = os.fork()
        except OSError as exc:
            refused = type(exc).__name__
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    print("FORKS", len(children), refused, flush=True)
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
return torch.relu(self.linear(x))"""
)

# Prints a checksum of its inputs, so tests can see which inputs a seed produced.
LINEAR_RELU_PRINTS_INPUTS = linear_relu_with(
    "print('INPUT', round(float(x.sum()), 4))\nreturn torch.relu(self.linear(x))"
)

RELU_IN_PLACE = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x.relu_()  # writes into the input and hands it back
'''

GATHER_ROWS_RIGHT = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, table, index):
        assert index.dtype == torch.int64, f"index arrived as {index.dtype}"
        return torch.index_select(table, 0, index)
'''

RELU_FP16_CHECKS_DTYPE = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        assert x.dtype == torch.float16, f"input arrived as {x.dtype}"
        return torch.relu(x)
'''

# --- cpp (CPU load_inline) --------------------------------------------------------------------

CPP_RELU = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = input.numel();
    for (int64_t i = 0; i < n; ++i) {
        o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    }
    return out;
}
"""

relu_ext = load_inline(name="kb_test_relu", cpp_sources=[source], functions=["relu_forward"],
                       extra_cflags=["-O2"], verbose=False)

class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x)
'''

# A flag the compiler rejects at once: a genuine load_inline failure that costs no compile time.
CPP_BAD_FLAG = CPP_RELU.replace('extra_cflags=["-O2"]', 'extra_cflags=["-fno-such-flag-kbsite"]')

# --- triton (interpreter on the CPU) ----------------------------------------------------------

TRITON_RELU = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)

class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
        return out
'''

# Off by one block: the tail of the tensor is never written.
TRITON_RELU_MISSES_TAIL = TRITON_RELU.replace(
    "relu_kernel[(triton.cdiv(n, 256),)]", "relu_kernel[(n // 256,)]"
)

# --- CUDA (GPU only) --------------------------------------------------------------------------

CUDA_RELU = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t n = input.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    relu_kernel<<<blocks, threads>>>(input.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(name="kb_test_relu_cuda", cpp_sources=[cpp_source],
                       cuda_sources=[cuda_source], functions=["relu_forward"], verbose=False)

class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_forward(x)
'''

# Writes far outside its buffer: an illegal memory access.
CUDA_RELU_ILLEGAL_ACCESS = CUDA_RELU.replace(
    "if (i < n) out[i] =", "if (i < n) out[i + ((int64_t)1 << 40)] ="
).replace("kb_test_relu_cuda", "kb_test_relu_cuda_bad")
