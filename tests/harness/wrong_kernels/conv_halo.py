"""A 3x3 convolution with zero padding whose tiles clamp their loads at the input's border
(replicate padding) instead of masking them to zero: only the output's border is wrong."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, channels_in, channels_out):
        super().__init__()
        self.conv = nn.Conv2d(channels_in, channels_out, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


class ModelNew(Model):
    def forward(self, x):
        halo = F.pad(x, (1, 1, 1, 1), mode="replicate")  # the bug: zeros expected
        return F.conv2d(halo, self.conv.weight, self.conv.bias)


def get_inputs():
    return [torch.randn(2, 3, 16, 16)]


def get_init_inputs():
    return [3, 8]
