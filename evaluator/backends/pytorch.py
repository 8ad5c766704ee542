"""Plain PyTorch: the reference's ops rewritten, no kernel of its own (nothing to check)."""

from evaluator.backends import Backend

BACKEND = Backend(
    name="torch",
    label="PyTorch",
    summary="faster PyTorch code (fused or cheaper operations, better memory layouts)",
    compiles=False,
    packages=("torch",),
)
