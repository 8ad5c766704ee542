"""A level-4-like reference: a model from the Hugging Face hub, built with transformers."""

import torch
from transformers import AutoConfig, AutoModelForCausalLM

model_name = "google/electra-small-discriminator"
config = AutoConfig.from_pretrained(model_name)


class Model(torch.nn.Module):
    def __init__(self, name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(name, config=config)

    def forward(self, x):
        return self.model(x).logits


def get_inputs():
    return [torch.randint(0, config.vocab_size, (1, 32))]


def get_init_inputs():
    return [model_name, config]
