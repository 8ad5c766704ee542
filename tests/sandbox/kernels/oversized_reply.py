# ATTACK (the judge's memory, and every stored row): the worker's replies are the candidate's
# to forge, and the judge once allocated whatever output size a reply declared (a sparse reply
# grew it to 5.4 GB) and stored the worker's final state as sent (one row of 40 MB, served
# whole). This kernel rewrites, from inside its worker, every frame the channel sends
# (protocol.Channel._frame): with `declare_bytes`, each tensor it carries declares that many
# bytes (nothing of it written); with `state_mb`, its state reply ("probe") carries that many
# MB of patched names. Prints what it did (KB-ATTACK line).
import json
import sys

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import CONFIG, REPORT, attempt


def forge_frames():
    protocol = sys.modules.get("evaluator.protocol")
    if protocol is None:
        raise RuntimeError("no channel module in this process")
    original = protocol.Channel._frame
    declare, state_mb = CONFIG.get("declare_bytes"), CONFIG.get("state_mb")

    def forged(self, frame):
        if declare and isinstance(frame.get("tensors"), list):
            for meta in frame["tensors"]:
                meta.update(nbytes=declare, shape=[declare // 4], dtype="torch.float32")
        if state_mb and isinstance(frame.get("probe"), dict):
            name = f"torch.kb_attack_{CONFIG['tag']}_" + "x" * 40
            frame["probe"]["patched"] = [name] * (state_mb * (1 << 20) // (len(name) + 4))
        return original(self, frame)

    protocol.Channel._frame = forged
    return "frames forged: " + json.dumps({"declare_bytes": declare, "state_mb": state_mb})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        attempt("info_forge", forge_frames)
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Right answers (`correct`): the judge then goes through every check, the final
        # state's included; else zeros.
        return torch.relu(x) if CONFIG.get("correct") else torch.zeros_like(x)
