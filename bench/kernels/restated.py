"""PyTorch kernels for KernelBench's level-2 GEMM problems at their real sizes, for the sharing
bench's real mix: the right one restates the problem (its ModelNew is the problem's own Model),
the wrong one shifts the output by 0.125, which no tolerance accepts. They are evaluated as any
PyTorch submission is (trials, timing, the profiled call) and cost no build: what a stream of
many small problems asks of a runner beside the large ones.

    from bench.kernels.restated import write_restated
    mix = write_restated(folder, kernelbench, 30)  # [(problem file, kernel file, "torch"), ...]
"""

from __future__ import annotations

import re
from pathlib import Path

RIGHT = '''

class ModelNew(Model):
    pass
'''

WRONG = '''

class ModelNew(Model):
    def forward(self, *args):
        return super().forward(*args) + 0.125
'''

# A GEMM (or batched matmul) with its epilogue; dropout draws at random, so it is left out.
_GEMM = re.compile(r"Gemm|Matmul|BMM")


def gemm_problems(kernelbench: Path, count: int | None = None) -> list[str]:
    """The level-2 GEMM problems' files, by problem number."""
    names = [p.name for p in (Path(kernelbench) / "level2").glob("*.py")
             if _GEMM.search(p.name) and "Dropout" not in p.name]
    names.sort(key=lambda name: int(name.split("_", 1)[0]))
    return [f"level2/{name}" for name in names[:count]]


def write_restated(folder: Path, kernelbench: Path, count: int,
                   wrong_every: int = 4) -> list[tuple[str, str, str]]:
    """Write a kernel for each of the first `count` GEMM problems into `folder`, every
    `wrong_every`-th one wrong; their (problem, file, "torch")."""
    folder.mkdir(parents=True, exist_ok=True)
    mix = []
    for index, problem_file in enumerate(gemm_problems(kernelbench, count)):
        wrong = index % wrong_every == wrong_every - 1
        path = folder / f"{Path(problem_file).stem}_restated_{'wrong' if wrong else 'right'}.py"
        source = (Path(kernelbench) / problem_file).read_text()
        path.write_text(source + (WRONG if wrong else RIGHT))
        mix.append((problem_file, str(path), "torch"))
    return mix
